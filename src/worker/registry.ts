/**
 * The handler registry: job type → handler (DESIGN.md §7). A worker claims only the types it has
 * handlers for. A handler runs in the worker's own process (a function), or sandboxed in a child
 * process of the worker's pool (a {@link SandboxedHandler}: see src/worker/sandbox/pool.ts).
 */
import { existsSync } from "node:fs";
import { resolve } from "node:path";
import { fileURLToPath, pathToFileURL } from "node:url";
import type { Queryable } from "../db/pool.js";
import { HandlerModuleError, HandlerTypeError } from "../errors.js";
import type { JsonValue } from "../queue/types.js";

/** The data of a handler's job (what crosses to a sandboxed handler's process). */
export interface HandlerJobData {
  id: number;
  type: string;
  payload: JsonValue;
  /** Failed attempts before this execution (0 on the first). With `id`, the key for idempotency. */
  attempt: number;
  maxRetries: number;
}

/** What a handler receives about its job: its data, and the writes it may make to it while it runs. */
export interface HandlerJob extends HandlerJobData {
  /**
   * The job's AbortSignal, the same one a handler gets as its second argument: it aborts on
   * cancel, on the attempt's timeout, on shutdown past the grace period, when the worker's lock
   * session is lost, or when its claim was taken away, its `reason` saying which. Made when first
   * read (on Node.js 20 an AbortSignal costs about 3 µs to make): a handler that declares only
   * `job` and never reads it pays nothing for it.
   */
  readonly signal: AbortSignal;
  /**
   * Stores `value` (any JSON, at most 8 KiB as JSON text) as the job's progress: shown by getJob
   * and GET /jobs/{id}, and pushed to `waitForJob(id, { onProgress })`. One fenced write per call,
   * resolved once written; report at a human rate, not per item of a tight loop. In a sandboxed
   * handler the worker writes it (an IPC round trip), with the same errors.
   * @throws {JobValidationError} not JSON-serialisable, or over 8 KiB.
   * @throws {JobClaimLostError} this worker no longer owns the claim (nothing written), or the
   *   handler has already returned.
   */
  progress(value: unknown): Promise<void>;
  /**
   * Completes the job inside the application's transaction on `client` (a pg client, or anything
   * with pg's `query`, between its BEGIN and COMMIT): the job is done with `result` exactly when that
   * transaction commits, and not at all if it rolls back. Commit before the handler returns: the
   * worker then writes nothing more for the job (its return value is ignored). If the transaction
   * did not commit, the attempt fails (the handler's own error if it threw) and is retried as any
   * failure. Until the transaction ends the job's row stays locked: keep it short. Not available
   * in a sandboxed handler (rejects with code `sandbox_unsupported`).
   * @throws {JobValidationError} `result` not JSON-serialisable or over 1 MiB.
   * @throws {JobClaimLostError} the fence refused it (this worker lost the claim, or the handler
   *   has already returned): nothing was written; roll back.
   */
  complete(client: Queryable, result?: unknown): Promise<void>;
}

/**
 * A job handler. Returns a JSON-serialisable result (undefined is stored as null) or throws to fail
 * the attempt. `signal` (also `job.signal`) aborts on cancel, on the attempt's timeout, on shutdown
 * past the grace period, when the worker's lock session is lost, or when its claim was taken away;
 * its `reason` is then a `JobAbortedError` saying which. Long handlers should honour it. A handler
 * that declares only `job` gets no second argument made for it (src/worker/signal-argument.ts).
 * The handler holds no database connection of the queue's.
 */
export type JobHandler = (job: HandlerJob, signal: AbortSignal) => unknown | Promise<unknown>;

/**
 * A handler that runs in a child process of the worker (one job at a time per child), made by
 * {@link sandboxed}: its module's export `exportName` is a {@link JobHandler}. A crash, exit or
 * blocked event loop of the child fails only the job it runs.
 */
export interface SandboxedHandler {
  readonly sandbox: "process";
  /** The module's URL (a path is turned into a `file:` URL). */
  readonly module: string;
  /** The export that is the handler. Default `"default"`. */
  readonly exportName: string;
}

