/**
 * /dead-letters routes and POST /jobs/{id}/retry (DESIGN.md §8; issue 14, items 1 and 2): list,
 * read, replay and discard dead letters (one, or a bounded batch matching a filter), and retry a
 * job now. Every route validates its input against the schemas in ../schemas.ts and talks only to
 * the {@link Ledger}; a bulk action takes at most `limit` entries per call (one statement, within
 * the API's deadline) and says whether more match.
 */
import type { FastifyPluginAsyncTypebox } from "@fastify/type-provider-typebox";
import { DeadLetterNotFoundError } from "../../errors.js";
import { LIMITS } from "../../queue/job-shape.js";
import type { Ledger } from "../../queue/ledger.js";
import {
  DEFAULT_LIST_LIMIT,
  DeadLetterBatchResponse,
  DeadLetterListResponse,
  DeadLetterParams,
  DeadLetterResponse,
  DiscardDeadLettersBody,
  JobIdParams,
  JobResponse,
  ListDeadLettersQuerystring,
  problemResponse,
  ReplayDeadLettersBody,
  ReplayResponse,
  toDeadLetterResponse,
  toJobResponse,
} from "../schemas.js";

/** Options of {@link deadLetterRoutes}. */
export interface DeadLetterRoutesOptions {
  ledger: Ledger;
}

/** A date-time the schema accepted (UTC offset required), as a Date; undefined stays undefined. */
const toDate = (text: string | undefined): Date | undefined =>
  text === undefined ? undefined : new Date(text.replace(" ", "T"));

const invalidInput = problemResponse("Invalid input: `errors` names each bad field.");
const noEntry = problemResponse("No dead-letter entry for this job id.");
const badId = problemResponse("The id is not a positive integer.");
const bodyErrors = {
  400: problemResponse("Malformed JSON."),
  415: problemResponse("Body is not application/json."),
  422: problemResponse(
    "Invalid input, or no filter: give `type`, `died_after` or `died_before`, or `all: true` (`errors` names the field).",
  ),
};

/**
 * Registers GET /dead-letters, GET /dead-letters/:job_id, POST /dead-letters/:job_id/replay,
 * POST /dead-letters/replay, DELETE /dead-letters/:job_id, POST /dead-letters/discard and
 * POST /jobs/:id/retry. Errors go to the problem handler (problem.ts): JobValidationError → 422,
 * DeadLetterNotFoundError and JobNotFoundError → 404, JobStateConflictError → 409.
 */
