/**
 * The completer of one lane: queues the running marks and outcomes of its jobs (running, done,
 * failed, released), writes each queue as one batched, fenced statement per flush on the session's
 * write connection, asks for the batch's unlock as its write returns, and reports the batch
 * (events) once its unlock has run. Owns the `unreported` map the lanes of a worker share.
 */
import type { ResolvedConfig } from "../config.js";
import type { Logger } from "../log.js";
import type {
  ClaimedJob,
  ClaimRef,
  Completion,
  Failure,
  LockSession,
  OnUnlocked,
  WriteOutcome,
} from "../queue/lock-session.js";
import { jsonBytes, MAX_PAYLOAD_BYTES } from "../queue/validate.js";
import { completedEvent, type FencedWrite, type FenceReason, type WorkerEmitter } from "./events.js";
import type { HandlerOutcome } from "./sandbox/outcome.js";
import type { SessionSupervisor } from "./session-supervisor.js";

/** A completion as the worker queues it: with the job's type, for the event that reports it. */
export type TypedCompletion = Completion & { type: string };

/** A failed attempt as the worker queues it: with the job's type, for the event that reports it. */
export type TypedFailure = Failure & { type: string };

/**
 * Jobs whose failed attempt or give-back is being written and not yet reported, each with the
 * report's promise. Shared by the lanes of a worker (another lane's session may claim such a job
 * once the unlock commits).
 */
export type UnreportedReports = Map<number, Promise<void>>;

/** What the writer asks of the rest of its lane. */
export interface WriterHooks {
  /** True while the job's handler runs and its outcome may still be written. */
  isRunning(id: number): boolean;
  /** The database no longer shows this worker owning a job it runs (its running mark refused). */
  claimLost(id: number): void;
  /** A flush is going out: a claim may go out with it (pipelining), or after it. */
  claimMore(): void;
  /** A failed attempt will be due again in `seconds` (retries do not NOTIFY). */
  retryDueIn(seconds: number): void;
  /** Every queued write has been written and reported. */
  flushed(): void;
}

export class OutcomeWriter {
  private startQueue: ClaimRef[] = [];
  private doneQueue: TypedCompletion[] = [];
  private failQueue: TypedFailure[] = [];
  private releaseQueue: ClaimRef[] = [];
  private flushScheduled = false;
  private flushing: Promise<void> | null = null;
  /** Written batches whose unlock (and so whose report) has not run yet. */
  private readonly unlocking = new Set<Promise<void>>();
  private fencedCount = 0;
  /** Work {@link drain} waits for besides the queues (see {@link track}). */
  private readonly tracked = new Set<Promise<void>>();

  constructor(
    private readonly supervisor: SessionSupervisor,
    private readonly config: ResolvedConfig,
    private readonly events: WorkerEmitter,
    private readonly logger: Logger,
    private readonly unreported: UnreportedReports,
    private readonly hooks: WriterHooks,
  ) {}

  /** Writes refused by the fence or dropped, since the lane started (sent with heartbeats). */
  get fencedWrites(): number {
    return this.fencedCount;
  }

  /** Outcomes queued and not yet written: their jobs' locks are still held. */
  get queuedOutcomes(): number {
    return this.doneQueue.length + this.failQueue.length + this.releaseQueue.length;
  }

  private get queuedWrites(): number {
    return this.startQueue.length + this.queuedOutcomes;
  }

  /** Queues the job's claimed → running mark. */
  markRunning(job: ClaimedJob): void {
    this.startQueue.push(job);
    this.scheduleFlush();
  }

  /** Queues a handler's result, to be written as the job's outcome. */
  complete(completion: TypedCompletion): void {
    this.doneQueue.push(completion);
    this.scheduleFlush();
  }

  /**
   * Queues what a handler that settled on its own (not aborted, not fenced, no transactional
   * completion) ended with: its result as the job's outcome, or a failed attempt: a thrown error,
   * or a result larger than a job stores (MAX_PAYLOAD_BYTES as JSON).
   */
  handlerOutcome(job: ClaimedJob, outcome: HandlerOutcome, runMs: number): void {
    const { id, type, attempt } = job;
    if ("error" in outcome) {
      const { error, permanent } = outcome;
      this.fail({ id, type, attempt, error, runMs, ...(permanent ? { permanent } : {}) });
    } else if (jsonBytes(outcome.json) > MAX_PAYLOAD_BYTES) {
      const error = `handler result is ${jsonBytes(outcome.json)} bytes as JSON; the most a job stores is ${MAX_PAYLOAD_BYTES} (1 MiB)`;
      this.fail({ id, type, attempt, error, runMs });
    } else this.complete({ id, type, attempt, resultJson: outcome.json, runMs });
  }

