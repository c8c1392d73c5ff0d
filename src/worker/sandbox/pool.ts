/**
 * The pool of child processes that run a lane's sandboxed handlers (like BullMQ's sandboxed
 * processors). Each child (`child_process.fork` of runner.ts) runs one job at a time, so a child
 * that exits, crashes or blocks its event loop fails only the job it runs; the worker's own event
 * loop (heartbeats, claims, other handlers) goes on. Children are forked when a job needs one, kept
 * idle after it, and reused; at most `size` (the lane's handler slots) exist, dying ones included.
 *
 * - A child that dies while running a job fails that attempt with the cause: "handler process
 *   (pid 4242) exited with code 1 while running job 42: uncaught exception: boom", or "killed by
 *   SIGKILL"; the job then takes the normal failure path (retry with backoff, dead-letter). The
 *   error is written after the child is gone, so the pid and the error's time tell when it ended.
 * - Crashes delay the next fork by a capped exponential backoff ({@link RESTART_BACKOFF}), reset
 *   once a child has lived {@link RESTART_BACKOFF}.resetAfterMs; each distinct crash is logged at
 *   its 1st, 2nd, 4th, 8th... occurrence with its count, not once per crash.
 * - The handler's `job.progress(value)` arrives as a `progress` message; the pool writes it with the
 *   `progress` function {@link SandboxPool.run} was given for that job (the handler context's, fenced
 *   like an in-process handler's) and answers the child with the outcome. A message for a job the
 *   child no longer runs is refused (`JobClaimLostError`) and never written. The pool never waits on
 *   the child for anything about progress: the answer is sent, not awaited.
 * - An abort of the job's signal is sent to the child (its handler's signal aborts with a
 *   `JobAbortedError` of the same reason); a child that has not answered within `killGraceMs` is
 *   SIGKILLed (and replaced when a job needs it).
 * - {@link close} ends every child within a bound: the IPC channel is closed (the runner exits),
 *   then SIGKILL for any still alive after `killGraceMs`.
 */
import { type ChildProcess, fork } from "node:child_process";
import {
  JobAbortedError,
  JobClaimLostError,
  JobTimeoutError,
  JobValidationError,
  TaskQueueError,
} from "../../errors.js";
import type { Logger } from "../../log.js";
import type { HandlerJobData, SandboxedHandler } from "../registry.js";
import type { HandlerOutcome } from "./outcome.js";
import type { FromChild, ToChild } from "./protocol.js";

/** The restart backoff after crashes: `min(initialMs * 2^(crashes - 1), maxMs)`. */
export const RESTART_BACKOFF = { initialMs: 100, maxMs: 10_000, resetAfterMs: 30_000 } as const;

/** How many distinct crash descriptions are counted (past it, crashes are counted under "other"). */
const MAX_CRASH_KINDS = 100;

const RUNNER = new URL("./runner.js", import.meta.url);

export interface SandboxPoolOptions {
  /** Children at most (the lane's handler slots). */
  size: number;
  /** After an abort, how long a child has to answer before SIGKILL; also the bound of close(). */
  killGraceMs: number;
  logger: Logger;
  /** Node options of the children (default none: the worker's own `execArgv` is not passed on). */
  execArgv?: string[];
}

interface Child {
  proc: ChildProcess;
  spawnedAt: number;
  /** The job it runs, or null when idle. */
  job: RunningSandboxedJob | null;
  /** What the runner reported before dying (an uncaught exception, an unhandled rejection). */
  report: string | null;
  /** Why this pool killed it, if it did. */
  killedBecause: string | null;
  /** Resolves once the process has exited and its IPC channel has closed. */
  closed: Promise<void>;
}

interface RunningSandboxedJob {
  id: number;
  settle(outcome: HandlerOutcome): void;
  /** Writes the job's progress (absent while a child is only reserved). */
  progress?: JobProgress;
}

/** Writes a running job's progress for its sandboxed handler (the handler context's `job.progress`). */
export type JobProgress = (value: unknown) => Promise<void>;

/** The `progress` of a job run without one: it refuses, naming why. */
const noProgress: JobProgress = () =>
  Promise.reject(new TaskQueueError("sandbox_unsupported", "job.progress() is not available for this job"));

export class SandboxPool {
  private readonly children = new Set<Child>();
  private waiters: (() => void)[] = [];
  private crashes = 0;
  private nextForkAt = 0;
  private readonly crashCounts = new Map<string, number>();
  private closing = false;

  constructor(private readonly options: SandboxPoolOptions) {}

  /** Live children (running a job or idle), dying ones included. */
  get childCount(): number {
    return this.children.size;
  }

