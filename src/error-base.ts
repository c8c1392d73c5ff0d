/**
 * The base class of taskqueue's typed errors (errors.ts re-exports it with the rest).
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