/** A handler as {@link HandlerRegistry.register} takes it. */
export type RegisteredHandler = JobHandler | SandboxedHandler;

/** A sandboxed handler spelled as a plain object (for a `--handlers` module's `{type: …}` form). */
export interface SandboxedHandlerSpec {
  sandbox: "process";
  /** A path (relative to the working directory) or a URL. */
  module: string | URL;
  /** The export that is the handler. Default `"default"`. */
  export?: string;
}

/**
 * A handler that runs sandboxed, in a child process of the worker's pool (like BullMQ's
 * sandboxed processors): `queue.register("resize", sandboxed(new URL("./resize.js", import.meta.url)))`.
 * `module` is a URL (`file:`; for a package, `import.meta.resolve("pkg/handler")`) or a path
 * (resolved against the working directory); a file must exist. Its export `options.export` (default `"default"`) is the
 * `(job, signal) => result` handler. The result and error cross as JSON.
 * @throws {HandlerModuleError} if `module` is empty, its file does not exist, or `export` is not
 *   a non-empty string.
 */
export function sandboxed(module: string | URL, options: { export?: string } = {}): SandboxedHandler {
  const exportName = options.export ?? "default";
  if (typeof exportName !== "string" || exportName.length === 0)
    throw new HandlerModuleError("a sandboxed handler's export must be a non-empty string");
  let url: string;
  if (module instanceof URL) url = module.href;
  else if (typeof module === "string" && module.length > 0)
    // A URL has a scheme of two letters or more (`C:\…` is a Windows path).
    url = /^[a-z][a-z0-9+.-]+:/i.test(module) ? module : pathToFileURL(resolve(module)).href;
  else throw new HandlerModuleError("a sandboxed handler needs a module (a file URL or a path)");
  if (url.startsWith("file:") && !existsSync(fileURLToPath(url)))
    throw new HandlerModuleError(`sandboxed handler module ${url} does not exist`);
  return Object.freeze({ sandbox: "process", module: url, exportName });
}

/** True if `handler` runs sandboxed (made by {@link sandboxed}). */
export function isSandboxed(handler: RegisteredHandler | undefined): handler is SandboxedHandler {
  return typeof handler === "object" && handler !== null && handler.sandbox === "process";
}

export class HandlerRegistry {
  private readonly handlers = new Map<string, RegisteredHandler>();

  /**
   * Registers `handler` for `type`, replacing any earlier one: a function runs in the worker's
   * process; `sandboxed(module)` (or `{ module, export?, sandbox: "process" }`) runs in a child
   * process. Returns the registry for chaining.
   * @throws {HandlerTypeError} if `type` is not a string, is empty, or is longer than 200
   *   characters, or `handler` is neither a function nor a sandboxed handler.
   * @throws {HandlerModuleError} on a sandboxed handler's bad module or export (see {@link sandboxed}).
   */
  register(type: string, handler: RegisteredHandler | SandboxedHandlerSpec): this {
    if (typeof type !== "string" || type.length < 1 || type.length > 200)
      throw new HandlerTypeError("job type must be a string of 1 to 200 characters");
    if (typeof handler === "function") this.handlers.set(type, handler);
    else if (typeof handler === "object" && handler !== null && handler.sandbox === "process")
      this.handlers.set(
        type,
        "exportName" in handler
          ? handler
          : sandboxed(handler.module, { export: (handler as SandboxedHandlerSpec).export }),
      );
    else
      throw new HandlerTypeError(
        `the handler of ${type} must be a function or a sandboxed handler ({ module, sandbox: "process" })`,
      );
    return this;
  }

  /** The handler of `type` (a function, or a {@link SandboxedHandler}), or undefined. */
  get(type: string): RegisteredHandler | undefined {
    return this.handlers.get(type);
  }

  /** Every registered type, sorted. */
  types(): string[] {
    return [...this.handlers.keys()].sort();
  }
}
