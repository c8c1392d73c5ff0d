/**
 * /jobs routes (DESIGN.md §8): enqueue one or many, read, list, cancel. Every route validates its
 * input against the schemas in ../schemas.ts and talks only to the {@link Ledger}.
 */

import type { IncomingMessage } from "node:http";
import type { FastifyPluginAsyncTypebox } from "@fastify/type-provider-typebox";
import { type Static, Type } from "@sinclair/typebox";
import type { FastifyBaseLogger, FastifyReply } from "fastify";
import { JobNotFoundError, QueueFullError, TaskQueueError } from "../../errors.js";
import { LIMITS } from "../../queue/job-shape.js";
import type { Ledger } from "../../queue/ledger.js";
import type { Job, JobSpec } from "../../queue/types.js";
import { JobWaitTimeoutError } from "../../queue/waits.js";
import { batchAnswer } from "../job-response.js";
import {
  BatchBody,
  BatchHeaders,
  BatchIdsResponse,
  BatchResponse,
  DEFAULT_LIST_LIMIT,
  GetJobQuerystring,
  JobIdParams,
  JobListResponse,
  JobResponse,
  JobSpecBody,
  ListJobsQuerystring,
  prefersMinimalReturn,
  problemResponse,
  toJobResponse,
} from "../schemas.js";

/** What POST /jobs/batch answers: the jobs, or with `Prefer: return=minimal` their ids. */
type BatchAnswer = Static<typeof BatchResponse> | Static<typeof BatchIdsResponse>;

/** Options of {@link jobRoutes}. */
export interface JobRoutesOptions {
  ledger: Ledger;
}

/** Maps a validated wire body to the ledger's spec (snake_case → camelCase). */
function toJobSpec(body: JobSpecBody): JobSpec {
  const spec: JobSpec = { type: body.type };
  if (body.payload !== undefined) spec.payload = body.payload as JobSpec["payload"];
  if (body.priority !== undefined) spec.priority = body.priority;
  if (body.max_retries !== undefined) spec.maxRetries = body.max_retries;
  if (body.run_at !== undefined) spec.runAt = body.run_at;
  if (body.idempotency_key !== undefined) spec.idempotencyKey = body.idempotency_key;
  if (body.timeout_seconds !== undefined) spec.timeoutSeconds = body.timeout_seconds;
  return spec;
}

const invalidInput = problemResponse("Invalid input: `errors` names each bad field.");
const bodyErrors = {
  400: problemResponse("Malformed JSON."),
  413: problemResponse("Body too large."),
  415: problemResponse("Body is not application/json, or has a Content-Encoding other than identity."),
  422: invalidInput,
  409: problemResponse(
    "An `idempotency_key` is held by a job enqueued with a different body; nothing was written. `errors` names the field.",
  ),
  429: problemResponse(
    "A pending-jobs cap (MAX_PENDING_JOBS, MAX_PENDING_JOBS_PER_TYPE) is reached; nothing was written. Retry after `Retry-After` seconds.",
  ),
  503: problemResponse(
    "The API holds its budget of request bodies (API_MAX_INFLIGHT_BODY_BYTES), or the database is unreachable; retry after `Retry-After` seconds.",
  ),
};

/** Sets the Retry-After of a {@link QueueFullError} (answered 429 by problem.ts); returns the error to throw on. */
function withRetryAfter(reply: FastifyReply, error: unknown): unknown {
  if (error instanceof QueueFullError) reply.header("retry-after", String(error.retryAfterSeconds));
  return error;
}

/**
 * The job once final, or as it is after `waitSeconds` (null: it no longer exists). The wait ends
 * early, unanswered, if the client goes away (`request` closes).
 */
async function waitForJob(
  ledger: Ledger,
  id: number,
  waitSeconds: number,
  request: IncomingMessage,
): Promise<Job | null> {
  const gone = new AbortController();
  const abort = () => gone.abort(new Error("the client closed the request"));
  request.once("close", abort);
  try {
    return await ledger.waitForJob(id, { timeoutMs: waitSeconds * 1000, signal: gone.signal });
  } catch (error) {
    // Past the wait, or the API closing (its waits end first): the job as it is now.
    if (error instanceof JobWaitTimeoutError) return error.job ?? ledger.getJob(id);
    if (error instanceof TaskQueueError && error.code === "queue_closed") return ledger.getJob(id);
    throw error;
  } finally {
    request.off("close", abort);
  }
}

/**
 * Registers POST /jobs, POST /jobs/batch, GET /jobs/:id, GET /jobs and DELETE /jobs/:id.
 * Errors are thrown to the problem handler (problem.ts): JobValidationError → 422,
 * JobNotFoundError → 404, JobStateConflictError → 409.
 */
