/**
 * TypeBox schemas of the HTTP API (DESIGN.md §8). The same objects validate requests (see
 * validation.ts) and produce the OpenAPI document served at /docs, so the two cannot drift apart.
 * Field names, limits and defaults come from the job-shape table (src/queue/job-shape.ts); a job's
 * wire shape and {@link toJobResponse}, the one place that maps the library's camelCase Job to it,
 * are in job-response.ts. Importing this module registers nothing in TypeBox's registries (see
 * kinds.ts).
 */
import { type Static, Type } from "@sinclair/typebox";
import { integerRangeMessage, LIMITS, wireName } from "../queue/job-shape.js";
import { JobResponse, JobStatusSchema } from "./job-response.js";
import { OffsetDateTime, StringEnum as StringEnumOf } from "./kinds.js";

export {
  DeadLetterBatchResponse,
  DeadLetterListResponse,
  DeadLetterResponse,
  ReplayResponse,
  toDeadLetterResponse,
} from "./dead-letter-response.js";
export { AttemptErrorSchema, JobResponse, JobStatusSchema, toJobResponse } from "./job-response.js";
export { StringEnum } from "./kinds.js";
export { MetricsResponse } from "./metrics-response.js";

/** Largest job id the API accepts: ids are JavaScript numbers, exact up to 2^53 − 1. */
export const MAX_JOB_ID = Number.MAX_SAFE_INTEGER;

/** Largest `limit` of GET /jobs (`LIMITS.listLimit`). */
export const MAX_LIST_LIMIT = LIMITS.listLimit.max;

/** `limit` of GET /jobs when none is given (`LIMITS.listLimit`). */
export const DEFAULT_LIST_LIMIT = LIMITS.listLimit.default;

/**
 * Text PostgreSQL stores as given: no NUL character, no unpaired UTF-16 surrogate (which would be
 * silently replaced on the way to the database). Escapes, not raw characters, so the OpenAPI
 * document shows it readably.
 */
export const STORABLE_TEXT_PATTERN = "^(?:[^\\u0000\\ud800-\\udfff]|[\\ud800-\\udbff][\\udc00-\\udfff])*$";

/** Handler name: 1–200 characters of storable text. */
const JobType = Type.String({
  minLength: LIMITS.typeLength.min,
  maxLength: LIMITS.typeLength.max,
  pattern: STORABLE_TEXT_PATTERN,
  description: `Handler name, ${LIMITS.typeLength.min}–${LIMITS.typeLength.max} characters (no NUL character, no unpaired surrogate).`,
  examples: ["echo"],
});

/**
 * Body of POST /jobs and one element of POST /jobs/batch.
 * Unknown fields are rejected (422 naming the field) rather than ignored, so that a typo such as
 * `max_retry` cannot silently fall back to a default.
 */
export const JobSpecBody = Type.Object(
  {
    [wireName("type")]: JobType,
    [wireName("payload")]: Type.Optional(
      Type.Unknown({
        description:
          "Any JSON value handed to the handler; default `{}`. Strings and keys must not contain NUL " +
          "characters (`\\u0000`), which PostgreSQL cannot store.",
        examples: [{ n: 97 }],
      }),
    ),
    [wireName("priority")]: Type.Optional(
      Type.Integer({
        minimum: LIMITS.priority.min,
        maximum: LIMITS.priority.max,
        default: LIMITS.priority.default,
        description: `${LIMITS.priority.min}–${LIMITS.priority.max}, ${LIMITS.priority.max} most urgent. Default ${LIMITS.priority.default}.`,
      }),
    ),
    [wireName("maxRetries")]: Type.Optional(
      Type.Integer({
        minimum: LIMITS.maxRetries.min,
        maximum: LIMITS.maxRetries.max,
        default: LIMITS.maxRetries.default,
        description: `${LIMITS.maxRetries.min}–${LIMITS.maxRetries.max}: the job runs at most \`${wireName("maxRetries")} + 1\` times. Default ${LIMITS.maxRetries.default}.`,
      }),
    ),
    [wireName("runAt")]: Type.Optional(
      OffsetDateTime({
        description:
          "Not before this instant: ISO-8601 date-time WITH a UTC offset (`Z` or `±hh:mm`); a time without " +
          "offset is ambiguous and rejected with 422. A time in the past means now. Default now.",
      }),
    ),
    [wireName("idempotencyKey")]: Type.Optional(
      Type.String({
        minLength: LIMITS.idempotencyKeyLength.min,
        maxLength: LIMITS.idempotencyKeyLength.max,
        pattern: STORABLE_TEXT_PATTERN,
        description:
          `${LIMITS.idempotencyKeyLength.min}–${LIMITS.idempotencyKeyLength.max} characters. While a job enqueued with this key exists (any state, ` +
          "for IDEMPOTENCY_WINDOW_SECONDS after it was created), enqueueing it again creates nothing and answers that job " +
          "(200 instead of 201); the same key with a different body is refused with 409.",
        examples: ["order-1234-confirmation"],
      }),
    ),
    [wireName("timeoutSeconds")]: Type.Optional(
      Type.Integer({
        minimum: LIMITS.timeoutSeconds.min,
        maximum: LIMITS.timeoutSeconds.max,
        description:
          `${LIMITS.timeoutSeconds.min}–${LIMITS.timeoutSeconds.max} whole seconds: how long one attempt may run. At the deadline ` +
          "the handler's AbortSignal fires (reason `JobTimeoutError`) and the attempt fails, then is retried as any failure. " +
          "Default: the worker's JOB_TIMEOUT_SECONDS (unset: no bound).",
        examples: [30],
      }),
    ),
  },
  {
    additionalProperties: false,
    description: "A job to enqueue. Unknown fields are rejected with 422 naming each of them (not ignored).",
  },
);
export type JobSpecBody = Static<typeof JobSpecBody>;

