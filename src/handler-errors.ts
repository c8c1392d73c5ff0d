/**
 * The errors of a running handler's own job: why its `AbortSignal` fired, and a refused write of
 * its own (progress, transactional completion). Re-exported by errors.ts.
 */
import { TaskQueueError } from "./error-base.js";

/**
 * Why a running job's `AbortSignal` fired (its `signal.reason`):
 * - `shutdown`: the worker stopped and the grace period ran out; the job is given back to pending;
 * - `session_lost`: the worker's lock session died, so it can no longer prove it owns the job; the
 *   reaper gives the job to another worker;
 * - `claim_lost`: the database no longer shows this worker owning the job (its heartbeat or running
 *   mark was refused by the fence); nothing the handler returns is written;
 * - `cancelled`: someone cancelled the job (`POST /jobs/{id}/cancel`, `queue.cancelJob`); it is
 *   already `cancelled` in the database and nothing the handler returns is written
 *   ({@link JobCancelledError});
 * - `timeout`: the attempt ran past its `timeout_seconds`; the attempt fails with an error saying
 *   so and follows the retry policy ({@link JobTimeoutError}).
 */
export type JobAbortReason = "shutdown" | "session_lost" | "claim_lost" | "cancelled" | "timeout";

/** The `reason` of an aborted handler's `AbortSignal`. Handlers may check `reason` to tell why. */
export class JobAbortedError extends TaskQueueError {
  constructor(
    readonly reason: JobAbortReason,
    readonly jobId: number,
    message: string,
  ) {
    super("job_aborted", message);
  }
}

/**
 * The `reason` of the `AbortSignal` of a handler whose job was cancelled while it ran: the job is
 * `cancelled` in the database already, and whatever the handler returns is refused.
 */
export class JobCancelledError extends JobAbortedError {
  constructor(jobId: number, message = `job ${jobId} was cancelled`) {
    super("cancelled", jobId, message);
  }
}

/**
 * The `reason` of the `AbortSignal` of a handler that ran past its job's `timeout_seconds` (or the
 * worker's `JOB_TIMEOUT_SECONDS`): the attempt fails with this message and is retried as any
 * failure (or dead-lettered when no retry is left).
 */
export class JobTimeoutError extends JobAbortedError {
  constructor(
    jobId: number,
    /** The bound that was exceeded, seconds. */
    readonly timeoutSeconds: number,
    message = `job ${jobId} timed out: its attempt ran longer than ${timeoutSeconds} s (timeout_seconds)`,
  ) {
    super("timeout", jobId, message);
  }
}

/**
 * A handler's `job.progress()` or `job.complete()` was refused by the fence: this worker no longer
 * owns the job's claim (or its lock session was lost, or its outcome is already decided), so
 * nothing was written. Roll back the transaction `job.complete()` ran in.
 */
export class JobClaimLostError extends TaskQueueError {
  constructor(
    readonly jobId: number,
    readonly write: "progress" | "complete",
  ) {
    super("job_claim_lost", `job ${jobId}: ${write} refused, this worker no longer owns the job's claim`);
  }
}

/**
 * The typed abort reason for `reason` (a {@link JobCancelledError} or {@link JobTimeoutError} where
 * one exists), e.g. to rebuild a reason that crossed a process boundary (sandboxed handlers).
 */
export function jobAbortError(
  reason: JobAbortReason,
  jobId: number,
  message: string,
  timeoutSeconds = 0,
): JobAbortedError {
  if (reason === "cancelled") return new JobCancelledError(jobId, message);
  if (reason === "timeout") return new JobTimeoutError(jobId, timeoutSeconds, message);
  return new JobAbortedError(reason, jobId, message);
}
