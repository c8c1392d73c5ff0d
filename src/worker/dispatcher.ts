/**
 * The dispatcher of one lane: the claim loop, the bounded buffer of claimed jobs, the handler
 * slots, and running one handler (its AbortSignal, its outcome handed to the outcome writer).
 */
import type { ResolvedConfig } from "../config.js";
import { JobAbortedError, JobTimeoutError } from "../errors.js";
import type { Logger } from "../log.js";
import type { HandlerWriteLedger } from "../queue/handler-writes.js";
import type { ClaimedJob, ClaimRef } from "../queue/lock-session.js";
import { ClaimRound } from "./claim-round.js";
import type { WorkerEmitter } from "./events.js";
import { HandlerContexts } from "./handler-context.js";
import { IdleWaiters } from "./idle.js";
import { JobBuffer } from "./job-buffer.js";
import type { LaneState } from "./lane.js";
import type { OutcomeWriter } from "./outcome-writer.js";
import type { HandlerRegistry } from "./registry.js";
import { RetryWakeups } from "./retry-wakeups.js";
import { RunAloneGate } from "./run-alone.js";
import { RunLimits, type RunningJob } from "./run-limits.js";
import type { HandlerOutcome } from "./sandbox/outcome.js";
import type { SessionSupervisor } from "./session-supervisor.js";

/** What the dispatcher reads of its lane. */
export interface DispatcherLane {
  readonly state: LaneState;
}

export class Dispatcher {
  /** Claimed jobs not started yet, all of the current generation (a lost session clears it). */
  private readonly buffer = new JobBuffer();
  private readonly running = new Map<number, RunningJob>();
  private wakeRequested = false;
  private claiming: Promise<void> | null = null;
  private readonly retryWakeups = new RetryWakeups(() => this.wake());
  /** Which claims a round sends (ordinary, limited, run-alone); the lane sets the limited types. */
  readonly round: ClaimRound;
  private readonly idle = new IdleWaiters();
  /** Jobs a claim in flight at stop() brought back: given back at once, part of the stop report. */
  readonly claimedWhileDraining: number[] = [];
  /** Runs handlers (in this process or the sandbox's children) and what they may write to their jobs. */
  private readonly contexts: HandlerContexts;
  /** Deadlines, cancels and the abort grace of running handlers. */
  private readonly limits: RunLimits;
  /** The worker process's run-alone gate (see run-alone.ts and {@link joinGate}). */
  private gate = new RunAloneGate();

  constructor(
    private readonly lane: DispatcherLane,
    private readonly supervisor: SessionSupervisor,
    private readonly writer: OutcomeWriter,
    private readonly registry: HandlerRegistry,
    private readonly config: ResolvedConfig,
    types: readonly string[],
    /** Jobs this lane may hold at once (buffered, running, or with an outcome to write). */
    public prefetch: number,
    private readonly events: WorkerEmitter,
    private readonly logger: Logger,
    /** The handlers' own writes (progress, transactional completion) and the lane's worker id. */
    handlerWrites: { writes: HandlerWriteLedger; workerId: string },
  ) {
    this.gate.join(this);
    this.round = new ClaimRound(types);
    this.contexts = new HandlerContexts({
      ...handlerWrites,
      supervisor,
      writer,
      events,
      running: (entry) => this.running.get(entry.job.id) === entry,
      logger,
      sandbox: { size: config.workerCount, killGraceMs: config.handlerKillGraceSeconds * 1000, logger },
    });
    this.limits = new RunLimits(
      config.jobTimeoutSeconds,
      (config.jobAbortGraceSeconds ?? 5) * 1000,
      events,
      (run, reason) => this.freeSlot(run, reason),
    );
  }

  /** Handlers currently running. */
  get runningCount(): number {
    return this.running.size;
  }

  /** Jobs whose advisory lock this lane holds or is about to release. */
  private get heldCount(): number {
    return this.buffer.length + this.running.size + this.writer.queuedOutcomes;
  }

  /** The claim in flight, if any (stop waits for it). */
  get claimInFlight(): Promise<void> | null {
    return this.claiming;
  }