  /** The pids of the live children (for tests and diagnostics). */
  get pids(): number[] {
    return [...this.children].flatMap((c) => (c.proc.pid === undefined ? [] : [c.proc.pid]));
  }

  /**
   * Runs `job` with `handler` in a child: waits for an idle child, or forks one (after the restart
   * backoff, if children crashed). The handler's `job.progress(value)` calls `progress` while the
   * job runs. Never throws: a failure of any kind is `{ error }`.
   */
  async run(
    handler: SandboxedHandler,
    job: HandlerJobData,
    signal: AbortSignal,
    progress: JobProgress = noProgress,
  ): Promise<HandlerOutcome> {
    let child: Child;
    try {
      child = await this.acquire(signal);
    } catch (error) {
      return { error: error instanceof Error ? error.message : String(error) };
    }
    return new Promise<HandlerOutcome>((resolve) => {
      let killTimer: NodeJS.Timeout | undefined;
      const onAbort = () => {
        const reason = signal.reason instanceof JobAbortedError ? signal.reason : null;
        this.send(child, {
          kind: "abort",
          jobId: job.id,
          reason: reason?.reason ?? "shutdown",
          message: reason?.message ?? "job aborted",
          ...(reason instanceof JobTimeoutError ? { timeoutSeconds: reason.timeoutSeconds } : {}),
        });
        killTimer = setTimeout(
          () => this.kill(child, `it did not answer the abort within ${this.options.killGraceMs} ms`),
          this.options.killGraceMs,
        );
      };
      child.job = {
        id: job.id,
        progress,
        settle: (outcome) => {
          clearTimeout(killTimer);
          signal.removeEventListener("abort", onAbort);
          child.job = null;
          resolve(outcome);
          this.wakeWaiters();
        },
      };
      if (signal.aborted) onAbort();
      else signal.addEventListener("abort", onAbort, { once: true });
      this.send(child, { kind: "run", module: handler.module, exportName: handler.exportName, job });
    });
  }

  /** An idle child, or a new one once there is room and the restart backoff allows it. */
  private async acquire(signal: AbortSignal): Promise<Child> {
    for (;;) {
      if (this.closing) throw new Error("the worker is stopping: no handler process is started");
      if (signal.aborted)
        throw new Error(`job aborted before a handler process was free: ${describe(signal)}`);
      for (const child of this.children)
        if (child.job === null && child.killedBecause === null && child.proc.connected) {
          child.job = { id: 0, settle: () => undefined }; // reserved until run() sets the job
          return child;
        }
      const waitMs = this.nextForkAt - performance.now();
      if (this.children.size < this.options.size && waitMs <= 0) {
        const child = this.fork();
        child.job = { id: 0, settle: () => undefined };
        return child;
      }
      // Woken when a child is freed or gone, when the backoff is over, or when the job aborts.
      await new Promise<void>((resolve) => {
        const done = () => {
          clearTimeout(timer);
          signal.removeEventListener("abort", done);
          resolve();
        };
        const timer =
          this.children.size < this.options.size ? setTimeout(done, Math.max(waitMs, 1)) : undefined;
        signal.addEventListener("abort", done, { once: true });
        this.waiters.push(done);
      });
    }
  }

  private wakeWaiters(): void {
    for (const wake of this.waiters.splice(0)) wake();
  }

  private fork(): Child {
    const proc = fork(RUNNER, [], {
      execArgv: this.options.execArgv ?? [],
      serialization: "json",
      stdio: ["ignore", "inherit", "inherit", "ipc"],
    });
    let onClosed: () => void = () => undefined;
    const child: Child = {
      proc,
      spawnedAt: performance.now(),
      job: null,
      report: null,
      killedBecause: null,
      closed: new Promise<void>((resolve) => {
        onClosed = resolve;
      }),
    };
    this.children.add(child);
    proc.on("message", (message: FromChild) => this.onMessage(child, message));
    // Sending to a child that just died fails here; its `close` settles the job.
    proc.on("error", (error) =>
      this.options.logger.debug({ err: error, pid: proc.pid }, "handler process error"),
    );
    // `close` comes after `exit` once the IPC channel has closed too: every message has arrived.
    // Node emits no `close` for a channel this side disconnected: then `exit` is the end.
    let gone = false;
    const end = (code: number | null, signalName: NodeJS.Signals | null) => {
      if (gone) return;
      gone = true;
      this.children.delete(child);
      this.onGone(child, code, signalName);
      onClosed();
      this.wakeWaiters();
    };
    proc.once("close", end);
    proc.once("exit", (code, signalName) => {
      if (!proc.connected) end(code, signalName);
    });
    return child;
  }

