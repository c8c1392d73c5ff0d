/**
 * Typed errors. Every error taskqueue throws on purpose is a {@link TaskQueueError} with a stable
 * `code` string, so callers branch on `code` rather than on message text.
 */

/** Base class of every error taskqueue throws on purpose. */
export class TaskQueueError extends Error {
  /** Stable, machine-readable code, e.g. `"config_invalid"`. */
  readonly code: string;

  constructor(code: string, message: string, options?: { cause?: unknown }) {
    super(message, options);
    this.name = new.target.name;
    this.code = code;
  }
}

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

/** A handler's payload check failed; thrown by handlers so that the job fails with a clear error. */
export class PayloadError extends TaskQueueError {
  constructor(message: string) {
    super("payload_invalid", message);
  }
}