  /**
   * True while the job's handler runs and the worker may still write its outcome (not after a
   * transactional completion: handler-context.ts).
   */
  isRunning(id: number): boolean {
    const entry = this.running.get(id);
    return entry?.abandoned === false && entry.txCompletion === "none";
  }

  /** Asks for a claim as soon as there is room. */
  wake(): void {
    this.wakeRequested = true;
    this.claimLoop();
  }

  /** Wakes the lane when a retry written by it comes due (retries do not NOTIFY; see RetryWakeups). */
  wakeIn(seconds: number): void {
    this.retryWakeups.add(seconds);
  }

  /** Disarms the retry wake-ups (stop: nothing is left to wake). */
  cancelRetryWake(): void {
    this.retryWakeups.cancel();
  }

  /**
   * Claims as many jobs as there is room for, when asked to, the lane runs and no claim is in
   * flight.
   *
   * Rule (c): a written batch is reported (its events) before a re-claim of the same job is
   * announced or run: a claim waits for the reports of the jobs it took that are still
   * unreported (`OutcomeWriter.reportsOf`), so events come in attempt order. Proved by
   * test/worker/ordering.test.ts "rule (c): …": "one lock session: a failure committed but not yet
   * answered in Node, re-claimed through the session's own advisory lock" and "two lock sessions: a
   * failure unlocked on the server but not yet answered in Node, re-claimed by the other lane"
   * (each holds the answer back in Node and fails without this wait); test/queue/retry.test.ts
   * "event order" checks the common case under load.
   */
  claimLoop(): void {
    if (this.claiming || this.lane.state !== "running" || !this.wakeRequested) return;
    const session = this.supervisor.usable;
    if (!session) return;
    const free = this.prefetch - this.heldCount;
    if (free <= 0) return;
    // Run-alone jobs (DESIGN.md §6): the process's gate says whether this lane claims ordinary jobs,
    // one run-alone job (the process holds nothing), or nothing (it drains for one, or one runs).
    const kind = this.gate.claimKind(this);
    if (kind === "none") return;
    this.wakeRequested = false;
    const generation = this.supervisor.generation;
    this.claiming = (async () => {
      try {
        const claimed = await this.round.claim(session, kind, free);
        const jobs = claimed.jobs;
        this.gate.report(kind, claimed.aloneDue);
        // No run-alone job was due after all: claim ordinary jobs next.
        if (kind === "alone" && jobs.length === 0) this.wakeRequested = true;
        // A type limit's rate held jobs back: claim again when its next token is due.
        if (claimed.waitSeconds !== null) this.wakeIn(claimed.waitSeconds);
        this.supervisor.healthy();
        const reports = this.writer.reportsOf(jobs);
        if (reports) await reports;
        this.events.emit("claim:returned", { claimed: jobs.length, requested: kind === "alone" ? 1 : free });
        if (kind === "normal" && jobs.length === free) this.wakeRequested = true;
        if (jobs.length > 0) this.events.emit("job:claimed", { jobs });
        // (a session lost meanwhile took the locks with it: the reaper returns the jobs)
        if (generation === this.supervisor.generation) this.accept(jobs);
      } catch (error) {
        // A failed claim may have taken advisory locks it never reports: drop the session, which
        // releases every lock it held, and let the reaper return its jobs. Listeners cannot get
        // here: every event goes through the safe emit. The session is reopened with growing
        // backoff (the supervisor), and repeats of one error are counted, not each logged.
        this.supervisor.log.log("error", { err: error }, "claim failed; resetting the lock session");
        this.supervisor.lose(session, error as Error);
      } finally {
        this.claiming = null;
      }
      this.dispatch();
      this.claimLoop();
      this.gate.changed();
    })();
  }

  /**
   * Joins the run-alone gate of this worker process, shared by all its lanes (worker.ts); until
   * then the dispatcher has a gate of its own.
   */
  joinGate(gate: RunAloneGate): void {
    this.gate = gate;
    gate.join(this);
  }

  /** True while this lane holds a job or claims (what the process's run-alone gate reads). */
  get holdsJobs(): boolean {
    return this.claiming !== null || this.heldCount > 0;
  }

