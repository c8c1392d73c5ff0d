/**
 * The worker's job log and per-process job counters, fed by its typed events (events.ts): one
 * structured line per job event (claimed at debug; completed, released at info; failed (retried or
 * dead), fenced, reaped at warn), each with `jobId`, `type`, `attempt`, `workerId`, and
 * `durationMs` where a run ended (the handler's run time; for a fenced or released job, the time
 * since its claim). Writes a lane could not hand in (`fenced`) and handlers that ignored their
 * abort (`overdue`) are also added to the database's counters (job_totals), batched, since no job
 * statement sees them. A cancel is counted (and logged as `cancelled`) by whoever cancels; the
 * worker logs its side as `aborted` and `discarded`.
 */
import type { Logger } from "../log.js";
import type { WorkerProcessMetrics } from "../metrics/worker.js";
import type { Ledger, OutOfStatementEvent } from "../queue/ledger.js";
import type { ClaimedJob } from "../queue/types.js";
import type { WorkerEmitter } from "./events.js";

/** What the observer tells of a job this process holds. */
interface Held {
  type: string;
  attempt: number;
  claimedAtMs: number;
}

/**
 * One claim's jobs (ids, types and attempts, index for index) and when they were claimed: what
 * `held` maps each of their ids to. One record per claim, not per job (this is on the drain's
 * path), and no reference to the jobs themselves, so that a slow job does not keep its claim's
 * payloads alive; a job is looked up in its batch only for the rare events that log it.
 */
interface ClaimBatch {
  ids: number[];
  types: string[];
  attempts: number[];
  claimedAtMs: number;
}

/** What the observer knows of a job it never saw claimed. */
const UNKNOWN: Held = { type: "unknown", attempt: -1, claimedAtMs: Number.NaN };

export class JobObserver {
  private readonly held = new Map<number, ClaimBatch>();
  /** Events counted here and not yet added to job_totals, by `type` NUL `event`. */
  private readonly pending = new Map<string, number>();
  private flushing: Promise<void> | null = null;
  /** The lines of this process's job events: `logger` with `workerId` bound (serialised once). */
  private readonly log: Logger;

  /**
   * @param workerId the process's worker id (lanes' ids add `/n` to it).
   * @param metrics this process's job counters, if it serves its own /metrics.
   */
  constructor(
    events: WorkerEmitter,
    private readonly logger: Logger,
    private readonly workerId: string,
    private readonly ledger: Ledger,
    private readonly metrics: WorkerProcessMetrics | null,
  ) {
    this.log = logger.child({ workerId });
    events.on("job:claimed", ({ jobs }) => this.claimed(jobs));
    // The common path: no log object is built unless its level is on (a disabled `info` still
    // evaluated its arguments: about a tenth of a drain's CPU in Node, measured).
    events.on("job:completed", ({ id, type, attempt, runMs }) => {
      this.held.delete(id);
      this.metrics?.count(type, "completed", runMs);
      if (this.log.isLevelEnabled("info"))
        this.log.info(
          { jobId: id, type, attempt, event: "completed", durationMs: roundedMs(runMs) },
          "job completed",
        );
    });
    events.on("job:failed", ({ id, type, attempt, error, status, runMs }) => {
      this.held.delete(id);
      const event = status === "dead" ? "dead" : "retried";
      this.metrics?.count(type, event, runMs);
      if (this.log.isLevelEnabled("warn"))
        this.log.warn(
          { jobId: id, type, attempt, event, durationMs: roundedMs(runMs), error },
          status === "dead" ? "job failed: dead-lettered" : "job failed: will retry",
        );
    });
    events.on("job:released", ({ id }) => {
      const job = this.finish(id);
      this.metrics?.count(job.type, "released");
      this.log.info(
        { ...this.fields(id, job), event: "released", durationMs: this.since(job) },
        "job released",
      );
    });
    events.on("job:fenced", ({ id, write, reason }) => {
      const job = this.finish(id);
      this.metrics?.count(job.type, "fenced");
      this.log.warn(
        { ...this.fields(id, job), event: "fenced", durationMs: this.since(job), write, reason },
        "late write refused: this worker no longer owns the job's claim",
      );
      this.countEvent(job.type, "fenced");
    });
    events.on("job:aborted", ({ id, reason }) => {
      const job = this.find(id);
      this.metrics?.count(job.type, "aborted");
      this.log.info(
        { ...this.fields(id, job), event: "aborted", reason, durationMs: this.since(job) },
        reason === "cancelled"
          ? "handler aborted: the job was cancelled"
          : "handler aborted: the attempt timed out",
      );
    });
    events.on("job:overdue", ({ id, reason, graceMs }) => {
      const job = this.find(id);
      this.metrics?.count(job.type, "overdue");
      this.log.warn(
        { ...this.fields(id, job), event: "overdue", reason, graceMs },
        "handler did not settle after its abort: its slot is freed and its result will be refused",
      );
      this.countEvent(job.type, "overdue");
    });
    events.on("job:discarded", ({ id, write }) => {
      const job = this.finish(id);
      this.log.info(
        { ...this.fields(id, job), event: "discarded", write, durationMs: this.since(job) },
        "outcome of a cancelled job refused",
      );
    });
    events.on("reaper:reaped", ({ jobs }) => {
      for (const job of jobs)
        this.logger.warn(
          {
            jobId: job.id,
            type: job.type,
            attempt: job.attempt,
            workerId: job.workerId,
            event: "reaped",
            status: job.status,
            reaperId: this.workerId,
          },
          "job reclaimed from a lost worker",
        );
    });
    events.on("worker:stopped", () => this.held.clear());
  }

