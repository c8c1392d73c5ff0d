/**
 * The entry module of a sandboxed handler's child process (forked by pool.ts). It runs one job at
 * a time: imports the handler module named in the `run` message (cached per module and export),
 * calls the handler with the job and an AbortSignal that the worker's `abort` message aborts (its
 * reason a `JobAbortedError` of the same kind: `JobCancelledError`, `JobTimeoutError`, …), and answers the outcome. An uncaught exception or
 * unhandled rejection is reported to the worker and ends the process with code 1; a `stop`
 * message or a disconnected IPC channel (the worker stopped or died) ends it with code 0.
 */
import { jobAbortError, TaskQueueError } from "../../errors.js";
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

function send(message: FromChild, then?: () => void): void {
  try {
    process.send?.(message, undefined, {}, () => then?.());
  } catch {
    // The channel closed: the worker is gone, and so is whoever the answer was for.
    then?.();
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
 * The job as a sandboxed handler gets it: `progress` and `complete` write through the worker's
 * connections, which this process does not have; they reject.
 */
function withoutWrites(job: HandlerJobData): HandlerJob {
  const unavailable = (what: string) => () =>
    Promise.reject(
      new TaskQueueError("sandbox_unsupported", `job.${what}() is not available in a sandboxed handler`),
    );
  return { ...job, progress: unavailable("progress"), complete: unavailable("complete") };
}

async function run(message: Extract<ToChild, { kind: "run" }>): Promise<void> {
  const { job } = message;
  const controller = new AbortController();
  current = { jobId: job.id, controller };
  let outcome: HandlerOutcome;
  try {
    const handler = await load(message.module, message.exportName);
    outcome = resultOutcome(await handler(withoutWrites(job), controller.signal));
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
  else if (message.kind === "stop") process.exit(0);
  else if (message.kind === "abort" && current?.jobId === message.jobId)
    current.controller.abort(
      jobAbortError(message.reason, message.jobId, message.message, message.timeoutSeconds),
    );
});
