/**
 * What a running handler may do to its own job besides returning (issue 13, items 4 and 5):
 * `job.progress(value)` and `job.complete(client, result)`, both fenced twice like the worker's
 * own writes: here (the handler still runs, its claim was not abandoned, its lock session is the
 * one it was claimed under) and in the statement (this worker's attempt still holds the row).
 *
 * Transactional completion: `complete()` writes the job done on the application's client, inside
 * its transaction. From then on the worker treats the job as finished by its handler: it no longer
 * marks it running nor heartbeats it (those writes would wait on the row the transaction holds),
 * and a refused heartbeat or running mark no longer counts as a lost claim. Once the handler has
 * returned, {@link HandlerContexts.settle} reads where the claim stands: done by this attempt (the
 * transaction committed: the worker writes nothing, releases the lock, reports `job:completed`), or
 * still held (it rolled back: the attempt fails through the ordinary fenced failure write, with the
 * handler's error if it threw), or taken by another writer (reported fenced).
 */

import type { Queryable } from "../db/pool.js";
import { HandlerMissingError, JobClaimLostError } from "../errors.js";
import type { Logger } from "../log.js";
import {
  type ClaimStanding,
  type HandlerClaim,
  type HandlerWriteLedger,
  storableJson,
} from "../queue/handler-writes.js";
import { LIMITS } from "../queue/job-shape.js";
import type { ClaimedJob } from "../queue/lock-session.js";
import { completedEvent, type WorkerEmitter } from "./events.js";
import type { OutcomeWriter } from "./outcome-writer.js";
import { type HandlerJob, isSandboxed, type RegisteredHandler } from "./registry.js";
import { failureOutcome, type HandlerOutcome, resultOutcome } from "./sandbox/outcome.js";
import { SandboxPool, type SandboxPoolOptions } from "./sandbox/pool.js";
import type { SessionSupervisor } from "./session-supervisor.js";
import { seesSignalArgument } from "./signal-argument.js";

/** A handler's transactional completion: none, its statement in flight, or written (uncommitted until the app commits). */
export type TxCompletion = "none" | "pending" | { resultJson: string };

/** What the contexts read of a running job (the dispatcher's `RunningJob`). */
export interface ContextEntry {
  job: ClaimedJob;
  /** Aborts the handler (cancel, timeout, shutdown, lost claim); its signal is read only when asked for. */
  controller: AbortController;
  generation: number;
  startedAt: number;
  abandoned: false | string;
  txCompletion: TxCompletion;
}

/** What the handler contexts need of their lane. */
export interface ContextDeps {
  writes: HandlerWriteLedger;
  /** The lane's worker id: the fence of its writes. */
  workerId: string;
  supervisor: SessionSupervisor;
  writer: OutcomeWriter;
  events: WorkerEmitter;
  /** True while `entry`'s handler runs (it has not returned). */
  running(entry: ContextEntry): boolean;
  /** Where a failure to record an outcome is logged. */
  logger: Logger;
  /** The sandbox pool's options, for the first sandboxed job. */
  sandbox: SandboxPoolOptions;
}

/** The error of an attempt whose handler called `complete()` and returned without its commit. */
export const UNCOMMITTED_COMPLETION =
  "job.complete() was called, but its transaction had not committed when the handler returned";

export class HandlerContexts {
  /** The child processes of sandboxed handlers, forked at the first sandboxed job. */
  private sandbox: SandboxPool | null = null;

  constructor(private readonly deps: ContextDeps) {}

  /**
   * Runs the job's handler: in this process, or in a child process of the lane's sandbox pool for
   * a sandboxed handler (which gets the job's data and `progress`, written here for `entry`;
   * `complete` rejects there), then hands its outcome to `settled` (with `entry`). A failure (a
   * throw, a result that cannot be stored, a crash of the handler's process) is `{ error }`.
   * Never rejects: a throw of `settled` is logged. One promise per job (this is on the drain's path).
   * The job's signal is read from `entry.controller` only for a handler that can see it (see
   * signal-argument.ts: on Node.js 20 making one costs a third of a drain's JavaScript time).
   */
  async invoke<E extends ContextEntry>(
    entry: E,
    handler: RegisteredHandler | undefined,
    settled: (entry: E, outcome: HandlerOutcome) => void,
  ): Promise<void> {
    let outcome: HandlerOutcome;
    try {
      if (!handler) throw new HandlerMissingError([entry.job.type]);
      if (isSandboxed(handler)) {
        this.sandbox ??= new SandboxPool(this.deps.sandbox);
        const { id, type, payload, attempt, maxRetries } = entry.job;
        outcome = await this.sandbox.run(
          handler,
          { id, type, payload, attempt, maxRetries },
          entry.controller.signal,
          (value) => this.progress(entry, value),
        );
      } else {
        const job = new BoundHandlerJob(this, entry);
        outcome = resultOutcome(
          await (seesSignalArgument(handler)
            ? handler(job, entry.controller.signal)
            : (handler as (job: HandlerJob) => unknown)(job)),
        );
      }
    } catch (error) {
      outcome = failureOutcome(error);
    }
    try {
      settled(entry, outcome);
    } catch (error) {
      // The process must not die with the other jobs.
      this.deps.logger.error({ err: error, jobId: entry.job.id }, "recording a job's outcome failed");
    }
  }

