/**
 * The ledger's figures for operators: queue metrics (GET /metrics, inspect) and live workers,
 * each one statement on the shared pool, mapped to the library's shapes. The {@link Ledger}
 * exposes them.
 */
import type { Queryable } from "../db/pool.js";
import { type FieldProblem, JobValidationError, TaskQueueError } from "../errors.js";
import { readTypeStates, unhandledTypes } from "./job-types.js";
import { countJobEvents, typeFigures } from "./sql/observability.js";
import { listWorkers, metrics } from "./sql/read.js";
import { JOB_STATUSES, type JobStatus, type QueueMetrics, type WorkerInfo } from "./types.js";

/** Length of the trailing window of the rate metrics, seconds. */
export const METRICS_WINDOW_SECONDS = 60;

/**
 * Queue figures from the database (DESIGN.md §8).
 * @param workerLivenessSeconds a worker counts as active if its heartbeat is younger than this.
 */
export async function readMetrics(
  db: Queryable,
  schema: string,
  workerLivenessSeconds: number,
): Promise<QueueMetrics> {
  const [{ rows }, states] = await Promise.all([
    db.query<{
      depth: Record<string, number>;
      active_workers: number;
      fenced_writes: number;
      dead_letter_count: number;
      done_in_window: number;
      failed_in_window: number;
      exec_seconds: number;
      p50: number | null;
      p90: number | null;
      p99: number | null;
      samples: number;
    }>({ ...metrics(schema), values: [METRICS_WINDOW_SECONDS, workerLivenessSeconds] }),
    readTypeStates(db, schema, workerLivenessSeconds),
  ]);
  const r = rows[0];
  if (!r) throw new TaskQueueError("metrics_unavailable", "the metrics query returned no row");
  const depth = Object.fromEntries(JOB_STATUSES.map((s) => [s, Number(r.depth[s] ?? 0)])) as Record<
    JobStatus,
    number
  >;
  const attempts = r.done_in_window + r.failed_in_window;
  return {
    depth,
    activeWorkers: r.active_workers,
    jobsPerSecond: r.done_in_window / METRICS_WINDOW_SECONDS,
    errorRate: attempts === 0 ? 0 : r.failed_in_window / attempts,
    averageExecutionSeconds: r.done_in_window === 0 ? null : r.exec_seconds / r.done_in_window,
    executionSecondsQuantiles: { p50: r.p50, p90: r.p90, p99: r.p99, samples: r.samples },
    deadLetterCount: r.dead_letter_count,
    fencedWrites: r.fenced_writes,
    windowSeconds: METRICS_WINDOW_SECONDS,
    pausedTypes: states.filter((t) => t.paused).map((t) => ({ type: t.type, pausedAt: t.pausedAt as Date })),
    typeLimits: states.flatMap((t) => (t.limit ? [{ type: t.type, ...t.limit }] : [])),
    unhandledTypes: unhandledTypes(states),
  };
}

/** Worker processes with a heartbeat younger than `livenessSeconds`, with the jobs each holds. */
export async function readWorkers(
  db: Queryable,
  schema: string,
  livenessSeconds: number,
): Promise<WorkerInfo[]> {
  const { rows } = await db.query<{
    id: string;
    host: string;
    pid: number;
    types: string[];
    concurrency: number;
    fenced_writes: number;
    started_at: Date;
    heartbeat_at: Date;
    held: number;
  }>({ ...listWorkers(schema), values: [livenessSeconds] });
  return rows.map((r) => ({
    id: r.id,
    host: r.host,
    pid: r.pid,
    types: r.types,
    concurrency: r.concurrency,
    fencedWrites: r.fenced_writes,
    startedAt: r.started_at,
    heartbeatAt: r.heartbeat_at,
    heldJobs: r.held,
  }));
}

/** Figures by job type for the Prometheus exposition (schema version 8), database-wide. */
export interface TypeFigures {
  /** Events per type since schema version 8: `enqueued`, `retried`, `dead`, `cancelled`, `fenced`. */
  totals: { type: string; event: string; count: number }[];
  /** Completed jobs by type in histogram buckets (index into HISTOGRAM_BOUNDS_SECONDS; last: +Inf). */
  histogram: {
    type: string;
    metric: "execution" | "queue_wait";
    bucket: number;
    count: number;
    sumSeconds: number;
  }[];
  /** Jobs by type and active status, with the age (seconds) of the oldest due pending job. */
  live: { type: string; status: JobStatus; jobs: number; oldestDueSeconds: number | null }[];
}

/** Reads {@link TypeFigures} in one statement. */
export async function readTypeFigures(db: Queryable, schema: string): Promise<TypeFigures> {
  const { rows } = await db.query<{
    totals: [string, string, number][];
    histogram: [string, "execution" | "queue_wait", number, number, number][];
    live: [string, JobStatus, number, number | null][];
  }>(typeFigures(schema));
  const r = rows[0];
  if (!r) throw new TaskQueueError("metrics_unavailable", "the metrics query returned no row");
  return {
    totals: r.totals.map(([type, event, count]) => ({ type, event, count })),
    histogram: r.histogram.map(([type, metric, bucket, count, sumSeconds]) => ({
      type,
      metric,
      bucket,
      count,
      sumSeconds,
    })),
    live: r.live.map(([type, status, jobs, oldestDueSeconds]) => ({ type, status, jobs, oldestDueSeconds })),
  };
}

/**
 * The events counted outside the statement that causes them (a worker's refused or dropped writes,
 * handlers overdue after an abort). Every other event is counted by the statement that moves the
 * job, and `taskqueue_jobs_enqueued_total` is summed from the completed, dead and cancelled counts
 * (schema version 15): counting those here would count jobs twice.
 */
export const OUT_OF_STATEMENT_EVENTS = ["fenced", "overdue"] as const;

/** One of {@link OUT_OF_STATEMENT_EVENTS}. */
export type OutOfStatementEvent = (typeof OUT_OF_STATEMENT_EVENTS)[number];

/**
 * Adds `counts` to the database's event counters (job_totals): the `fenced` writes of a worker, the
 * `overdue` handlers. Rows with a zero count are skipped.
 * @throws {JobValidationError} naming `counts/<i>/event` for another event, or `counts/<i>/count`
 *   for a count that is not a whole number ≥ 0 (counters only grow); nothing is written.
 */
export async function addJobEvents(
  db: Queryable,
  schema: string,
  counts: readonly { type: string; event: OutOfStatementEvent; count: number }[],
): Promise<void> {
  const problems: FieldProblem[] = [];
  counts.forEach((c, i) => {
    if (!(OUT_OF_STATEMENT_EVENTS as readonly string[]).includes(c.event))
      problems.push({
        field: `counts/${i}/event`,
        message: `must be one of ${OUT_OF_STATEMENT_EVENTS.join(", ")}`,
      });
    if (!Number.isSafeInteger(c.count) || c.count < 0)
      problems.push({ field: `counts/${i}/count`, message: "must be a whole number, 0 or more" });
  });
  if (problems.length > 0) throw new JobValidationError(problems);
  if (counts.length === 0) return;
  await db.query({
    ...countJobEvents(schema),
    values: [counts.map((c) => c.type), counts.map((c) => c.event), counts.map((c) => c.count)],
  });
}
