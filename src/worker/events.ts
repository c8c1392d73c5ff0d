/**
 * The worker's typed event map, and the one emitter every worker event goes through. Emitting
 * never throws into the runtime: a listener's throw is caught, logged and counted, and neither
 * changes a job's fate nor keeps the other listeners or the other events of a batch from running
 * (graphile-worker's `safeEmit`).
 */
import { EventEmitter } from "node:events";
import type { Logger } from "../log.js";
import type { ClaimedJob, FailedStatus } from "../queue/lock-session.js";
import type { PruneReport } from "../queue/retention.js";
import type { Job, JsonValue } from "../queue/types.js";

/**
 * Which outcome write of a job the fence refused or the worker dropped. (A refused running mark is
 * not reported by itself: the job's claim is lost, and its outcome write is then reported with
 * reason `claim_lost`.)
 */
export type FencedWrite = "complete" | "fail" | "release";

/**
 * Why a job's write was not applied:
 * - `refused`: the fence refused it (this worker no longer owns the claim in the database);
 * - `session_lost`: the lock session that held the job's lock was lost before the write went out;
 * - `write_failed`: the batch's statement failed (the session is reset);
 * - `claim_lost`: the job's claim was found taken away while its handler ran (a refused heartbeat
 *   or running mark), so its outcome is never written.
 */
export type FenceReason = "refused" | "session_lost" | "write_failed" | "claim_lost";

/** What {@link Worker.stop} did with the jobs it held. */
export interface StopReport {
  /** Claimed jobs never started, given back to pending. */
  releasedJobIds: number[];
  /** Jobs still running at the grace deadline: aborted and given back to pending. */
  abandonedJobIds: number[];
}

/**
 * What `job:completed` reports: the job's id, type and attempt (0-based, the one that completed),
 * the handler's run time (`runMs`, milliseconds) and its `result` (parsed from the stored JSON
 * when first read, so a listener that does not read it costs no parse).
 */
export interface JobCompletedEvent {
  id: number;
  type: string;
  attempt: number;
  runMs: number;
  readonly result: JsonValue;
}

/** The `job:completed` event of a completion whose result is the JSON text `resultJson`. */
export function completedEvent(c: {
  id: number;
  type: string;
  attempt: number;
  runMs: number;
  resultJson: string;
}): JobCompletedEvent {
  return new CompletedEvent(c.id, c.type, c.attempt, c.runMs, c.resultJson);
}

/** {@link JobCompletedEvent} with `result` parsed on first read (a class: one object per job, no closure). */
class CompletedEvent implements JobCompletedEvent {
  #parsed: JsonValue | undefined = undefined;
  readonly #resultJson: string;
  constructor(
    readonly id: number,
    readonly type: string,
    readonly attempt: number,
    readonly runMs: number,
    resultJson: string,
  ) {
    this.#resultJson = resultJson;
  }