  /** Resolves once the fenced counts noted so far are written (or their write failed). */
  async settled(): Promise<void> {
    while (this.flushing) await this.flushing;
  }

  private claimed(jobs: readonly ClaimedJob[]): void {
    const batch: ClaimBatch = { ids: [], types: [], attempts: [], claimedAtMs: performance.now() };
    const debug = this.log.isLevelEnabled("debug");
    for (const job of jobs) {
      batch.ids.push(job.id);
      batch.types.push(job.type);
      batch.attempts.push(job.attempt);
      this.held.set(job.id, batch);
      this.metrics?.count(job.type, "claimed");
      if (debug)
        this.log.debug(
          { jobId: job.id, type: job.type, attempt: job.attempt, event: "claimed" },
          "job claimed",
        );
    }
  }

  /** Forgets a job this process no longer holds; what it knew of it (type `unknown` if nothing). */
  private finish(id: number): Held {
    const job = this.find(id);
    this.held.delete(id);
    return job;
  }

  /** What the observer knows of held job `id` (type `unknown` if nothing). */
  private find(id: number): Held {
    const batch = this.held.get(id);
    const i = batch ? batch.ids.indexOf(id) : -1;
    if (!batch || i < 0) return UNKNOWN;
    return {
      type: batch.types[i] as string,
      attempt: batch.attempts[i] as number,
      claimedAtMs: batch.claimedAtMs,
    };
  }

  private fields(id: number, job: Held) {
    return { jobId: id, type: job.type, attempt: job.attempt };
  }

  private since(job: Held): number | undefined {
    return Number.isNaN(job.claimedAtMs) ? undefined : Math.round(performance.now() - job.claimedAtMs);
  }

  /** Notes one event of `type` for job_totals and writes it soon (see {@link flushCounts}). */
  private countEvent(type: string, event: "fenced" | "overdue"): void {
    const key = `${type}\u0000${event}`;
    this.pending.set(key, (this.pending.get(key) ?? 0) + 1);
    this.flushCounts();
  }

  /** Writes the counts noted so far, one statement at a time; a failure is logged, not retried. */
  private flushCounts(): void {
    if (this.flushing) return;
    this.flushing = (async () => {
      while (this.pending.size > 0) {
        const counts = [...this.pending].map(([key, count]) => {
          const [type = "", event] = key.split("\u0000");
          return { type, event: event as OutOfStatementEvent, count };
        });
        this.pending.clear();
        try {
          await this.ledger.addJobEvents(counts);
        } catch (error) {
          this.logger.warn({ err: error, counts }, "could not count job events in the database");
        }
      }
      this.flushing = null;
    })();
  }
}

/** Milliseconds to the microsecond: what a log line needs, and a shorter number to write. */
function roundedMs(ms: number): number {
  return Math.round(ms * 1000) / 1000;
}