  /** Buffers claimed jobs, or gives them back at once if the lane drains meanwhile. */
  private accept(jobs: readonly ClaimedJob[]): void {
    if (this.lane.state === "running") {
      for (const job of jobs) this.buffer.push(job);
      return;
    }
    for (const job of jobs) {
      this.writer.release(job);
      this.claimedWhileDraining.push(job.id);
    }
  }

  /** Starts handlers from the buffer while there is a free slot and the lane runs. */
  dispatch(): void {
    while (
      this.lane.state === "running" &&
      this.running.size < this.config.workerCount &&
      this.buffer.length > 0
    )
      this.runJob(this.buffer.take() as ClaimedJob);
  }

  /** Runs a buffered job, which belongs to the current generation (see `buffer`). */
  private runJob(job: ClaimedJob): void {
    const controller = new AbortController();
    const entry: RunningJob = {
      job,
      generation: this.supervisor.generation,
      controller,
      startedAt: performance.now(),
      abandoned: false,
      limitTimer: null,
      timedOutAfter: null,
      settled: false,
      txCompletion: "none",
    };
    this.running.set(job.id, entry);
    this.writer.markRunning(job);
    this.limits.start(entry);
    void this.contexts.invoke(entry, this.registry.get(job.type), this.settled);
  }

  private readonly settled = (entry: RunningJob, outcome: HandlerOutcome): void =>
    this.finishJob(entry, outcome);

  /** Ends the sandboxed handlers' child processes (stop), within the kill grace. Never throws. */
  closeSandbox(): Promise<void> {
    return this.contexts.closeSandbox();
  }

  private finishJob(entry: RunningJob, outcome: HandlerOutcome): void {
    const { job } = entry;
    if (entry.settled) {
      // Its slot was freed at the end of its abort grace (run-limits.ts): too late for anything.
      this.logger.info({ jobId: job.id }, "an overdue handler settled at last; its outcome is refused");
      return;
    }
    entry.settled = true;
    this.limits.clear(entry);
    const failure = "error" in outcome ? outcome.error : null;
    this.running.delete(job.id);
    const runMs = performance.now() - entry.startedAt;
    const current = entry.generation === this.supervisor.generation;
    if (entry.abandoned === "shutdown") {
      this.logger.debug({ jobId: job.id }, "job given back at shutdown finished; its outcome is not written");
    } else if (entry.abandoned === "cancelled") {
      // Cancelled in the database already (sql/read.ts cancelAnyJob): nothing to write; unlock at once.
      this.events.emit("job:discarded", { id: job.id, write: failure === null ? "complete" : "fail" });
      this.releaseLock(job.id, current);
    } else if (entry.abandoned || !current) {
      this.writer.fenced(job.id, failure === null ? "complete" : "fail", entry.abandoned || "session_lost");
      // A claim lost while its session lives: its lock kept others off the job until now; release it.
      if (entry.abandoned === "claim_lost") this.releaseLock(job.id, current);
    } else if (entry.txCompletion !== "none") {
      this.contexts.settle(entry, outcome, runMs);
    } else if (entry.timedOutAfter !== null) {
      const error = new JobTimeoutError(job.id, entry.timedOutAfter).message;
      this.writer.fail({ id: job.id, type: job.type, attempt: job.attempt, error, runMs });
    } else {
      this.writer.handlerOutcome(job, outcome, runMs);
    }
    this.writer.scheduleFlush();
    this.dispatch();
    if (this.running.size === 0) this.idle.notify();
  }

  /** Releases the lock of a job whose outcome is not written, if its session (`current`) still holds it. */
  private releaseLock(id: number, current: boolean): void {
    const session = this.supervisor.session;
    if (current && session) this.writer.waitForUnlock(session.releaseLocks([id]));
  }

  /**
   * An aborted handler did not settle within its grace (run-limits.ts): its slot is freed now, its
   * outcome dealt with as if it had settled (a timed-out attempt is written as failed), and what it
   * returns later is refused (the job log's `overdue` line: job-observer.ts).
   */
  private freeSlot(entry: RunningJob, reason: "cancelled" | "timeout"): void {
    this.finishJob(entry, { error: `${reason}: the handler did not settle after its abort` });
  }