  /** Queues a failed attempt, to be written as a retry or a dead letter. */
  fail(failure: TypedFailure): void {
    this.failQueue.push(failure);
    this.scheduleFlush();
  }

  /** Queues a give-back to pending (no attempt counted). */
  release(ref: ClaimRef): void {
    this.releaseQueue.push({ id: ref.id, attempt: ref.attempt });
    this.scheduleFlush();
  }

  /**
   * Counts and reports a write that was refused or dropped (the worker's job log writes its line,
   * job-observer.ts).
   */
  fenced(id: number, write: FencedWrite, reason: FenceReason): void {
    this.fencedCount++;
    this.events.emit("job:fenced", { id, write, reason });
  }

  /**
   * The session was lost: outcomes queued but not yet written belong to its claims; never hand
   * them in through the next session, which would pass the row fence (same worker id) without the
   * lock.
   */
  dropQueued(): void {
    this.startQueue = [];
    this.fenceAll("session_lost");
  }

  private fenceAll(reason: FenceReason): void {
    const [done, failed, released] = [this.doneQueue, this.failQueue, this.releaseQueue];
    this.doneQueue = [];
    this.failQueue = [];
    this.releaseQueue = [];
    for (const item of done) this.fenced(item.id, "complete", reason);
    for (const item of failed) this.fenced(item.id, "fail", reason);
    for (const item of released) this.fenced(item.id, "release", reason);
  }

  /**
   * Lets {@link drain} (and so stop()) wait for `work`: a job's outcome decided outside the queues
   * (a transactional completion's check, then its unlock or its queued failure).
   */
  track(work: Promise<void>): void {
    const settled: Promise<void> = work.catch(() => undefined).finally(() => this.tracked.delete(settled));
    this.tracked.add(settled);
  }

  /** Lets flushes and stop() wait until `unlocked` (whose report runs first) has settled. */
  waitForUnlock(unlocked: Promise<void>): void {
    const settled: Promise<void> = unlocked
      .catch(() => undefined)
      .finally(() => this.unlocking.delete(settled));
    this.unlocking.add(settled);
  }

  /**
   * The reports a claim must wait for before it announces or runs `jobs` (see rule (c) on
   * `Dispatcher.claimLoop`), or null when none of them is unreported.
   */
  reportsOf(jobs: readonly ClaimedJob[]): Promise<unknown> | null {
    if (this.unreported.size === 0) return null;
    const reports = new Set(jobs.flatMap((job) => this.unreported.get(job.id) ?? []));
    return reports.size > 0 ? Promise.all(reports) : null;
  }

  /** Coalesces every queued write of this tick into one flush. */
  scheduleFlush(): void {
    if (this.flushScheduled) return;
    this.flushScheduled = true;
    setImmediate(() => {
      this.flushScheduled = false;
      if (!this.flushing) this.flushing = this.flushLoop().finally(() => (this.flushing = null));
    });
  }

  /** Resolves once nothing is queued, being written or waiting for its unlock's report. */
  async drain(): Promise<void> {
    await new Promise<void>((resolve) => setImmediate(resolve));
    while (this.flushing || this.flushScheduled || this.tracked.size > 0) {
      await Promise.all([this.flushing, ...this.tracked]);
      await new Promise<void>((resolve) => setImmediate(resolve));
    }
  }

  private async flushLoop(): Promise<void> {
    do {
      while (this.queuedWrites > 0) await this.flushOnce();
      // Every written batch is reported once its unlock has run; more may have queued meanwhile.
      await Promise.all(this.unlocking);
    } while (this.queuedWrites > 0);
    this.hooks.flushed();
  }

