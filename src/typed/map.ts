/**
 * Typed jobs (issue 13 item 1): a job map names each job type and its payload (and, optionally,
 * its result), and {@link TaskQueue} takes it as a type parameter:
 *
 * ```ts
 * const queue = new TaskQueue<{ send_email: { to: string }; resize: JobType<{ url: string }, { bytes: number }> }>(…);
 * queue.register("send_email", async (job) => sendMail(job.payload.to)); // job.payload: { to: string }
 * await queue.addJob({ type: "send_email", payload: { to: "a@example.com" } });
 * await queue.addJob({ type: "send_emial", payload: {} }); // does not compile
 * ```
 *
 * Types only: nothing here exists at run time. A map checks at compile time; a catalog made with
 * `defineJobs` (catalog.ts) also checks payloads at enqueue.
 */
import type { JobSpec, JsonValue } from "../queue/types.js";
import type { HandlerJob, SandboxedHandlerSpec } from "../worker/registry.js";

declare const jobTypeBrand: unique symbol;

/**
 * A job map entry that types the result as well as the payload: `JobType<{ url: string }, { bytes: number }>`.
 * An entry that is not a `JobType` is the payload type, and the result is `unknown`.
 */
export interface JobType<Payload, Result = unknown> {
  readonly [jobTypeBrand]: { payload: Payload; result: Result };
}

/** A job map: job type → payload type (or {@link JobType}). */
export type JobMap = object;

/** The map of an untyped queue: any type name, any JSON payload (what `TaskQueue` is without a map). */
export type UntypedJobs = Record<string, JsonValue>;

/** The job type names of a map. */
export type JobTypeName<M extends JobMap> = keyof M & string;

/** The payload type of job type `K` of map `M`. */
export type PayloadOf<M extends JobMap, K extends keyof M> =
  M[K] extends JobType<infer P, unknown> ? P : M[K];

/** The result type of job type `K` of map `M` (`unknown` unless the entry is a {@link JobType}). */
export type ResultOf<M extends JobMap, K extends keyof M> =
  M[K] extends JobType<unknown, infer R> ? R : unknown;

/** True (as a type) when `M` is a map of every string, that is, untyped. */
type IsUntyped<M extends JobMap> = string extends keyof M ? true : false;

/**
 * What `addJob` takes for map `M`: a {@link JobSpec} whose `type` is one of the map's names and
 * whose `payload` has that type's payload type (required). For an untyped queue, a `JobSpec`.
 */
export type TypedJobSpec<M extends JobMap> =
  IsUntyped<M> extends true
    ? JobSpec
    : {
        [K in JobTypeName<M>]: Omit<JobSpec, "type" | "payload"> & { type: K; payload: PayloadOf<M, K> };
      }[JobTypeName<M>];

/** What a typed handler of job type `K` receives: a {@link HandlerJob} with its type and payload typed. */
export type TypedHandlerJob<M extends JobMap, K extends JobTypeName<M>> =
  IsUntyped<M> extends true
    ? HandlerJob
    : Omit<HandlerJob, "type" | "payload"> & { type: K; payload: PayloadOf<M, K> };

/**
 * A handler of job type `K` of map `M`: returns the entry's result type (any JSON value when
 * the map does not type it).
 */
export type TypedJobHandler<M extends JobMap, K extends JobTypeName<M>> = (
  job: TypedHandlerJob<M, K>,
  signal: AbortSignal,
) => ResultOf<M, K> | Promise<ResultOf<M, K>>;

/**
 * What `register` takes for type `K`: a typed function handler, or a sandboxed one (whose module
 * TypeScript cannot see, so it is not typed).
 */
export type TypedRegisteredHandler<M extends JobMap, K extends JobTypeName<M>> =
  | TypedJobHandler<M, K>
  | SandboxedHandlerSpec
  | { readonly sandbox: "process"; readonly module: string; readonly exportName: string };
