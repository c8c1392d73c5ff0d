/**
 * Cancels and timeouts of running handlers (DESIGN.md §7, issue 14): the deadline of each attempt
 * (its job's `timeoutSeconds`, else the worker's `jobTimeoutSeconds`), the abort of a handler whose
 * job was cancelled, and the grace after either abort (`jobAbortGraceSeconds`), at the end of which
 * a handler that has not settled gives up its slot. JavaScript cannot stop a function that never
 * yields; what it can do is stop waiting for it: the slot is freed, the handler's late result is
 * refused, and the worker goes on (a sandboxed handler's child process is killed instead).
 */
import { type JobAbortReason, JobCancelledError, JobTimeoutError } from "../errors.js";
import type { ClaimedJob } from "../queue/lock-session.js";
import type { WorkerEmitter } from "./events.js";
import type { TxCompletion } from "./handler-context.js";

/** A job whose handler runs (dispatcher.ts), with its deadline and cancel. */
export interface RunningJob {
  job: ClaimedJob;
  /** The session generation it was claimed under (see `SessionSupervisor.generation`). */
  generation: number;
  controller: AbortController;
  startedAt: number;
  /**
   * Set when its outcome must not be written: given back at the shutdown deadline, its lock
   * session lost, its claim gone at a heartbeat, or the job cancelled (set here). Abandoned jobs
   * get no more heartbeats.
   */
  abandoned: false | Exclude<JobAbortReason, "timeout">;
  /** The deadline or grace timer armed for it, if any. */
  limitTimer: NodeJS.Timeout | null;
  /** The bound (seconds) its attempt ran past, once its deadline fired; else null. */
  timedOutAfter: number | null;
  /** True once its outcome was dealt with (settled, or its slot freed at the end of the grace). */
  settled: boolean;
  /** The handler's transactional completion (handler-context.ts). */
  txCompletion: TxCompletion;
}

export class RunLimits {
  /**
   * @param defaultTimeoutSeconds bound of jobs enqueued without one (undefined: none).
   * @param graceMs how long an aborted handler has to settle before {@link overdue} frees its slot.
   * @param overdue frees the slot of a handler still running at the end of its grace.
   */
  constructor(
    private readonly defaultTimeoutSeconds: number | undefined,
    private readonly graceMs: number,
    private readonly events: WorkerEmitter,
    private readonly overdue: (run: RunningJob, reason: "cancelled" | "timeout") => void,
  ) {}

  /** Arms the deadline of an attempt that starts now, if it has a bound. */
  start(run: RunningJob): void {
    const seconds = run.job.timeoutSeconds ?? this.defaultTimeoutSeconds;
    if (seconds === undefined || seconds === null) return;
    run.limitTimer = setTimeout(() => this.timeOut(run, seconds), seconds * 1000);
  }

  /** The job was cancelled while its handler runs: abort it (`JobCancelledError`), then the grace. */
  cancel(run: RunningJob): void {
    if (run.settled || run.abandoned) return;
    this.clear(run);
    run.abandoned = "cancelled";
    run.controller.abort(new JobCancelledError(run.job.id));
    this.aborted(run, "cancelled");
  }

  /** Clears the run's timer (it settled). */
  clear(run: RunningJob): void {
    if (run.limitTimer) clearTimeout(run.limitTimer);
    run.limitTimer = null;
  }

  private timeOut(run: RunningJob, seconds: number): void {
    run.limitTimer = null;
    if (run.settled || run.abandoned) return;
    run.timedOutAfter = seconds;
    run.controller.abort(new JobTimeoutError(run.job.id, seconds));
    this.aborted(run, "timeout");
  }

  private aborted(run: RunningJob, reason: "cancelled" | "timeout"): void {
    this.events.emit("job:aborted", { id: run.job.id, reason });
    run.limitTimer = setTimeout(() => {
      run.limitTimer = null;
      if (run.settled) return;
      this.events.emit("job:overdue", { id: run.job.id, reason, graceMs: this.graceMs });
      this.overdue(run, reason);
    }, this.graceMs);
  }
}