/** Body of POST /jobs/batch. */
export const BatchBody = Type.Object(
  {
    jobs: Type.Array(JobSpecBody, {
      minItems: 1,
      maxItems: LIMITS.batchJobs,
      description: `1–${LIMITS.batchJobs} jobs, inserted in one statement: all or none.`,
    }),
  },
  {
    additionalProperties: false,
    description: "Jobs to enqueue together. Unknown fields are rejected with 422.",
  },
);
export type BatchBody = Static<typeof BatchBody>;

/** Path parameters of /jobs/{id}. */
export const JobIdParams = Type.Object(
  {
    id: Type.Integer({
      minimum: 1,
      maximum: MAX_JOB_ID,
      description: "Job id, a positive integer up to 2^53 − 1.",
    }),
  },
  { additionalProperties: false },
);
export type JobIdParams = Static<typeof JobIdParams>;

/** Query string of GET /jobs/{id}: an optional long-poll. Unknown parameters are rejected with 422. */
export const GetJobQuerystring = Type.Object(
  {
    wait: Type.Optional(
      Type.Integer({
        minimum: 0,
        maximum: LIMITS.waitSeconds,
        description:
          `Long-poll: wait up to this many seconds (0–${LIMITS.waitSeconds}) for the job to reach a final state ` +
          "(done, dead, cancelled), then answer with the job as it is. Default 0: answer at once.",
      }),
    ),
  },
  { additionalProperties: false, description: "Unknown parameters are rejected with 422." },
);
export type GetJobQuerystring = Static<typeof GetJobQuerystring>;

/** Query string of GET /jobs. Unknown parameters are rejected with 422 (a misspelt filter is not ignored). */
export const ListJobsQuerystring = Type.Object(
  {
    status: Type.Optional(JobStatusSchema),
    type: Type.Optional(JobType),
    created_after: Type.Optional(
      OffsetDateTime({ description: "Only jobs created strictly after this instant (UTC offset required)." }),
    ),
    limit: Type.Optional(
      Type.Integer({
        minimum: LIMITS.listLimit.min,
        maximum: MAX_LIST_LIMIT,
        default: DEFAULT_LIST_LIMIT,
        description: `Page size, ${LIMITS.listLimit.min}–${MAX_LIST_LIMIT}. Default ${DEFAULT_LIST_LIMIT}.`,
      }),
    ),
    offset: Type.Optional(
      Type.Integer({ minimum: 0, maximum: MAX_JOB_ID, default: 0, description: "Jobs to skip. Default 0." }),
    ),
  },
  { additionalProperties: false, description: "Filters; unknown parameters are rejected with 422." },
);
export type ListJobsQuerystring = Static<typeof ListJobsQuerystring>;

/** Response of POST /jobs/batch. */
export const BatchResponse = Type.Object({
  jobs: Type.Array(JobResponse, { description: "The jobs created, in the order given." }),
});

/** Response of POST /jobs/batch with `Prefer: return=minimal`. */
export const BatchIdsResponse = Type.Object({
  ids: Type.Array(Type.Integer(), { description: "The new jobs' ids, in the order given." }),
});

/** Request headers of POST /jobs/batch that change what it answers. */
export const BatchHeaders = Type.Object({
  prefer: Type.Optional(
    Type.String({
      description:
        '`return=minimal` (RFC 7240): answer with the new jobs\' ids only, `{"ids": [...]}`, instead of the ' +
        "jobs; the answer then says `Preference-Applied: return=minimal`.",
    }),
  ),
});

/**
 * True if a `Prefer` header (RFC 7240) asks for `return=minimal`: comma-separated preferences,
 * each `name[=value]` with optional parameters after `;`, names case-insensitive, values possibly
 * quoted.
 */
