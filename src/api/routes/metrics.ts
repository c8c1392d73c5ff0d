/**
 * GET /metrics (JSON) and GET /metrics/prometheus (text exposition format). Both are computed from
 * one {@link Ledger.metrics} call per request, so they cover every worker process on every host.
 */
import type { FastifyPluginAsyncTypebox } from "@fastify/type-provider-typebox";
import { Type } from "@sinclair/typebox";
import { Gauge, Registry } from "prom-client";
import type { ResolvedConfig } from "../../config.js";
import type { Ledger } from "../../queue/ledger.js";
import { JOB_STATUSES, type QueueMetrics } from "../../queue/types.js";
import { MetricsResponse, problemResponse } from "../schemas.js";

/** Options of {@link metricsRoutes}. */
export interface MetricsRoutesOptions {
  ledger: Ledger;
  config: ResolvedConfig;
}

/** Maps the ledger's figures to the wire shape of GET /metrics. */
export function toMetricsResponse(m: QueueMetrics): MetricsResponse {
  return {
    queue_depth: { ...m.depth },
    active_workers: m.activeWorkers,
    jobs_per_second: m.jobsPerSecond,
    error_rate: m.errorRate,
    average_execution_seconds: m.averageExecutionSeconds,
    execution_seconds: { ...m.executionSecondsQuantiles },
    dead_letter_count: m.deadLetterCount,
    fenced_writes: m.fencedWrites,
    window_seconds: m.windowSeconds,
  };
}

/**
 * Prometheus gauges of one app, in their own registry (never the global one, so several apps in
 * one process do not collide). Values are set from one ledger snapshot at scrape time; a figure
 * the ledger reports as null (no jobs finished yet) is exported as NaN.
 */
export class PrometheusMetrics {
  readonly registry = new Registry();
  private readonly depth: Gauge<"status">;
  private readonly activeWorkers: Gauge;
  private readonly jobsPerSecond: Gauge;
  private readonly errorRate: Gauge;
  private readonly averageExecution: Gauge;
  private readonly executionQuantiles: Gauge<"quantile">;
  private readonly executionSamples: Gauge;
  private readonly deadLetter: Gauge;
  private readonly fencedWrites: Gauge;
  /** Scrapes run one after another, so that a text body never mixes two snapshots. */
  private queue: Promise<unknown> = Promise.resolve();

  constructor() {
    const registers = [this.registry];
    const gauge = <L extends string = string>(name: string, help: string, labelNames: L[] = []) =>
      new Gauge<L>({ name: `taskqueue_${name}`, help, labelNames, registers });
    this.depth = gauge("queue_depth", "Jobs per status.", ["status"]);
    this.activeWorkers = gauge(
      "active_workers",
      "Worker lock sessions (one per worker process, or per lane) with a fresh heartbeat.",
    );
    this.jobsPerSecond = gauge("jobs_per_second", "Jobs completed per second over the trailing window.");
    this.errorRate = gauge("error_rate", "Failed attempts / finished attempts over the trailing window.");
    this.averageExecution = gauge(
      "average_execution_seconds",
      "Mean execution time of jobs completed in the trailing window (NaN when none).",
    );
    this.executionQuantiles = gauge(
      "execution_seconds",
      "Execution-time quantiles of the jobs completed in the trailing window, from a histogram of eight bins per doubling (NaN when none).",
      ["quantile"],
    );
    this.executionSamples = gauge(
      "execution_seconds_samples",
      "Jobs completed in the trailing window, which the execution quantiles describe.",
    );
    this.deadLetter = gauge(
      "dead_letter_jobs",
      "Dead-letter entries whose job waits dead (not replayed since it died).",
    );
    this.fencedWrites = gauge("fenced_writes", "Late writes refused by the claim fence, over live workers.");
  }

  /** Sets every gauge from `m` and renders the registry in the text exposition format. */
  render(m: QueueMetrics): Promise<string> {
    const run = async (): Promise<string> => {
      for (const status of JOB_STATUSES) this.depth.set({ status }, m.depth[status]);
      this.activeWorkers.set(m.activeWorkers);
      this.jobsPerSecond.set(m.jobsPerSecond);
      this.errorRate.set(m.errorRate);
      this.averageExecution.set(m.averageExecutionSeconds ?? Number.NaN);
      const q = m.executionSecondsQuantiles;
      this.executionQuantiles.set({ quantile: "0.5" }, q.p50 ?? Number.NaN);
      this.executionQuantiles.set({ quantile: "0.9" }, q.p90 ?? Number.NaN);
      this.executionQuantiles.set({ quantile: "0.99" }, q.p99 ?? Number.NaN);
      this.executionSamples.set(q.samples);
      this.deadLetter.set(m.deadLetterCount);
      this.fencedWrites.set(m.fencedWrites);
      return this.registry.metrics();
    };
    const result = this.queue.then(run, run);
    this.queue = result.catch(() => undefined);
    return result;
  }
}

/** Registers GET /metrics and GET /metrics/prometheus. Database errors go to the problem handler. */
export const metricsRoutes: FastifyPluginAsyncTypebox<MetricsRoutesOptions> = async (
  app,
  { ledger, config },
) => {
  const prometheus = new PrometheusMetrics();

  app.get(
    "/metrics",
    {
      schema: {
        tags: ["metrics"],
        summary: "Queue metrics (JSON)",
        description:
          "Depth by status, active workers, jobs per second and error rate over the trailing window, " +
          "average and quantile execution times, dead-letter count. Read from the database, so it covers " +
          "every worker process on every host.",
        response: { 200: MetricsResponse, 503: problemResponse("The database is unreachable.") },
      },
    },
    async (_request, reply) => {
      const m = await ledger.metrics(config.staleThresholdSeconds);
      return reply.send(toMetricsResponse(m));
    },
  );

  app.get(
    "/metrics/prometheus",
    {
      schema: {
        tags: ["metrics"],
        summary: "Queue metrics (Prometheus)",
        description:
          "The figures of GET /metrics in the Prometheus text exposition format, names prefixed `taskqueue_`: " +
          '`taskqueue_queue_depth{status="pending"}`, `taskqueue_active_workers`, `taskqueue_jobs_per_second`, ' +
          "`taskqueue_error_rate`, `taskqueue_average_execution_seconds`, " +
          '`taskqueue_execution_seconds{quantile="0.5"|"0.9"|"0.99"}`, `taskqueue_execution_seconds_samples`, ' +
          "`taskqueue_dead_letter_jobs`, `taskqueue_fenced_writes`.",
        produces: [prometheus.registry.contentType],
        response: {
          200: {
            description: "Prometheus text format.",
            content: { [prometheus.registry.contentType]: { schema: Type.String() } },
          },
          503: problemResponse("The database is unreachable."),
        },
      },
    },
    async (_request, reply) => {
      const m = await ledger.metrics(config.staleThresholdSeconds);
      const text = await prometheus.render(m);
      return reply.type(prometheus.registry.contentType).send(text);
    },
  );
};
