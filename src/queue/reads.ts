/**
 * The ledger's figures for operators: queue metrics (GET /metrics, inspect) and live workers,
 * each one statement on the shared pool, mapped to the library's shapes. The {@link Ledger}
 * exposes them.
 */
import type { Queryable } from "../db/pool.js";
import { TaskQueueError } from "../errors.js";
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
  const { rows } = await db.query<{
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
  }>({ ...metrics(schema), values: [METRICS_WINDOW_SECONDS, workerLivenessSeconds] });
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