export function prefersMinimalReturn(prefer: string | undefined): boolean {
  if (!prefer) return false;
  return prefer.split(",").some((preference) => {
    const [name, value] = (preference.split(";")[0] ?? "").split("=").map((part) => part.trim());
    return name?.toLowerCase() === "return" && value?.replace(/^"(.*)"$/, "$1") === "minimal";
  });
}

/** Response of GET /jobs. */
export const JobListResponse = Type.Object({
  jobs: Type.Array(JobResponse, { description: "Newest first." }),
  limit: Type.Integer(),
  offset: Type.Integer(),
});

/** Response of GET /health. */
export const HealthResponse = Type.Object({ status: Type.Literal("ok") });

/** Response of GET /ready. */
export const ReadyResponse = Type.Object({ status: Type.Literal("ready") });

/** One bad field of a request. `field` is a path such as `priority`, `payload/a` or `jobs/3/type`. */
export const FieldProblemSchema = Type.Object({
  field: Type.String({ examples: ["priority"] }),
  message: Type.String({ examples: [integerRangeMessage(LIMITS.priority)] }),
});

/** RFC 9457 problem details, sent as `application/problem+json` with every 4xx and 5xx. */
export const ProblemSchema = Type.Object(
  {
    type: Type.String({ description: "URI identifying the kind of problem." }),
    title: Type.String({ description: "Short summary of the kind of problem." }),
    status: Type.Integer({ description: "The HTTP status code." }),
    detail: Type.Optional(Type.String({ description: "What went wrong with this request." })),
    instance: Type.Optional(Type.String({ description: "The request path." })),
    errors: Type.Optional(Type.Array(FieldProblemSchema, { description: "Each bad field (422)." })),
  },
  { description: "RFC 9457 problem details." },
);
export type Problem = Static<typeof ProblemSchema>;

/** A response entry of a route schema: problem+json with this description. */
export function problemResponse(description: string) {
  return {
    description,
    content: { "application/problem+json": { schema: ProblemSchema } },
  };
}

/** Path parameters of /dead-letters/{job_id}. */
export const DeadLetterParams = Type.Object(
  {
    job_id: Type.Integer({
      minimum: 1,
      maximum: MAX_JOB_ID,
      description: "The dead job's id, a positive integer up to 2^53 − 1.",
    }),
  },
  { additionalProperties: false },
);
export type DeadLetterParams = Static<typeof DeadLetterParams>;

const diedAfter = OffsetDateTime({
  description: "Only jobs that died strictly after this instant (UTC offset required).",
});
const diedBefore = OffsetDateTime({
  description: "Only jobs that died strictly before this instant (UTC offset required).",
});

/** Query string of GET /dead-letters. Unknown parameters are rejected with 422. */
export const ListDeadLettersQuerystring = Type.Object(
  {
    type: Type.Optional(JobType),
    died_after: Type.Optional(diedAfter),
    died_before: Type.Optional(diedBefore),
    replayed: Type.Optional(
      StringEnumOf(["true", "false"], {
        description:
          "`true`: only entries whose job was replayed since it died; `false`: only those whose job waits dead.",
      }),
    ),
    limit: ListJobsQuerystring.properties.limit,
    offset: ListJobsQuerystring.properties.offset,
  },
  { additionalProperties: false, description: "Filters; unknown parameters are rejected with 422." },
);
export type ListDeadLettersQuerystring = Static<typeof ListDeadLettersQuerystring>;

/** The filter fields of a bulk replay or discard, and its batch size. */
const bulkFields = {
  type: Type.Optional(JobType),
  died_after: Type.Optional(diedAfter),
  died_before: Type.Optional(diedBefore),
  all: Type.Optional(
    Type.Boolean({ description: "`true` to take every entry: required when no other filter is given." }),
  ),
  limit: Type.Optional(
    Type.Integer({
      minimum: 1,
      maximum: LIMITS.batchJobs,
      default: 1000,
      description: `Most entries this call takes (one statement), 1–${LIMITS.batchJobs}. Default 1000; call again while \`more\` is true.`,
    }),
  ),
};

/** Body of POST /dead-letters/replay. */
export const ReplayDeadLettersBody = Type.Object(bulkFields, {
  additionalProperties: false,
  description:
    "Which dead letters to replay: at least one of `type`, `died_after`, `died_before`, or `all: true`. Unknown fields are rejected with 422.",
});
export type ReplayDeadLettersBody = Static<typeof ReplayDeadLettersBody>;

/** Body of POST /dead-letters/discard. */
export const DiscardDeadLettersBody = Type.Object(
  {
    ...bulkFields,
    replayed: Type.Optional(
      Type.Boolean({
        description: "`true`: only entries already replayed; `false`: only those still waiting.",
      }),
    ),
  },
  {
    additionalProperties: false,
    description:
      "Which dead letters to discard: at least one of `type`, `died_after`, `died_before`, `replayed`, or `all: true`.",
  },
);
export type DiscardDeadLettersBody = Static<typeof DiscardDeadLettersBody>;
