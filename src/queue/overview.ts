/**
 * The dashboard's overview figures (issue 12): live depth per type and throughput per minute, each
 * one statement on the shared pool (sql/overview.ts), bounded whatever the history holds.
 */
import type { Queryable } from "../db/pool.js";
import { throughputPerMinute, typeDepths } from "./sql/overview.js";

/** Live jobs of one type. */
export interface TypeDepth {
  type: string;
  /** Pending jobs, due or scheduled. */
  pending: number;
  /** Pending jobs due now (`runAt` reached). */
  due: number;
  claimed: number;
  running: number;
  /** Seconds since the oldest due pending job became due (null: none due). */
  oldestDueSeconds: number | null;
  /** Earliest `runAt` of a pending job scheduled later (null: none). */
  nextRunAt: Date | null;
  /** Live worker lock sessions that claim this type (0 with pending jobs: nobody will run them). */
  liveWorkers: number;
}

/** Finished attempts in one minute. */
export interface ThroughputMinute {
  /** Start of the minute (database clock). */
  minute: Date;
  /** Jobs completed. */
  done: number;
  /** Failed attempts (retried or dead). */
  failed: number;
  /** Total execution seconds of the jobs completed. */
  execSeconds: number;
}

/** Most types {@link readTypeDepths} returns. */
export const TYPE_DEPTHS_MAX = 500;

/**
 * Live jobs per type (pending, due, claimed, running, oldest due age), busiest first, at most
 * {@link TYPE_DEPTHS_MAX} types; types with no live job are absent.
 * @param workerLivenessSeconds a worker counts as live if its heartbeat is younger than this.
 */
export async function readTypeDepths(
  db: Queryable,
  schema: string,
  workerLivenessSeconds: number,
): Promise<TypeDepth[]> {
  const { rows } = await db.query<{
    type: string;
    pending: number;
    due: number;
    claimed: number;
    running: number;
    oldest_due_seconds: number | null;
    next_run_at: Date | null;
    live_workers: number;
  }>({ ...typeDepths(schema), values: [workerLivenessSeconds, TYPE_DEPTHS_MAX] });
  return rows.map((r) => ({
    type: r.type,
    pending: r.pending,
    due: r.due,
    claimed: r.claimed,
    running: r.running,
    oldestDueSeconds: r.oldest_due_seconds === null ? null : Math.max(0, r.oldest_due_seconds),
    nextRunAt: r.next_run_at,
    liveWorkers: r.live_workers,
  }));
}

/**
 * Finished attempts per minute over the last `minutes` minutes (1–60, the current one included),
 * oldest first, one entry per minute (zeros where nothing finished).
 */
export async function readThroughput(
  db: Queryable,
  schema: string,
  minutes: number,
): Promise<ThroughputMinute[]> {
  const { rows } = await db.query<{
    minute: Date | null;
    done: number;
    failed: number;
    exec_seconds: number;
    now_minute: Date;
  }>({ ...throughputPerMinute(schema), values: [minutes] });
  const nowMinute = rows[0]?.now_minute ?? new Date(Math.floor(Date.now() / 60_000) * 60_000);
  const byMinute = new Map(rows.filter((r) => r.minute !== null).map((r) => [r.minute?.getTime(), r]));
  const answer: ThroughputMinute[] = [];
  for (let i = minutes - 1; i >= 0; i--) {
    const minute = new Date(nowMinute.getTime() - i * 60_000);
    const r = byMinute.get(minute.getTime());
    answer.push({ minute, done: r?.done ?? 0, failed: r?.failed ?? 0, execSeconds: r?.exec_seconds ?? 0 });
  }
  return answer;
}
