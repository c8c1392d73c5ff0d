/**
 * One reading of the queue for `taskqueue inspect`: each part (metrics, workers, held locks with
 * their jobs, sizes, dead letters, schema version) read on its own, so that a part whose query
 * fails (a revoked privilege, a missing table, a lost connection) becomes an error of that part and
 * the others still show.
 */

import type { HeldLock, RelationSize } from "../../queue/inspect.js";
import type { Ledger } from "../../queue/ledger.js";
import type { DeadLetterJob, QueueMetrics, WorkerInfo } from "../../queue/types.js";

/** A part of a snapshot: its value, or the message of the error that kept it from being read. */
export type Part<T> = { ok: true; value: T } | { ok: false; error: string };

/** What one redraw shows. */
export interface Snapshot {
  takenAt: Date;
  schema: string;
  version: Part<number>;
  metrics: Part<QueueMetrics>;
  workers: Part<WorkerInfo[]>;
  locks: Part<HeldLock[]>;
  sizes: Part<RelationSize[]>;
  dead: Part<DeadLetterJob[]>;
}

/** Most held locks and dead letters read for one snapshot (a screen shows fewer). */
export const SNAPSHOT_LIST_LIMIT = 50;

async function part<T>(read: () => Promise<T>): Promise<Part<T>> {
  try {
    return { ok: true, value: await read() };
  } catch (error) {
    const message = error instanceof Error ? error.message : String(error);
    return { ok: false, error: message.replace(/\s+/g, " ") };
  }
}

/**
 * Reads a snapshot through `ledger` (its pool), all parts at once. Never throws: every failure is
 * the error of its part.
 * @param livenessSeconds a worker counts as live if its heartbeat is younger than this.
 */
export async function takeSnapshot(ledger: Ledger, livenessSeconds: number): Promise<Snapshot> {
  const { schema } = ledger;
  const [version, metrics, workers, locks, sizes, dead] = await Promise.all([
    part(() => ledger.schemaVersion()),
    part(() => ledger.metrics(livenessSeconds)),
    part(() => ledger.listWorkers(livenessSeconds)),
    part(() => ledger.heldLocks(SNAPSHOT_LIST_LIMIT)),
    part(() => ledger.relationSizes()),
    part(() => ledger.listDeadLetters({ replayed: false, limit: SNAPSHOT_LIST_LIMIT })),
  ]);
  return { takenAt: new Date(), schema, version, metrics, workers, locks, sizes, dead };
}