export const deadLetterRoutes: FastifyPluginAsyncTypebox<DeadLetterRoutesOptions> = async (
  app,
  { ledger },
) => {
  app.get(
    "/dead-letters",
    {
      schema: {
        tags: ["dead letters"],
        summary: "List dead letters",
        description:
          "Dead-letter entries (jobs that exhausted their retries or failed permanently), newest death first, " +
          "filtered by `type`, `died_after`, `died_before` and `replayed`, paged with `limit` " +
          `(${LIMITS.listLimit.min}–${LIMITS.listLimit.max}, default ${LIMITS.listLimit.default}) and \`offset\`. ` +
          `Payloads over ${LIMITS.listValueBytes / 1024} KiB are left out (\`payload_omitted\`).`,
        querystring: ListDeadLettersQuerystring,
        response: {
          200: DeadLetterListResponse,
          400: problemResponse("A query parameter is not valid percent-encoded UTF-8."),
          422: invalidInput,
        },
      },
    },
    async (request, reply) => {
      const { type, died_after, died_before, replayed } = request.query;
      const limit = request.query.limit ?? DEFAULT_LIST_LIMIT;
      const offset = request.query.offset ?? 0;
      const entries = await ledger.listDeadLetters(
        {
          type,
          diedAfter: toDate(died_after),
          diedBefore: toDate(died_before),
          replayed: replayed === undefined ? undefined : replayed === "true",
          limit,
          offset,
        },
        "snake",
      );
      return reply.send({ dead_letters: entries.map(toDeadLetterResponse), limit, offset });
    },
  );

  app.get(
    "/dead-letters/:job_id",
    {
      schema: {
        tags: ["dead letters"],
        summary: "Get a dead letter",
        description: "The dead-letter entry of a job: its payload, final error, attempt history and replays.",
        params: DeadLetterParams,
        response: { 200: DeadLetterResponse, 404: noEntry, 422: badId },
      },
    },
    async (request, reply) => {
      const entry = await ledger.getDeadLetter(request.params.job_id);
      if (!entry) throw new DeadLetterNotFoundError(request.params.job_id);
      return reply.send(toDeadLetterResponse(entry));
    },
  );

  app.post(
    "/dead-letters/:job_id/replay",
    {
      schema: {
        tags: ["dead letters"],
        summary: "Replay a dead letter",
        description:
          "Sends the dead job back to pending, due now, with its attempt count reset and its history kept; the " +
          "entry is marked replayed and a worker is woken. Idempotent: if the job is no longer dead (replayed " +
          "already), nothing changes and `replayed` is false, so replaying twice gives one pending job.",
        params: DeadLetterParams,
        response: { 200: ReplayResponse, 404: noEntry, 422: badId },
      },
    },
    async (request, reply) => {
      const { replayed, job } = await ledger.replayDeadLetter(request.params.job_id);
      return reply.send({ replayed, job: job === null ? null : toJobResponse(job) });
    },
  );

  app.post(
    "/dead-letters/replay",
    {
      schema: {
        tags: ["dead letters"],
        summary: "Replay dead letters matching a filter",
        description:
          "Replays, oldest death first, up to `limit` (default 1000) dead letters matching the filter whose job is " +
          "still dead, each as POST /dead-letters/{job_id}/replay does, in one statement. `more` true: the batch " +
          "was full; call again to go on. An empty filter is refused (422) unless `all` is true.",
        body: ReplayDeadLettersBody,
        response: { 200: DeadLetterBatchResponse, ...bodyErrors },
      },
    },
    async (request, reply) => {
      const { type, died_after, died_before, all, limit } = request.body;
      const { ids, more } = await ledger.replayDeadLetters(
        { type, diedAfter: toDate(died_after), diedBefore: toDate(died_before), all },
        { limit, naming: "snake" },
      );
      return reply.send({ job_ids: ids, more });
    },
  );

  app.delete(
    "/dead-letters/:job_id",
    {
      schema: {
        tags: ["dead letters"],
        summary: "Discard a dead letter",
        description:
          "Deletes the dead-letter entry and returns it. The job itself stays `dead`, its history readable at " +
          "GET /jobs/{id}, until retention deletes it; it can still be retried.",
        params: DeadLetterParams,
        response: { 200: DeadLetterResponse, 404: noEntry, 422: badId },
      },
    },
    async (request, reply) => {
      const entry = await ledger.discardDeadLetter(request.params.job_id);
      return reply.send(toDeadLetterResponse(entry));
    },
  );

  app.post(
    "/dead-letters/discard",
    {
      schema: {
        tags: ["dead letters"],
        summary: "Discard dead letters matching a filter",
        description:
          "Deletes, oldest death first, up to `limit` (default 1000) dead-letter entries matching the filter, in " +
          "one statement; the jobs stay as they are. `more` true: call again. An empty filter is refused (422) " +
          "unless `all` is true.",
        body: DiscardDeadLettersBody,
        response: { 200: DeadLetterBatchResponse, ...bodyErrors },
      },
    },
    async (request, reply) => {
      const { type, died_after, died_before, replayed, all, limit } = request.body;
      const { ids, more } = await ledger.discardDeadLetters(
        { type, diedAfter: toDate(died_after), diedBefore: toDate(died_before), replayed, all },
        { limit, naming: "snake" },
      );
      return reply.send({ job_ids: ids, more });
    },
  );

  app.post(
    "/jobs/:id/retry",
    {
      schema: {
        tags: ["jobs"],
        summary: "Retry a job now",
        description:
          "A pending job waiting for its run time (a retry's backoff, or a `run_at` in the future) becomes due " +
          "now; a dead job is replayed (back to pending, attempt count reset, history kept, its dead-letter " +
          "entry marked replayed). Either way a worker of its type is woken. A pending job already due is " +
          "returned as it is. A job that is claimed, running, done or cancelled cannot be retried (409).",
        params: JobIdParams,
        response: {
          200: JobResponse,
          404: problemResponse("No job has this id."),
          409: problemResponse("The job is claimed, running, done or cancelled."),
          422: badId,
        },
      },
    },
    async (request, reply) => {
      const { job } = await ledger.retryJob(request.params.id);
      return reply.send(toJobResponse(job));
    },
  );
};