  get result(): JsonValue {
    if (this.#parsed === undefined) this.#parsed = JSON.parse(this.#resultJson) as JsonValue;
    return this.#parsed;
  }
}

/** Events a worker emits; tests and metrics subscribe instead of polling. */
export interface WorkerEvents {
  "worker:started": [{ workerId: string }];
  /**
   * A lane's heartbeat was written (its worker row and held jobs touched), every
   * `heartbeatIntervalSeconds`; `laneId` is the lane's worker id. `taskqueue worker` touches its
   * health file on it.
   */
  "worker:heartbeat": [{ laneId: string }];
  /** A claim took these jobs; their handlers start from here on. */
  "job:claimed": [{ jobs: ClaimedJob[] }];
  /** A completion was written (by the worker, or committed by the handler's own transaction). */
  "job:completed": [JobCompletedEvent];
  /**
   * A failed attempt was written: `pending` (will retry) or `dead` (retries exhausted);
   * `runMs`: the handler's run time, milliseconds; `attempt`: the attempt that failed (0-based).
   */
  "job:failed": [
    { id: number; type: string; attempt: number; error: string; status: FailedStatus; runMs: number },
  ];
  "job:released": [{ id: number }];
  /** A write for this job was refused by the fence, or dropped (see {@link FenceReason}). */
  "job:fenced": [{ id: number; write: FencedWrite; reason: FenceReason }];
  /** The handler's signal was aborted: the job was cancelled, or its attempt ran past its timeout. */
  "job:aborted": [{ id: number; reason: "cancelled" | "timeout" }];
  /**
   * An aborted handler had not settled `graceMs` after its abort: its slot is freed (a timed-out
   * attempt is written as failed now), and whatever it returns later is refused.
   */
  "job:overdue": [{ id: number; reason: "cancelled" | "timeout"; graceMs: number }];
  /** The outcome of a job cancelled while this worker held it was not written (the job stays cancelled). */
  "job:discarded": [{ id: number; write: FencedWrite }];
  "session:lost": [{ error: Error }];
  "session:restored": [];
  /** The LISTEN connection was lost (a missed ping, an error, its end); it is being re-established. */
  "listener:lost": [{ error: Error }];
  "listener:reconnected": [];
  /** A claim returned (`claimed` of the `requested` jobs): after every claim, woken or polled. */
  "claim:returned": [{ claimed: number; requested: number }];
  "reaper:reaped": [{ jobs: Job[] }];
  /** A pruning pass of this process ran (it held the pruning lock): what it deleted (retention). */
  "history:pruned": [PruneReport];
  /** This process's scheduler pass enqueued these jobs, one per schedule tick (schedules). */
  "schedule:enqueued": [{ jobIds: number[] }];
  "worker:stopped": [StopReport];
}

type Listener = (...args: unknown[]) => unknown;

/** EventEmitter's own emit, which the safe emit wraps. */
const superEmit = EventEmitter.prototype.emit as (
  this: EventEmitter,
  event: string,
  ...args: unknown[]
) => boolean;

/**
 * An EventEmitter of {@link WorkerEvents} whose `emit` never throws: each listener runs in its own
 * try/catch, and a promise a listener returns is watched. A throw or a rejection is logged at
 * error level naming the event and counted in {@link listenerErrors}.
 */
export class WorkerEmitter extends EventEmitter<WorkerEvents> {
  private thrown = 0;

  constructor(protected readonly logger: Logger) {
    // An async listener's rejection comes back to the rejection hook below instead of becoming
    // an unhandled rejection, which would end the process and every job it holds.
    super({ captureRejections: true });
  }

  /** EventEmitter calls this when a promise returned by a listener rejects (`captureRejections`). */
  [Symbol.for("nodejs.rejection")](error: unknown, event: string | symbol): void {
    this.listenerThrew(String(event), error);
  }

  /** How many times a listener of one of these events has thrown. */
  get listenerErrors(): number {
    return this.thrown;
  }

  /**
   * Calls every listener of `event`, each in its own try/catch. Returns whether it had any.
   * One listener (the usual case) runs through EventEmitter's own path, without a copy; every
   * event has at most one argument, so no rest array is built per emit.
   */
  override emit<K extends keyof WorkerEvents>(event: K, ...args: WorkerEvents[K]): boolean;
  override emit(event: keyof WorkerEvents, arg?: unknown): boolean {
    const count = this.listenerCount(event);
    if (count === 0) return false;
    if (count === 1) {
      try {
        return arg === undefined ? superEmit.call(this, event) : superEmit.call(this, event, arg);
      } catch (error) {
        this.listenerThrew(event, error);
        return true;
      }
    }
    // rawListeners: `once` wrappers, which remove themselves when called.
    for (const listener of this.rawListeners(event) as Listener[]) {
      try {
        const result = arg === undefined ? listener.call(this) : listener.call(this, arg);
        if (typeof (result as PromiseLike<unknown> | undefined)?.then === "function")
          (result as PromiseLike<unknown>).then(undefined, (error: unknown) =>
            this.listenerThrew(event, error),
          );
      } catch (error) {
        this.listenerThrew(event, error);
      }
    }
    return true;
  }

  private listenerThrew(event: string, error: unknown): void {
    this.thrown++;
    try {
      this.logger.error({ err: error, event }, `a listener of ${event} threw; the worker carries on`);
    } catch {
      // A logger that throws must not turn the listener's throw into the runtime's.
    }
  }
}
