/**
 * The IPC messages between a worker and a sandboxed handler's child process (runner.ts). They
 * cross as JSON (`child_process` "json" serialization): one job at a time per child.
 */
import type { FieldProblem, JobAbortReason } from "../../errors.js";
import type { HandlerJobData } from "../registry.js";

/**
 * Worker → child: run a job (the child has none running), abort the one it runs, answer a
 * `progress` message, or exit.
 */
export type ToChild =
  | {
      kind: "run";
      /** The handler module's URL (`file:` or a bare specifier the child can import). */
      module: string;
      /** The module's export that is the handler. */
      exportName: string;
      job: HandlerJobData;
    }
  | {
      kind: "abort";
      jobId: number;
      reason: JobAbortReason;
      message: string;
      /** For `timeout`: the bound that was exceeded, seconds (the child rebuilds a `JobTimeoutError`). */
      timeoutSeconds?: number;
    }
  /**
   * The answer to the child's `progress` message `requestId`: written, or refused with the worker's
   * error (its message, its `code` if it is a `TaskQueueError`, its `problems` if it is a
   * `JobValidationError`: the child rejects with the same error).
   */
  | {
      kind: "progressed";
      jobId: number;
      requestId: number;
      error?: string;
      code?: string;
      problems?: FieldProblem[];
    }
  /** The worker stops: exit now (code 0), whatever runs. */
  | { kind: "stop" };

/** Child → worker: the job's outcome, its handler's progress, or what is about to kill the child. */
export type FromChild =
  /**
   * `job.progress(value)` of the job the child runs: `json` is the value as storable JSON text
   * (checked in the child: a BigInt or NaN cannot cross as JSON). Answered by `progressed`.
   */
  | { kind: "progress"; jobId: number; requestId: number; json: string }
  | { kind: "done"; jobId: number; json: string }
  /** `permanent`: the handler threw a permanent error (errors.ts `isPermanentFailure`): no retries. */
  | { kind: "failed"; jobId: number; error: string; permanent: boolean }
  /** An uncaught exception or unhandled rejection: the child exits (code 1) right after. */
  | { kind: "crash"; error: string };
