/**
 * The entry module of a sandboxed handler's child process (forked by pool.ts). It runs one job at
 * a time: imports the handler module named in the `run` message (cached per module and export),
 * calls the handler with the job and an AbortSignal that the worker's `abort` message aborts (its
 * reason a `JobAbortedError` of the same kind: `JobCancelledError`, `JobTimeoutError`, …), and
 * answers the outcome. The job's `progress(value)` asks the worker to write it (a `progress`
 * message) and settles with the worker's answer. An uncaught exception or unhandled rejection is
 * reported to the worker and ends the process with code 1; a `stop` message or a disconnected IPC
 * channel (the worker stopped or died) ends it with code 0.
 */
import { JobClaimLostError, JobValidationError, jobAbortError, TaskQueueError } from "../../errors.js";
import { toStorableJson } from "../../queue/validate.js";
import type { HandlerJob, HandlerJobData, JobHandler } from "../registry.js";
import { describeError, failureOutcome, type HandlerOutcome, resultOutcome } from "./outcome.js";
import type { FromChild, ToChild } from "./protocol.js";

if (typeof process.send !== "function") {
  process.stderr.write("taskqueue: the sandbox runner only runs as a forked child of a worker\n");
  process.exit(2);
}

const handlers = new Map<string, Promise<JobHandler>>();
let current: { jobId: number; controller: AbortController } | null = null;
let crashing = false;
/** The `progress` messages sent and not yet answered, by request id. */
const pendingProgress = new Map<number, { resolve(): void; reject(error: Error): void }>();
let lastRequestId = 0;

/** Sends `message`; `then` runs once it is sent, or failed to be (with the error). */
function send(message: FromChild, then?: (error: Error | null) => void): void {
  try {
    process.send?.(message, undefined, {}, (error: Error | null) => then?.(error ?? null));
  } catch (error) {
    // The channel closed: the worker is gone, and so is whoever the answer was for.
    then?.(error instanceof Error ? error : new Error(String(error)));
  }
}

/** Reports what kills the process, then exits with code 1 (within 1 s even if the report hangs). */
function crash(what: string, error: unknown): void {
  if (crashing) return;
  crashing = true;
  setTimeout(() => process.exit(1), 1000).unref();
  send({ kind: "crash", error: `${what}: ${describeError(error)}` }, () => process.exit(1));
}

process.on("uncaughtException", (error) => crash("uncaught exception", error));
process.on("unhandledRejection", (reason) => crash("unhandled rejection", reason));
process.on("disconnect", () => process.exit(0));

function load(module: string, exportName: string): Promise<JobHandler> {
  const key = `${exportName}\u0000${module}`;
  let handler = handlers.get(key);
  if (!handler) {
    handler = import(module).then((mod: Record<string, unknown>) => {
      const exported = mod[exportName];
      if (typeof exported !== "function")
        throw new TypeError(`handler module ${module} has no function export "${exportName}"`);
      return exported as JobHandler;
    });
    handlers.set(key, handler);
    // A module that failed to load is tried again by the next job.
    handler.catch(() => handlers.delete(key));
  }
  return handler;
}

/**
 * The job as a sandboxed handler gets it. `progress` is written by the worker (see
 * {@link progressOf}); `complete` rejects: it needs the worker's database connection (its fenced
 * completion statement), which this process does not have.
 */
function sandboxJob(job: HandlerJobData, run: NonNullable<typeof current>): HandlerJob {
  return {
    ...job,
    signal: run.controller.signal,
    progress: progressOf(job.id, run),
    complete: () =>
      Promise.reject(
        new TaskQueueError(
          "sandbox_unsupported",
          "job.complete() is not available in a sandboxed handler: it needs the worker's database " +
            "connection, which the handler's process does not have; return the result instead",
        ),
      ),
  };
}

/**
 * `job.progress` of run `run` (job `jobId`): checks the value is storable JSON here (a BigInt, NaN
 * or a cycle cannot cross as JSON; the same `JobValidationError` as in the worker's process), then
 * asks the worker to write it, and settles with its answer. Once the handler has returned it
 * rejects with a `JobClaimLostError` and sends nothing, as in the worker's process. No timer: the
 * worker answers every message once its write ends (bounded as an in-process handler's write is),
 * and if the worker or this process dies, so does the wait.
 */
function progressOf(jobId: number, run: NonNullable<typeof current>): (value: unknown) => Promise<void> {
  return (value) => {
    if (current !== run) return Promise.reject(new JobClaimLostError(jobId, "progress"));
    const stored = toStorableJson(value, "progress");
    if ("problem" in stored) return Promise.reject(new JobValidationError([stored.problem]));
    const requestId = ++lastRequestId;
    return new Promise<void>((resolve, reject) => {
      pendingProgress.set(requestId, { resolve, reject });
      send({ kind: "progress", jobId, requestId, json: stored.json }, (error) => {
        if (!error || !pendingProgress.delete(requestId)) return;
        reject(new TaskQueueError("sandbox_ipc", `progress could not reach the worker: ${error.message}`));
      });
    });
  };
}

/** Settles the `progress` call the worker answered, with the worker's error if it refused. */
function progressed(answer: Extract<ToChild, { kind: "progressed" }>): void {
  const pending = pendingProgress.get(answer.requestId);
  if (!pending) return;
  pendingProgress.delete(answer.requestId);
  if (answer.error === undefined) pending.resolve();
  else if (answer.code === "job_claim_lost") pending.reject(new JobClaimLostError(answer.jobId, "progress"));
  else if (answer.problems) pending.reject(new JobValidationError(answer.problems));
  else pending.reject(new TaskQueueError(answer.code ?? "progress_failed", answer.error));
}

async function run(message: Extract<ToChild, { kind: "run" }>): Promise<void> {
  const { job } = message;
  const controller = new AbortController();
  const thisRun = { jobId: job.id, controller };
  current = thisRun;
  let outcome: HandlerOutcome;
  try {
    const handler = await load(message.module, message.exportName);
    outcome = resultOutcome(await handler(sandboxJob(job, thisRun), controller.signal));
  } catch (error) {
    // A permanent error (errors.ts) crosses as a flag: the worker skips the job's retries.
    outcome = failureOutcome(error);
  }
  current = null;
  if (crashing) return;
  send(
    "json" in outcome
      ? { kind: "done", jobId: job.id, json: outcome.json }
      : { kind: "failed", jobId: job.id, error: outcome.error, permanent: outcome.permanent === true },
  );
}

process.on("message", (message: ToChild) => {
  if (message.kind === "run") void run(message);
  else if (message.kind === "progressed") progressed(message);
  else if (message.kind === "stop") process.exit(0);
  else if (message.kind === "abort" && current?.jobId === message.jobId)
    current.controller.abort(
      jobAbortError(message.reason, message.jobId, message.message, message.timeoutSeconds),
    );
});