  private onMessage(child: Child, message: FromChild): void {
    if (message.kind === "crash") child.report = message.error;
    else if (message.kind === "progress") void this.progress(child, message);
    else if (child.job?.id === message.jobId)
      child.job.settle(
        message.kind === "done"
          ? { json: message.json }
          : message.permanent
            ? { error: message.error, permanent: true }
            : { error: message.error },
      );
  }

  /**
   * Writes a child's progress for the job it runs, and answers it (the error's message, code and
   * problems if refused). Sends the answer without waiting for it. Never throws.
   */
  private async progress(child: Child, message: Extract<FromChild, { kind: "progress" }>): Promise<void> {
    const { jobId, requestId } = message;
    let answer: Extract<ToChild, { kind: "progressed" }> = { kind: "progressed", jobId, requestId };
    try {
      const job = child.job;
      if (job?.id !== jobId || !job.progress) throw new JobClaimLostError(jobId, "progress");
      await job.progress(JSON.parse(message.json));
    } catch (error) {
      answer = {
        ...answer,
        error: error instanceof Error ? error.message : String(error),
        ...(error instanceof TaskQueueError ? { code: error.code } : {}),
        ...(error instanceof JobValidationError ? { problems: error.problems } : {}),
      };
    }
    this.send(child, answer);
  }

  /** A child exited: fails the job it ran, and counts a crash unless the pool ended it. */
  private onGone(child: Child, code: number | null, signalName: NodeJS.Signals | null): void {
    const how = signalName ? `killed by ${signalName}` : `exited with code ${code}`;
    const why = child.killedBecause
      ? ` because ${child.killedBecause}`
      : child.report
        ? `: ${child.report}`
        : "";
    const job = child.job;
    if (job && job.id !== 0)
      job.settle({
        error: `handler process (pid ${child.proc.pid}) ${how} while running job ${job.id}${why}`,
      });
    if (this.closing) return;
    if (child.killedBecause) {
      this.options.logger.warn({ jobId: job?.id || null }, `handler process killed: ${child.killedBecause}`);
      return;
    }
    const now = performance.now();
    if (now - child.spawnedAt >= RESTART_BACKOFF.resetAfterMs) this.crashes = 0;
    this.crashes++;
    const delayMs = Math.min(RESTART_BACKOFF.initialMs * 2 ** (this.crashes - 1), RESTART_BACKOFF.maxMs);
    this.nextForkAt = now + delayMs;
    this.logCrash(`handler process ${how}${why}`, job && job.id !== 0 ? job.id : null, delayMs);
  }

  /** Logs a distinct crash at its 1st, 2nd, 4th, 8th... occurrence, with its count. */
  private logCrash(description: string, jobId: number | null, restartInMs: number): void {
    const key =
      this.crashCounts.has(description) || this.crashCounts.size < MAX_CRASH_KINDS ? description : "other";
    const count = (this.crashCounts.get(key) ?? 0) + 1;
    this.crashCounts.set(key, count);
    if ((count & (count - 1)) === 0)
      this.options.logger.warn(
        { crashes: count, jobId, restartInMs },
        `sandboxed handler crashed (${count} time${count === 1 ? "" : "s"} so far): ${key}`,
      );
  }

  private send(child: Child, message: ToChild): void {
    if (!child.proc.connected) return;
    child.proc.send(message, (error) => {
      if (error) this.kill(child, `a message to it failed (${error.message})`);
    });
  }

  private kill(child: Child, because: string): void {
    if (child.proc.exitCode !== null || child.proc.signalCode !== null) return;
    child.killedBecause ??= because;
    child.proc.kill("SIGKILL");
  }

  /**
   * Ends every child: asks it to exit (the runner exits at once), SIGKILLs those still alive after
   * `killGraceMs`, and resolves once all have exited (a job still running fails as killed).
   * Forks no more children afterwards. Never throws.
   */
  async close(): Promise<void> {
    this.closing = true;
    this.wakeWaiters();
    const children = [...this.children];
    if (children.length === 0) return;
    for (const child of children) {
      if (child.job) child.killedBecause ??= "the worker stopped";
      this.send(child, { kind: "stop" });
    }
    let timer: NodeJS.Timeout | undefined;
    const exited = Promise.all(children.map((c) => c.closed));
    await Promise.race([
      exited,
      new Promise<void>((resolve) => (timer = setTimeout(resolve, this.options.killGraceMs))),
    ]);
    clearTimeout(timer);
    for (const child of children) this.kill(child, "the worker stopped");
    await exited;
  }
}

function describe(signal: AbortSignal): string {
  const reason = signal.reason as { message?: unknown } | undefined;
  return typeof reason?.message === "string" ? reason.message : "aborted";
}
