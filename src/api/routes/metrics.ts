/**
 * GET /metrics (JSON) and GET /metrics/prometheus (text exposition format, metrics/database.ts).
 * Both are read from the database at each request, so they cover every worker process on every host.
 */
import type { FastifyPluginAsyncTypebox } from "@fastify/type-provider-typebox";
import { Type } from "@sinclair/typebox";
import type { ResolvedConfig } from "../../config.js";
import { DatabaseMetrics } from "../../metrics/database.js";
import type { Ledger } from "../../queue/ledger.js";
import type { QueueMetrics } from "../../queue/types.js";
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
    paused_types: m.pausedTypes.map((t) => ({ type: t.type, paused_at: t.pausedAt.toISOString() })),
    type_limits: m.typeLimits.map((l) => ({
      type: l.type,
      max_running: l.maxRunning,
      rate_per_second: l.ratePerSecond,
      burst: l.burst,
    })),
    unhandled_types: m.unhandledTypes.map((t) => ({
      type: t.type,
      pending: t.pending,
      oldest_pending_age_seconds: t.oldestPendingAgeSeconds,
    })),
  };
}

/** Registers GET /metrics and GET /metrics/prometheus. Database errors go to the problem handler. */
export const metricsRoutes: FastifyPluginAsyncTypebox<MetricsRoutesOptions> = async (
  app,
  { ledger, config },
) => {
  const prometheus = new DatabaseMetrics(ledger, config.staleThresholdSeconds);

  app.get(
    "/metrics",
    {
      schema: {
        tags: ["metrics"],
        summary: "Queue metrics (JSON)",
        description:
          "Depth by status, active workers, jobs per second and error rate over the trailing window, " +
          "average and quantile execution times, dead-letter count, paused types, and types with pending jobs " +
          "that no live worker claims. Read from the database, so it covers " +
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
          "Prometheus text exposition format. Database-wide (the same from every replica; scrape one): " +
          "`taskqueue_jobs_{enqueued,completed,failed,retried,dead,cancelled,fenced}_total{type}` counters, " +
          "`taskqueue_job_execution_seconds` and `taskqueue_job_queue_wait_seconds` histograms by type, " +
          "`taskqueue_queue_depth{status}`, `taskqueue_queue_depth_by_type{status,type}`, " +
          "`taskqueue_oldest_pending_age_seconds{type}`, `taskqueue_active_workers`, `taskqueue_dead_letter_jobs`, " +
          "`taskqueue_type_paused{type}`, `taskqueue_unhandled_pending_jobs{type}`, " +
          "`taskqueue_unhandled_oldest_pending_age_seconds{type}`. " +
          "Per process: the serving process's `process_*` and `nodejs_*` metrics.",
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
      const text = await prometheus.render();
      return reply.type(prometheus.registry.contentType).send(text);
    },
  );
};
