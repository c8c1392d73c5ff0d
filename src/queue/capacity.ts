/**
 * Backpressure: the optional caps on pending jobs, in all (`maxPendingJobs`) and per type
 * (`maxPendingJobsPerType`). An enqueue that would take the count past a cap throws
 * {@link QueueFullError}; a batch is admitted or refused whole.
 *
 * A soft cap, counted cheaply. An exact `count(*)` of the pending jobs on every insert would cost
 * each enqueue a scan of every pending job (50,000 of them: several milliseconds). Instead each
 * process keeps a snapshot of the counts, at most {@link PENDING_COUNT_REFRESH_MS} old (one
 * statement, sql/capacity.ts: the total from the job_counts counters, per type through the
 * pending-only index), plus the jobs it enqueued itself since the snapshot was asked for. So:
 * - within one process the cap holds exactly (its own enqueues are counted as they are admitted,
 *   before they commit; enqueues in flight when a snapshot is taken may count twice, which only
 *   refuses early until the next snapshot);
 * - jobs claimed or cancelled since the snapshot still count until the next one (up to a second
 *   of early refusals);
 * - an enqueue that fails, or runs in a caller's transaction that rolls back, still counts until
 *   the next snapshot (the same);
 * - other processes' enqueues since the snapshot are not counted: with P processes enqueueing at
 *   once the count can pass the cap by what they enqueue in one refresh period.
 * A stale snapshot is refreshed in the background while enqueues go on against the old one; an
 * enqueue that the old one would refuse waits for the new one first. With both caps 0 the ledger
 * builds no {@link PendingCap} and an enqueue does no work for it.
 */
import type { Queryable } from "../db/pool.js";
import { QueueFullError } from "../errors.js";
import { pendingCounts } from "./sql/capacity.js";

/** Most age of the snapshot an enqueue is admitted against, milliseconds. */
export const PENDING_COUNT_REFRESH_MS = 1000;

/** The caps (0: none) and, for tests, the snapshot's most age. */
export interface PendingCaps {
  maxPendingJobs: number;
  maxPendingJobsPerType: number;
  /** Default {@link PENDING_COUNT_REFRESH_MS}. */
  refreshMs?: number;
}

/** Pending counts read from the database at `takenAtMs`. */
interface Snapshot {
  total: number;
  byType: Map<string, number>;
  takenAtMs: number;
}

/** Jobs admitted by this process: in all and per type. */
interface Admitted {
  total: number;
  byType: Map<string, number>;
}

const noneAdmitted = (): Admitted => ({ total: 0, byType: new Map() });

/** One process's counter against the caps of one schema (see the top of this file). */
export class PendingCap {
  private snapshot: Snapshot | null = null;
  /** Admitted since the current snapshot was asked for. */
  private since: Admitted = noneAdmitted();
  /** Admitted since the refresh in flight was asked for (null: none in flight). */
  private sinceRefresh: Admitted | null = null;
  private refreshing: Promise<void> | null = null;
  private readonly refreshMs: number;
  private readonly perType: boolean;

  constructor(
    private readonly db: Queryable,
    private readonly schema: string,
    private readonly caps: PendingCaps,
  ) {
    this.refreshMs = caps.refreshMs ?? PENDING_COUNT_REFRESH_MS;
    this.perType = caps.maxPendingJobsPerType > 0;
  }

  /** Seconds a refused caller should wait: until the counts are next read. */
  get retryAfterSeconds(): number {
    return Math.max(1, Math.ceil(this.refreshMs / 1000));
  }

  /**
   * Admits jobs of these types (one entry per job) and counts them as pending, or refuses them
   * all. Reads the counts first when there is no snapshot yet (or it is stale and would refuse).
   * @throws {QueueFullError} the total or one type's count plus these jobs would pass its cap.
   * @throws the database's error when the counts cannot be read and no snapshot exists.
   */
  async admit(types: readonly string[]): Promise<void> {
    const wanted = this.perType ? countTypes(types) : null;
    if (this.snapshot === null) await this.refresh();
    else if (this.isStale()) void this.refresh().catch(() => undefined);
    let refusal = this.refusal(types.length, wanted);
    if (refusal !== null && this.isStale()) {
      await this.refresh();
      refusal = this.refusal(types.length, wanted);
    }
    if (refusal !== null) throw refusal;
    this.count(this.since, types.length, wanted);
    if (this.sinceRefresh) this.count(this.sinceRefresh, types.length, wanted);
  }

  private isStale(): boolean {
    return this.snapshot === null || Date.now() - this.snapshot.takenAtMs >= this.refreshMs;
  }

  /** Reads the counts (one read at a time: callers during a read share it). */
  private refresh(): Promise<void> {
    this.refreshing ??= this.read().finally(() => {
      this.refreshing = null;
      this.sinceRefresh = null;
    });
    return this.refreshing;
  }

  private async read(): Promise<void> {
    const admitted = noneAdmitted();
    this.sinceRefresh = admitted;
    const askedAtMs = Date.now();
    const { rows } = await this.db.query<{ total: number; by_type: Record<string, number> | null }>({
      ...pendingCounts(this.schema),
      values: [this.perType],
    });
    const row = rows[0];
    this.snapshot = {
      total: Number(row?.total ?? 0),
      byType: new Map(Object.entries(row?.by_type ?? {}).map(([type, n]) => [type, Number(n)])),
      takenAtMs: askedAtMs,
    };
    this.since = admitted;
  }

  /** The refusal of `n` jobs (`wanted` per type) against the snapshot plus what was admitted since; null if they fit. */
  private refusal(n: number, wanted: Map<string, number> | null): QueueFullError | null {
    const snapshot = this.snapshot as Snapshot;
    const { maxPendingJobs, maxPendingJobsPerType } = this.caps;
    if (maxPendingJobs > 0) {
      const pending = snapshot.total + this.since.total;
      if (pending + n > maxPendingJobs)
        return new QueueFullError("maxPendingJobs", maxPendingJobs, null, pending, n, this.retryAfterSeconds);
    }
    if (wanted !== null) {
      for (const [type, count] of wanted) {
        const pending = (snapshot.byType.get(type) ?? 0) + (this.since.byType.get(type) ?? 0);
        if (pending + count > maxPendingJobsPerType)
          return new QueueFullError(
            "maxPendingJobsPerType",
            maxPendingJobsPerType,
            type,
            pending,
            count,
            this.retryAfterSeconds,
          );
      }
    }
    return null;
  }

  private count(into: Admitted, n: number, wanted: Map<string, number> | null): void {
    into.total += n;
    if (wanted !== null)
      for (const [type, count] of wanted) into.byType.set(type, (into.byType.get(type) ?? 0) + count);
  }
}

/** How many of `types` are each type. */
function countTypes(types: readonly string[]): Map<string, number> {
  const counts = new Map<string, number>();
  for (const type of types) counts.set(type, (counts.get(type) ?? 0) + 1);
  return counts;
}