  /**
   * Job `id` was cancelled in the database while this lane holds it (a NOTIFY, or a claim found
   * gone and cancelled): its handler is aborted with a `JobCancelledError`, or, not started yet, it
   * leaves the buffer and its lock is released. Returns whether the lane held it.
   */
  cancelled(id: number): boolean {
    const entry = this.running.get(id);
    if (entry) {
      this.limits.cancel(entry);
      return true;
    }
    if (!this.buffer.remove(id)) return false;
    this.events.emit("job:discarded", { id, write: "release" });
    this.releaseLock(id, true);
    this.writer.scheduleFlush();
    return true;
  }

  /** True if the lane holds job `id`: running, or claimed and waiting for a slot. */
  holds(id: number): boolean {
    return this.running.has(id) || this.buffer.has(id);
  }

  /** The database no longer shows this worker owning a job it runs: never write its outcome. */
  claimLost(id: number): void {
    const entry = this.running.get(id);
    // After a transactional completion the row is the handler's to decide (handler-context.ts).
    if (!entry || entry.abandoned || entry.txCompletion !== "none") return;
    this.abandon(
      entry,
      "claim_lost",
      "this worker no longer owns the job's claim; its outcome will not be written",
    );
    this.logger.warn({ jobId: id }, "claim lost while running; the outcome will not be written");
  }

  /** Marks a running job abandoned and aborts its handler with a typed reason. */
  private abandon(
    entry: RunningJob,
    reason: "shutdown" | "session_lost" | "claim_lost",
    message: string,
  ): void {
    entry.abandoned = reason;
    this.limits.clear(entry);
    entry.controller.abort(new JobAbortedError(reason, entry.job.id, message));
  }

  /** The jobs held and not abandoned, for the heartbeat. */
  heldRefs(): ClaimRef[] {
    const held: ClaimRef[] = this.buffer.jobs().map((job) => ({ id: job.id, attempt: job.attempt }));
    for (const r of this.running.values())
      if (!r.abandoned && r.txCompletion === "none") held.push({ id: r.job.id, attempt: r.job.attempt });
    return held;
  }

  /** True if the job's handler runs (abandoned or not). */
  has(id: number): boolean {
    return this.running.has(id);
  }

  /**
   * The lane's session was lost: its locks are gone. Drops the buffer and aborts every handler, so
   * the reaper can hand the jobs out again once their heartbeat is stale. Returns how many.
   */
  dropForLostSession(): { dropped: number; running: number } {
    const dropped = this.buffer.takeAll().length;
    for (const entry of this.running.values())
      if (!entry.abandoned)
        this.abandon(entry, "session_lost", "lock session lost: this job will be run again elsewhere");
    return { dropped, running: this.running.size };
  }

  /** Empties the buffer (stop): the jobs never started. */
  takeUnstarted(): ClaimedJob[] {
    return this.buffer.takeAll();
  }

  /** Resolves once no handler runs, or after `timeoutMs`. */
  waitIdle(timeoutMs: number): Promise<void> {
    return this.running.size === 0 ? Promise.resolve() : this.idle.wait(timeoutMs);
  }

  /** Resolves the waiters of {@link waitIdle} when nothing runs and nothing is held. */
  flushed(): void {
    if (this.running.size === 0 && this.heldCount === 0) this.idle.notify();
    // A type held back by its max_running: the outcomes just written may have freed room.
    if (this.round.heldBack) this.wakeRequested = true;
    this.claimLoop();
    this.gate.changed();
  }

  /**
   * The grace period is over: aborts every handler still running (reason `shutdown`) and returns
   * those of the current session, whose give-back the caller queues.
   */
  abandonRunning(): ClaimedJob[] {
    const current: ClaimedJob[] = [];
    for (const entry of this.running.values()) {
      if (entry.abandoned) continue;
      this.abandon(entry, "shutdown", "worker shutting down: grace period over");
      if (entry.generation === this.supervisor.generation) current.push(entry.job);
    }
    return current;
  }
}
