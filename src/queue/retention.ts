/**
 * Retention (issue 14, item 9; DESIGN.md §3, "Retention"): a pruning pass deletes done and
 * cancelled jobs completed more than `retainDoneSeconds` ago, and dead ones (with their dead-letter
 * entries) more than `retainDeadSeconds` ago. Any worker process may run one (worker/retention.ts
 * schedules them); one runs at a time, under a session advisory lock that a second process finds
 * taken and leaves (sql/retention.ts). A pass works in bounded batches (`batchRows` rows read per
 * statement, through the primary key) and pauses between them (`pauseFactor` times the batch's own
 * time), so that pruning a large history leaves the database to the queue's own work: it takes at
 * most about 1 / (1 + pauseFactor) of one connection's time.
 *
 * Pruning changes no counter and no metric of the history (see `pruneJobs`); only
 * `dead_letter_count` (entries waiting now) drops with the entries deleted.
 */
import { setTimeout as sleep } from "node:timers/promises";
import type pg from "pg";
import { pruneDeadLetters, pruneJobs, pruneUnlock, tryPruneLock } from "./sql/retention.js";

/** Defaults of the retention options (DESIGN.md §9). */
export const RETENTION_DEFAULTS = {
  /** Done and cancelled jobs: 7 days. */
  retainDoneSeconds: 7 * 86_400,
  /** Dead jobs and their dead-letter entries: 30 days. */
  retainDeadSeconds: 30 * 86_400,
  /** Rows read per statement. */
  batchRows: 1000,
  /** Pause after each batch, as a multiple of the batch's own time. */
  pauseFactor: 9,
} as const;

/** What a pruning pass keeps, and how gently it deletes. Seconds; 0 keeps for ever. */
export interface RetentionPolicy {
  /** Done and cancelled jobs completed longer ago than this are deleted. 0: kept for ever. */
  retainDoneSeconds: number;
  /** Dead jobs, and dead-letter entries, that died longer ago than this are deleted. 0: kept for ever. */
  retainDeadSeconds: number;
  /** Rows read (so at most deleted) per statement. Default {@link RETENTION_DEFAULTS}.batchRows. */
  batchRows?: number;
  /** Pause after each batch, times the batch's own time. Default {@link RETENTION_DEFAULTS}.pauseFactor. */
  pauseFactor?: number;
  /** Ends the pass after the batch in flight (stop). */
  signal?: AbortSignal;
}

/** What one pruning pass did. */
export interface PruneReport {
  /** False: another process holds the pruning lock, and this pass did nothing. */
  ran: boolean;
  /** Jobs deleted, per status (done, cancelled, dead). */
  deletedJobs: Record<string, number>;
  /** Dead-letter entries deleted (with their jobs, or on their own). */
  deletedDeadLetters: number;
  /** Statements sent. */
  batches: number;
  /** The pass's length, milliseconds, pauses included. */
  elapsedMs: number;
}

/** Sleeps `ms` unless `signal` aborts first (then resolves at once). */
async function pause(ms: number, signal: AbortSignal | undefined): Promise<void> {
  if (ms <= 0 || signal?.aborted) return;
  await sleep(ms, undefined, { signal }).catch(() => undefined);
}

/**
 * Runs one pruning pass on a connection of `pool` (held for the pass: the lock is the session's),
 * unless another process holds the lock. Every statement has the pool's deadline.
 * @throws the first database error (the lock is released with its session: the connection is
 * dropped from the pool).
 */
export async function pruneHistory(
  pool: pg.Pool,
  schema: string,
  lockClass: number,
  policy: RetentionPolicy,
): Promise<PruneReport> {
  const started = performance.now();
  const report: PruneReport = {
    ran: false,
    deletedJobs: {},
    deletedDeadLetters: 0,
    batches: 0,
    elapsedMs: 0,
  };
  const { retainDoneSeconds: done, retainDeadSeconds: dead, signal } = policy;
  if ((done <= 0 && dead <= 0) || signal?.aborted) return report;
  const batchRows = policy.batchRows ?? RETENTION_DEFAULTS.batchRows;
  const pauseFactor = policy.pauseFactor ?? RETENTION_DEFAULTS.pauseFactor;
  const shortest = Math.min(...[done, dead].filter((s) => s > 0));
  const client = await pool.connect();
  let broken: Error | undefined;
  try {
    const { rows } = await client.query<{ locked: boolean }>({
      ...tryPruneLock(schema),
      values: [lockClass],
    });
    if (!rows[0]?.locked) return report;
    report.ran = true;
    try {
      let after = 0;
      while (!signal?.aborted) {
        const batchStarted = performance.now();
        const { rows: batch } = await client.query<{
          last_id: number | null;
          frontier: boolean;
          deleted: Record<string, number>;
          letters: number;
        }>({ ...pruneJobs(schema), values: [after, batchRows, done, dead, shortest] });
        report.batches++;
        const result = batch[0];
        for (const [status, n] of Object.entries(result?.deleted ?? {}))
          report.deletedJobs[status] = (report.deletedJobs[status] ?? 0) + n;
        report.deletedDeadLetters += result?.letters ?? 0;
        if (!result || result.last_id === null || result.frontier || signal?.aborted) break;
        after = result.last_id;
        await pause((performance.now() - batchStarted) * pauseFactor, signal);
      }
      while (dead > 0 && !signal?.aborted) {
        const batchStarted = performance.now();
        const { rows: letters } = await client.query<{ deleted: number }>({
          ...pruneDeadLetters(schema),
          values: [dead, batchRows],
        });
        report.batches++;
        const deleted = letters[0]?.deleted ?? 0;
        report.deletedDeadLetters += deleted;
        if (deleted < batchRows) break;
        await pause((performance.now() - batchStarted) * pauseFactor, signal);
      }
    } finally {
      await client.query({ ...pruneUnlock(schema), values: [lockClass] });
    }
    return report;
  } catch (error) {
    broken = error instanceof Error ? error : new Error(String(error));
    throw error;
  } finally {
    report.elapsedMs = performance.now() - started;
    client.release(broken);
  }
}