  /** Ends the sandboxed handlers' child processes (stop), within the kill grace. Never throws. */
  async closeSandbox(): Promise<void> {
    await this.sandbox?.close();
  }

  /** True while the worker may still write for `entry` (see the top of the file). */
  private owns(entry: ContextEntry): boolean {
    return (
      entry.abandoned === false &&
      entry.generation === this.deps.supervisor.generation &&
      this.deps.running(entry)
    );
  }

  private claim(entry: ContextEntry): HandlerClaim {
    return { id: entry.job.id, attempt: entry.job.attempt, workerId: this.deps.workerId };
  }

  /** `job.progress(value)` of `entry`'s handler (see {@link HandlerJob.progress}). */
  async progress(entry: ContextEntry, value: unknown): Promise<void> {
    if (!this.owns(entry)) throw new JobClaimLostError(entry.job.id, "progress");
    await this.deps.writes.writeProgress(this.claim(entry), value);
  }

  /** `job.complete(client, result)` of `entry`'s handler (see {@link HandlerJob.complete}). */
  async complete(entry: ContextEntry, client: Queryable, result: unknown): Promise<void> {
    const resultJson = storableJson(result, "result", LIMITS.payloadBytes);
    if (!this.owns(entry)) throw new JobClaimLostError(entry.job.id, "complete");
    const before = entry.txCompletion;
    entry.txCompletion = "pending";
    try {
      await this.deps.writes.completeOn(
        client,
        this.claim(entry),
        resultJson,
        performance.now() - entry.startedAt,
      );
    } catch (error) {
      entry.txCompletion = before;
      throw error;
    }
    entry.txCompletion = { resultJson };
  }

  /**
   * The handler of `entry`, which called `complete()`, has returned with `outcome` after `runMs`:
   * decides the job's outcome from where its claim stands (see the top of the file). Tracked by the
   * writer, so a stop waits for it.
   */
  settle(entry: ContextEntry, outcome: HandlerOutcome, runMs: number): void {
    const { job } = entry;
    const { supervisor, writer, events } = this.deps;
    const session = supervisor.session;
    // The lock goes once the outcome is known to be committed; the event comes after it.
    const unlock = async () => {
      if (!session || entry.generation !== supervisor.generation) return;
      const released = session.releaseLocks([job.id]);
      writer.waitForUnlock(released);
      await released.catch(() => undefined);
    };
    const failure = "error" in outcome ? outcome : { error: UNCOMMITTED_COMPLETION, permanent: undefined };
    writer.track(
      (async () => {
        let standing: ClaimStanding;
        try {
          standing = await this.deps.writes.standing(this.claim(entry));
        } catch {
          // Unknown: the fenced failure write below changes nothing if the completion committed.
          standing = "held";
        }
        if (standing === "held") {
          writer.fail({
            id: job.id,
            type: job.type,
            attempt: job.attempt,
            error: failure.error,
            runMs,
            ...(failure.permanent ? { permanent: true } : {}),
          });
          return;
        }
        await unlock();
        if (standing === "lost") writer.fenced(job.id, "complete", "refused");
        else if (typeof entry.txCompletion === "object")
          events.emit(
            "job:completed",
            completedEvent({ ...job, runMs, resultJson: entry.txCompletion.resultJson }),
          );
      })(),
    );
  }
}

/**
 * The job an in-process handler receives: its data as own properties, `progress` and `complete`
 * as methods bound to its running entry through private fields (one object per job, no closures:
 * this is on the drain's path). Call them as methods (`job.progress(v)`), as with BullMQ's Job.
 * `signal` is a getter: the job's AbortSignal is made when first read.
 */
class BoundHandlerJob implements HandlerJob {
  readonly id: number;
  readonly type: string;
  readonly payload: ClaimedJob["payload"];
  readonly attempt: number;
  readonly maxRetries: number;
  readonly #contexts: HandlerContexts;
  readonly #entry: ContextEntry;

  constructor(contexts: HandlerContexts, entry: ContextEntry) {
    const { job } = entry;
    this.id = job.id;
    this.type = job.type;
    this.payload = job.payload;
    this.attempt = job.attempt;
    this.maxRetries = job.maxRetries;
    this.#contexts = contexts;
    this.#entry = entry;
  }

  get signal(): AbortSignal {
    return this.#entry.controller.signal;
  }

  progress(value: unknown): Promise<void> {
    return this.#contexts.progress(this.#entry, value);
  }

  complete(client: Queryable, result?: unknown): Promise<void> {
    return this.#contexts.complete(this.#entry, client, result);
  }
}
