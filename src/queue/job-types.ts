/**
 * Job types as operators act on them (issue 14, items 6 and 8): pause and resume a type, and the
 * state of every known type (paused, pending jobs, age of the oldest due one, live workers that
 * claim it), each one statement on the shared pool (sql/job-types.ts). The {@link Ledger} exposes
 * them.
 */
import type { Queryable } from "../db/pool.js";
import { JobValidationError, TaskQueueError } from "../errors.js";
import { LIMITS } from "./job-shape.js";
import { pauseType, resumeType, typeStates } from "./sql/job-types.js";

/** A type's pause state, as pause and resume answer it. */
export interface TypePause {
  type: string;
  paused: boolean;
  /** When it was paused (database clock); null when it is not paused. */
  pausedAt: Date | null;
}

/** A type's global limits as {@link TypeState} shows them (type-limits.ts; null: not set). */
export interface TypeStateLimit {
  maxRunning: number | null;
  ratePerSecond: number | null;
  /** The token bucket's size as set (null: the default, ceil(ratePerSecond)). */
  burst: number | null;
}

/** One known job type: pending jobs, paused, limited, or claimed by a live worker. */
export interface TypeState extends TypePause {
  /** Its global limits (type-limits.ts), or null when it has none. */
  limit: TypeStateLimit | null;
  /** Pending jobs, due or scheduled for later. */
  pending: number;
  /** Seconds since the oldest due pending job became due (its `runAt`); null when none is due. */
  oldestPendingAgeSeconds: number | null;
  /** Live worker lock sessions whose types include this one (0 with pending jobs: unhandled). */
  liveWorkers: number;
}

/** Pending jobs of a type that no live worker claims (issue 14, item 6). */
export interface UnhandledType {
  type: string;
  pending: number;
  /** Seconds since the oldest due pending job became due; null when none is due yet. */
  oldestPendingAgeSeconds: number | null;
}

/** Most types {@link readTypeStates} returns. */
export const TYPE_STATES_MAX = 1000;

/**
 * @throws {JobValidationError} naming `type` unless it is a string of 1–200 characters (the
 * length a job's type may have).
 */
export function checkTypeName(type: unknown): asserts type is string {
  const { min, max } = LIMITS.typeLength;
  if (typeof type !== "string" || type.length < min || type.length > max)
    throw new JobValidationError([
      { field: "type", message: `must be a string of ${min}–${max} characters` },
    ]);
}

/**
 * Pauses `type`: from their next claim, workers on every host claim none of its jobs; jobs already
 * claimed or running finish. Idempotent (a paused type keeps its `pausedAt`). A type without jobs
 * may be paused.
 * @throws {JobValidationError} for a bad type name.
 */
export async function pauseJobType(db: Queryable, schema: string, type: string): Promise<TypePause> {
  checkTypeName(type);
  const { rows } = await db.query<{ type: string; paused_at: Date }>({
    ...pauseType(schema),
    values: [type],
  });
  const row = rows[0];
  if (!row) throw new TaskQueueError("pause_failed", "the pause statement returned no row");
  return { type: row.type, paused: true, pausedAt: row.paused_at };
}

/**
 * Resumes `type` (idempotent) and wakes the workers, so that its due jobs are claimed at once.
 * @throws {JobValidationError} for a bad type name.
 */
export async function resumeJobType(db: Queryable, schema: string, type: string): Promise<TypePause> {
  checkTypeName(type);
  await db.query({ ...resumeType(schema), values: [type] });
  return { type, paused: false, pausedAt: null };
}

/**
 * Every known type (pending jobs, paused, limited, or claimed by a live worker), in type order, at most
 * {@link TYPE_STATES_MAX}.
 * @param workerLivenessSeconds a worker counts as live if its heartbeat is younger than this.
 */
export async function readTypeStates(
  db: Queryable,
  schema: string,
  workerLivenessSeconds: number,
): Promise<TypeState[]> {
  const { rows } = await db.query<{
    type: string;
    paused_at: Date | null;
    pending: number;
    oldest_pending_age_seconds: number | null;
    live_workers: number;
    max_running: number | null;
    rate_per_second: number | null;
    burst: number | null;
  }>({ ...typeStates(schema), values: [workerLivenessSeconds, TYPE_STATES_MAX] });
  return rows.map((r) => ({
    type: r.type,
    paused: r.paused_at !== null,
    pausedAt: r.paused_at,
    limit:
      r.max_running === null && r.rate_per_second === null
        ? null
        : { maxRunning: r.max_running, ratePerSecond: r.rate_per_second, burst: r.burst },
    pending: Number(r.pending),
    oldestPendingAgeSeconds:
      r.oldest_pending_age_seconds === null ? null : Math.max(0, r.oldest_pending_age_seconds),
    liveWorkers: r.live_workers,
  }));
}

/** The types of `states` with pending jobs and no live worker (item 6). */
export function unhandledTypes(states: readonly TypeState[]): UnhandledType[] {
  return states
    .filter((s) => s.pending > 0 && s.liveWorkers === 0)
    .map((s) => ({ type: s.type, pending: s.pending, oldestPendingAgeSeconds: s.oldestPendingAgeSeconds }));
}