  /**
   * Writes everything queued, one statement per kind, on the write connection. Each batch's unlock
   * is asked for as its write returns (the claim sent by the next flush, in the same turn, carries
   * it; see `LockSession.claim`); the next flush does not wait for it.
   */
  private async flushOnce(): Promise<void> {
    const session = this.supervisor.usable;
    const starts = this.startQueue;
    this.startQueue = [];
    if (!session) {
      this.fenceAll("session_lost");
      return;
    }
    let done = this.doneQueue;
    let failed = this.failQueue;
    let released = this.releaseQueue;
    this.doneQueue = [];
    this.failQueue = [];
    this.releaseQueue = [];
    // Only jobs still running are marked running: one that already finished goes straight to
    // done/failed, its started_at derived from runMs.
    const toStart = starts.filter((s) => this.hooks.isRunning(s.id));
    const failuresReported = this.trackReports(failed);
    const releasesReported = this.trackReports(released);
    // Pipelining: the next claim goes out on the lock connection right as these writes go out
    // on the write connection, so the database claims the next batch while it writes this one.
    this.hooks.claimMore();
    try {
      if (toStart.length > 0) {
        const moved = await session.markRunning(toStart);
        for (const s of toStart) if (!moved.has(s.id)) this.hooks.claimLost(s.id);
      }
      const completedBatch = done;
      const completed = await session.writeCompletions(
        completedBatch,
        this.afterUnlock(session, noop, (refused: number[]) => this.reportCompleted(completedBatch, refused)),
      );
      done = [];
      this.waitForUnlock(completed.unlocked);
      const failedBatch = failed;
      const failures = await session.writeFailures(
        failedBatch,
        this.config,
        this.afterUnlock(session, failuresReported, (outcomes: WriteOutcome[]) =>
          this.reportFailures(failedBatch, outcomes),
        ),
      );
      failed = [];
      this.waitForUnlock(failures.unlocked);
      const releasedBatch = released;
      const releases = await session.writeReleases(
        releasedBatch,
        this.afterUnlock(session, releasesReported, (refused: number[]) =>
          this.reportApplied(releasedBatch, refused, "release", "job:released"),
        ),
      );
      released = [];
      this.waitForUnlock(releases.unlocked);
    } catch (error) {
      if (!session.isLost) {
        this.logger.error({ err: error }, "batched write failed; resetting the lock session");
        this.supervisor.lose(session, error as Error);
      }
      // Batches already written are reported through their unlock; the rest were not written.
      for (const item of done) this.fenced(item.id, "complete", "write_failed");
      for (const item of failed) this.fenced(item.id, "fail", "write_failed");
      for (const item of released) this.fenced(item.id, "release", "write_failed");
      if (failed.length > 0) failuresReported();
      if (released.length > 0) releasesReported();
    }
  }

  /** Reports each completion of a written batch, except those the fence `refused`. */
  private reportCompleted(batch: readonly TypedCompletion[], refused: readonly number[]): void {
    const refusedSet = refused.length > 0 ? new Set(refused) : null;
    for (const completion of batch) {
      if (refusedSet?.has(completion.id)) this.fenced(completion.id, "complete", "refused");
      else this.events.emit("job:completed", completedEvent(completion));
    }
  }

  /** Reports each job of a written batch as `event`, except those the fence `refused`. */
  private reportApplied(
    batch: readonly ClaimRef[],
    refused: readonly number[],
    write: "release",
    event: "job:released",
  ): void {
    const refusedSet = refused.length > 0 ? new Set(refused) : null;
    for (const { id } of batch) {
      if (refusedSet?.has(id)) this.fenced(id, write, "refused");
      else this.events.emit(event, { id });
    }
  }

  private reportFailures(batch: readonly TypedFailure[], outcomes: WriteOutcome[]): void {
    // Outcomes come back in batch order only by chance of the plan: match them by id.
    const failures = new Map(batch.map((f) => [f.id, f]));
    for (const o of outcomes) {
      if (!o.applied) {
        this.fenced(o.id, "fail", "refused");
        continue;
      }
      const failure = failures.get(o.id);
      this.events.emit("job:failed", {
        id: o.id,
        type: failure?.type ?? "unknown",
        attempt: failure?.attempt ?? -1,
        error: failure?.error ?? "",
        status: o.status ?? "pending",
        runMs: failure?.runMs ?? 0,
      });
      if (o.status === "pending" && o.retry_in_seconds !== undefined)
        this.hooks.retryDueIn(o.retry_in_seconds);
    }
  }

  /**
   * The callback that reports a written batch once its unlock has run (LockSession calls it before
   * anything else learns of that statement, so a job's outcome is reported before its next attempt
   * is claimed). If the unlock failed, the session is reset (which releases the locks); the
   * outcomes were committed either way. Events go through the safe emit, so `reported` always runs.
   */
  private afterUnlock<T>(
    session: LockSession,
    reported: () => void,
    report: (outcome: T) => void,
  ): OnUnlocked<T> {
    return (outcome, unlockError) => {
      try {
        if (unlockError !== null && !session.isLost) {
          this.logger.error({ err: unlockError }, "unlock failed; resetting the lock session");
          this.supervisor.lose(session, unlockError as Error);
        }
        report(outcome);
      } finally {
        reported();
      }
    };
  }

  /**
   * Marks `batch` as being written and not yet reported (see `unreported`), before its write goes
   * out; returns the function that marks it reported (idempotent). An empty batch is reported.
   */
  private trackReports(batch: readonly ClaimRef[]): () => void {
    if (batch.length === 0) return noop;
    let resolve: () => void = noop;
    const reported = new Promise<void>((r) => {
      resolve = r;
    });
    for (const { id } of batch) this.unreported.set(id, reported);
    return () => {
      for (const { id } of batch) if (this.unreported.get(id) === reported) this.unreported.delete(id);
      resolve();
    };
  }
}

const noop = (): void => undefined;
