/**
 * The handler registry: job type → handler (DESIGN.md §7). A worker claims only the types it has
 * handlers for.
 */
import { HandlerTypeError } from "../errors.js";
import type { JsonValue } from "../queue/types.js";

/** What a handler receives about its job. */
export interface HandlerJob {
  id: number;
  type: string;
  payload: JsonValue;
  /** Failed attempts before this execution (0 on the first). With `id`, the key for idempotency. */
  attempt: number;
  maxRetries: number;
}

/**
 * A job handler. Returns a JSON-serialisable result (undefined is stored as null) or throws to fail
 * the attempt. `signal` aborts on shutdown past the grace period, when the worker's lock session is
 * lost, or when its claim was taken away; its `reason` is then a `JobAbortedError` saying which.
 * Long handlers should honour it.
 * The handler holds no database connection of the queue's.
 */
export type JobHandler = (job: HandlerJob, signal: AbortSignal) => unknown | Promise<unknown>;

export class HandlerRegistry {
  private readonly handlers = new Map<string, JobHandler>();

  /**
   * Registers `handler` for `type`, replacing any earlier one. Returns the registry for chaining.
   * @throws {HandlerTypeError} if `type` is not a string, is empty, or is longer than 200 characters.
   */
  register(type: string, handler: JobHandler): this {
    if (typeof type !== "string" || type.length < 1 || type.length > 200)
      throw new HandlerTypeError("job type must be a string of 1 to 200 characters");
    this.handlers.set(type, handler);
    return this;
  }

  /** The handler of `type`, or undefined. */
  get(type: string): JobHandler | undefined {
    return this.handlers.get(type);
  }

  /** Every registered type, sorted. */
  types(): string[] {
    return [...this.handlers.keys()].sort();
  }
}