export const jobRoutes: FastifyPluginAsyncTypebox<JobRoutesOptions> = async (app, { ledger }) => {
  // Long-polls answer at once when the API closes, instead of holding its close for up to 30 s.
  app.addHook("preClose", async () => {
    await ledger.closeWaits();
  });
  app.post(
    "/jobs",
    {
      schema: {
        tags: ["jobs"],
        summary: "Enqueue a job",
        description:
          `Creates one pending job. \`priority\` defaults to ${LIMITS.priority.default}, \`max_retries\` to ${LIMITS.maxRetries.default}, \`payload\` to \`{}\`, ` +
          "`run_at` to now (a `run_at` without UTC offset is rejected with 422; one in the past means now). " +
          "Unknown fields are rejected with 422. With an `idempotency_key` that a job holds (any state, within " +
          "IDEMPOTENCY_WINDOW_SECONDS of its creation), nothing is created and that job is answered with 200; " +
          "the same key with a different body is refused with 409. A type outside ALLOWED_JOB_TYPES (when set) is " +
          "refused with 422 naming `type`.",
        body: JobSpecBody,
        response: {
          201: JobResponse,
          200: {
            ...JobResponse,
            description: "The job that holds the idempotency key; nothing was created.",
          },
          ...bodyErrors,
        },
      },
    },
    async (request, reply) => {
      let job: Job;
      let created = true;
      try {
        // Without a key, the plain enqueue (and its batching of concurrent requests).
        if (request.body.idempotency_key === undefined)
          job = await ledger.addJob(toJobSpec(request.body), { naming: "snake" });
        else ({ job, created } = await ledger.addJobReporting(toJobSpec(request.body), { naming: "snake" }));
      } catch (error) {
        throw withRetryAfter(reply, error);
      }
      return reply.code(created ? 201 : 200).send(toJobResponse(job));
    },
  );

  app.post(
    "/jobs/batch",
    {
      schema: {
        tags: ["jobs"],
        summary: "Enqueue many jobs at once",
        description:
          `Creates 1–${LIMITS.batchJobs.toLocaleString("en-US")} jobs in one statement, all or nothing, and returns them in the order given ` +
          "(with `Prefer: return=minimal`, only their ids). " +
          "If any job is invalid nothing is written and the 422 names every bad field as `jobs/<index>/<field>`. " +
          "A job whose `idempotency_key` a job holds creates nothing and is answered with that job; jobs of the " +
          "batch that repeat a key with the same body are one job (with another body: 422). The answer is 201 if " +
          "the batch created any job, 200 if every one existed; a key held with a different body refuses the " +
          "whole batch with 409.",
        headers: BatchHeaders,
        body: BatchBody,
        response: {
          201: Type.Union([BatchResponse, BatchIdsResponse]),
          200: {
            ...Type.Union([BatchResponse, BatchIdsResponse]),
            description: "Every job held its idempotency key already; nothing was created.",
          },
          ...bodyErrors,
        },
      },
    },
    async (request, reply) => {
      const specs = request.body.jobs.map(toJobSpec);
      // Serialized here, not by the schema's serializer (twice as slow for 1,000 jobs); Fastify
      // sends a string or stream body with a content type as it is (the cast only tells the type
      // provider so). The jobs' text comes from toJobResponse, so the shape is BatchResponse's.
      try {
        // With idempotency keys, 200 when no job was created; without, as before.
        const keyed = request.body.jobs.some((job) => job.idempotency_key !== undefined);
        if (prefersMinimalReturn(request.headers.prefer)) {
          let ids: number[];
          let code = 201;
          if (!keyed) ids = await ledger.addJobIds(specs, { naming: "snake" });
          else {
            const inserted = await ledger.addInsertedJobs(specs, { naming: "snake" });
            ids = inserted.map(({ row }) => row.id);
            if (inserted.every((job) => job.existing !== undefined)) code = 200;
          }
          reply
            .code(code)
            .type("application/json; charset=utf-8")
            .header("preference-applied", "return=minimal");
          return reply.send(JSON.stringify({ ids }) as unknown as BatchAnswer);
        }
        // The answer is written from the stored payload texts, not from jobs parsed back, and
        // a large one streamed (job-response.ts batchAnswer): the same bytes, without three more
        // copies of the payloads. Jobs that held their idempotency key are answered as they are.
        const inserted = await ledger.addInsertedJobs(specs, { naming: "snake" });
        const answer = batchAnswer(inserted);
        const code = keyed && inserted.every((job) => job.existing !== undefined) ? 200 : 201;
        reply.code(code).type("application/json; charset=utf-8");
        if (Buffer.isBuffer(answer)) return reply.send(answer as unknown as BatchAnswer);
        reply.header("content-length", answer.bytes);
        return reply.send(answer.stream as unknown as BatchAnswer);
      } catch (error) {
        throw withRetryAfter(reply, error);
      }
    },
  );

  app.get(
    "/jobs/:id",
    {
      schema: {
        tags: ["jobs"],
        summary: "Get a job",
        description:
          "The job with its status, attempt count, result, latest error, attempt history and progress. " +
          `With \`wait\` (seconds, at most ${LIMITS.waitSeconds}) it long-polls: it answers as soon as the job is ` +
          "done, dead or cancelled (woken by LISTEN/NOTIFY, not a poll), or when the wait ends, with the job as it is then.",
        params: JobIdParams,
        querystring: GetJobQuerystring,
        response: {
          200: JobResponse,
          404: problemResponse("No job has this id."),
          422: problemResponse("The id is not a positive integer, or `wait` is not an integer from 0 to 30."),
        },
      },
    },
    async (request, reply) => {
      const { id } = request.params;
      const waitSeconds = request.query.wait ?? 0;
      const job =
        waitSeconds > 0 ? await waitForJob(ledger, id, waitSeconds, request.raw) : await ledger.getJob(id);
      if (!job) throw new JobNotFoundError(id);
      return reply.send(toJobResponse(job));
    },
  );

  app.get(
    "/jobs",
    {
      schema: {
        tags: ["jobs"],
        summary: "List jobs",
        description:
          "Jobs newest first, optionally filtered by `status`, `type` and `created_after`, paged with " +
          `\`limit\` (${LIMITS.listLimit.min}–${LIMITS.listLimit.max}, default ${LIMITS.listLimit.default}) and \`offset\` (default 0). Unknown query parameters are rejected with 422; ` +
          "a parameter whose percent-encoding is not UTF-8 (`type=%FF`) with 400.",
        querystring: ListJobsQuerystring,
        response: {
          200: JobListResponse,
          400: problemResponse("A query parameter is not valid percent-encoded UTF-8."),
          422: invalidInput,
        },
      },
    },
    async (request, reply) => {
      const { status, type, created_after: createdAfter } = request.query;
      const limit = request.query.limit ?? DEFAULT_LIST_LIMIT;
      const offset = request.query.offset ?? 0;
      const jobs = await ledger.listJobs({
        status,
        type,
        createdAfter: createdAfter === undefined ? undefined : new Date(createdAfter.replace(" ", "T")),
        limit,
        offset,
      });
      return reply.send({ jobs: jobs.map(toJobResponse), limit, offset });
    },
  );

  app.delete(
    "/jobs/:id",
    {
      schema: {
        tags: ["jobs"],
        summary: "Cancel a pending job",
        description:
          "Cancels the job if it is still pending and returns it with status `cancelled`. " +
          "A job that is claimed, running or finished cannot be cancelled (409).",
        params: JobIdParams,
        response: {
          200: JobResponse,
          404: problemResponse("No job has this id."),
          409: problemResponse("The job is not pending."),
          422: problemResponse("The id is not a positive integer."),
        },
      },
    },
    async (request, reply) => {
      const job = await ledger.cancelPendingJob(request.params.id);
      logCancel(request.log, job);
      return reply.send(toJobResponse(job));
    },
  );

  app.post(
    "/jobs/:id/cancel",
    {
      schema: {
        tags: ["jobs"],
        summary: "Cancel a pending, claimed or running job",
        description:
          "Cancels the job and returns it with status `cancelled`. A pending job is cancelled as DELETE does. " +
          "A claimed or running job is cancelled at once in the database; the worker that runs it, on any host, is " +
          "told by NOTIFY (its heartbeat is the fallback), aborts the handler's AbortSignal with a `JobCancelledError`, " +
          "and whatever the handler returns afterwards is refused. A finished job (done, dead, cancelled) cannot be " +
          "cancelled (409).",
        params: JobIdParams,
        response: {
          200: JobResponse,
          404: problemResponse("No job has this id."),
          409: problemResponse("The job is finished (done, dead or cancelled)."),
          422: problemResponse("The id is not a positive integer."),
        },
      },
    },
    async (request, reply) => {
      const job = await ledger.cancelJob(request.params.id);
      logCancel(request.log, job);
      return reply.send(toJobResponse(job));
    },
  );
};

/**
 * The job log's line for a cancel (README, "Metrics and logs"): the API process writes it, once;
 * the worker that ran a cancelled job logs its abort as `aborted`, not as another cancel.
 */
function logCancel(log: FastifyBaseLogger, job: Job): void {
  log.info({ jobId: job.id, type: job.type, attempt: job.attempt, event: "cancelled" }, "job cancelled");
}
