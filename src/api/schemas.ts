/**
 * TypeBox schemas of the HTTP API (DESIGN.md §8). The same objects validate requests (see
 * validation.ts) and produce the OpenAPI document served at /docs, so the two cannot drift apart.
 * Wire field names are snake_case; {@link toJobResponse} is the one place that maps the library's
 * camelCase {@link Job} to them.
 */
import {
  Kind,
  type SchemaOptions,
  type Static,
  type TSchema,
  type TUnsafe,
  Type,
  TypeRegistry,
} from "@sinclair/typebox";
import { MAX_BATCH_JOBS } from "../queue/ledger.js";
import { JOB_STATUSES, type Job } from "../queue/types.js";

/** Largest job id the API accepts: ids are JavaScript numbers, exact up to 2^53 − 1. */
export const MAX_JOB_ID = Number.MAX_SAFE_INTEGER;

/** Largest `limit` of GET /jobs. */
export const MAX_LIST_LIMIT = 1000;

/** `limit` of GET /jobs when none is given. */
export const DEFAULT_LIST_LIMIT = 50;

/** `schema` or null, for response fields that may be empty. */
function nullable<T extends TSchema>(schema: T) {
  return Type.Union([schema, Type.Null()]);
}

/**
 * An ISO-8601 date-time that carries a UTC offset (`Z`, `+02:00` or `+0200`): RFC 3339, plus what
 * the ledger also accepts (seconds optional, a space instead of `T`). The `date-time` format is
 * checked by isOffsetDateTime in validation.ts: a time without offset is refused (ambiguous), so
 * is an impossible date such as 2030-02-30.
 */
export const OffsetDateTime = Type.String({
  format: "date-time",
  description:
    "ISO-8601 date-time with a UTC offset, e.g. `2030-01-01T12:00:00Z` or `2030-01-01T14:00:00+02:00`.",
  examples: ["2030-01-01T12:00:00Z"],
});

/** A timestamp in a response: ISO-8601, UTC. */
const Timestamp = Type.String({ format: "date-time", description: "ISO-8601, UTC." });

TypeRegistry.Set<{ enum: readonly string[] }>(
  "StringEnum",
  (schema, value) => typeof value === "string" && schema.enum.includes(value),
);

/**
 * A string that is one of `values`, as a plain JSON-schema `enum` (Swagger UI shows a drop-down;
 * a union of literals would show `anyOf`). Checked by the TypeBox kind registered above.
 */
export function StringEnum<T extends readonly string[]>(
  values: T,
  options: SchemaOptions = {},
): TUnsafe<T[number]> {
  return Type.Unsafe<T[number]>({ ...options, [Kind]: "StringEnum", type: "string", enum: [...values] });
}

/** The six lifecycle states (DESIGN.md §4). */
export const JobStatusSchema = StringEnum(JOB_STATUSES, {
  description: `Lifecycle state: one of ${JOB_STATUSES.join(", ")}.`,
});

/**
 * Text PostgreSQL stores as given: no NUL character, no unpaired UTF-16 surrogate (which would be
 * silently replaced on the way to the database). Escapes, not raw characters, so the OpenAPI
 * document shows it readably.
 */
export const STORABLE_TEXT_PATTERN = "^(?:[^\\u0000\\ud800-\\udfff]|[\\ud800-\\udbff][\\udc00-\\udfff])*$";

/** Handler name: 1–200 characters of storable text. */
const JobType = Type.String({
  minLength: 1,
  maxLength: 200,
  pattern: STORABLE_TEXT_PATTERN,
  description: "Handler name, 1–200 characters (no NUL character, no unpaired surrogate).",
  examples: ["echo"],
});

/**
 * Body of POST /jobs and one element of POST /jobs/batch.
 * Unknown fields are rejected (422 naming the field) rather than ignored, so that a typo such as
 * `max_retry` cannot silently fall back to a default.
 */
export const JobSpecBody = Type.Object(
  {
    type: JobType,
    payload: Type.Optional(
      Type.Unknown({
        description:
          "Any JSON value handed to the handler; default `{}`. Strings and keys must not contain NUL " +
          "characters (`\\u0000`), which PostgreSQL cannot store.",
        examples: [{ n: 97 }],
      }),
    ),
    priority: Type.Optional(
      Type.Integer({ minimum: 1, maximum: 10, default: 5, description: "1–10, 10 most urgent. Default 5." }),
    ),
    max_retries: Type.Optional(
      Type.Integer({
        minimum: 0,
        maximum: 10,
        default: 3,
        description: "0–10: the job runs at most `max_retries + 1` times. Default 3.",
      }),
    ),
    run_at: Type.Optional(
      Type.String({
        ...OffsetDateTime,
        description:
          "Not before this instant: ISO-8601 date-time WITH a UTC offset (`Z` or `±hh:mm`); a time without " +
          "offset is ambiguous and rejected with 422. A time in the past means now. Default now.",
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
      maxItems: MAX_BATCH_JOBS,
      description: `1–${MAX_BATCH_JOBS} jobs, inserted in one statement: all or none.`,
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

/** Query string of GET /jobs. Unknown parameters are rejected with 422 (a misspelt filter is not ignored). */
export const ListJobsQuerystring = Type.Object(
  {
    status: Type.Optional(JobStatusSchema),
    type: Type.Optional(JobType),
    created_after: Type.Optional(
      Type.String({
        ...OffsetDateTime,
        description: "Only jobs created strictly after this instant (UTC offset required).",
      }),
    ),
    limit: Type.Optional(
      Type.Integer({
        minimum: 1,
        maximum: MAX_LIST_LIMIT,
        default: DEFAULT_LIST_LIMIT,
        description: `Page size, 1–${MAX_LIST_LIMIT}. Default ${DEFAULT_LIST_LIMIT}.`,
      }),
    ),
    offset: Type.Optional(
      Type.Integer({ minimum: 0, maximum: MAX_JOB_ID, default: 0, description: "Jobs to skip. Default 0." }),
    ),
  },
  { additionalProperties: false, description: "Filters; unknown parameters are rejected with 422." },
);
export type ListJobsQuerystring = Static<typeof ListJobsQuerystring>;

/** One failed attempt in a job's history. */
export const AttemptErrorSchema = Type.Object(
  {
    attempt: Type.Optional(Type.Integer({ description: "0-based number of the attempt that failed." })),
    error: Type.Optional(Type.String()),
    worker_id: Type.Optional(nullable(Type.String())),
    failed_at: Type.Optional(Type.String({ description: "When it failed (database clock)." })),
  },
  { additionalProperties: true },
);

/** A job as the API returns it. Timestamps are ISO-8601 strings in UTC; empty ones are null. */
export const JobResponse = Type.Object(
  {
    id: Type.Integer({ minimum: 1 }),
    type: Type.String(),
    payload: Type.Unknown({ description: "The payload as enqueued." }),
    status: JobStatusSchema,
    priority: Type.Integer({ minimum: 1, maximum: 10 }),
    attempt: Type.Integer({ minimum: 0, description: "Failed attempts so far." }),
    max_retries: Type.Integer({ minimum: 0, maximum: 10 }),
    run_at: Timestamp,
    claimed_at: nullable(Timestamp),
    started_at: nullable(Timestamp),
    heartbeat_at: nullable(Timestamp),
    completed_at: nullable(Timestamp),
    result: Type.Unknown({ description: "The handler's result once done, else null." }),
    error: nullable(Type.String({ description: "Error of the latest failed attempt." })),
    errors: Type.Array(AttemptErrorSchema, { description: "Every failed attempt, oldest first." }),
    worker_id: nullable(Type.String({ description: "Worker that holds or last held the job." })),
    created_at: Timestamp,
    payload_omitted: Type.Optional(
      Type.Boolean({
        description: "In lists only: the payload is over 64 KiB and left out (null); GET /jobs/{id} has it.",
      }),
    ),
    result_omitted: Type.Optional(
      Type.Boolean({
        description: "In lists only: the result is over 64 KiB and left out (null); GET /jobs/{id} has it.",
      }),
    ),
  },
  { description: "A job." },
);
export type JobResponse = Static<typeof JobResponse>;

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

/** Response of GET /metrics. Rates cover the trailing `window_seconds`. */
export const MetricsResponse = Type.Object({
  queue_depth: Type.Object(
    Object.fromEntries(JOB_STATUSES.map((status) => [status, Type.Integer({ minimum: 0 })])) as Record<
      (typeof JOB_STATUSES)[number],
      ReturnType<typeof Type.Integer>
    >,
    { description: "Jobs per status, every worker process on every host." },
  ),
  active_workers: Type.Integer({
    description: "Worker lock sessions (one per worker process, or per lane) with a fresh heartbeat.",
  }),
  jobs_per_second: Type.Number({ description: "Jobs completed per second over the trailing window." }),
  error_rate: Type.Number({
    description: "Failed attempts / finished attempts over the window (0 when none).",
  }),
  average_execution_seconds: nullable(
    Type.Number({ description: "Mean execution time of jobs completed in the window; null when none." }),
  ),
  execution_seconds: Type.Object(
    {
      p50: nullable(Type.Number()),
      p90: nullable(Type.Number()),
      p99: nullable(Type.Number()),
      samples: Type.Integer({ description: "Jobs completed in the window, which the quantiles describe." }),
    },
    {
      description:
        "Execution-time quantiles of the jobs completed in the trailing window, seconds, estimated from a " +
        "histogram with eight bins per doubling (within 9 %; exact when a bin's jobs took the same time).",
    },
  ),
  dead_letter_count: Type.Integer({ description: "Rows in the dead-letter table." }),
  fenced_writes: Type.Integer({
    description: "Late writes refused by the claim fence, summed over live workers.",
  }),
  window_seconds: Type.Number({ description: "Length of the trailing window of the rates." }),
});
export type MetricsResponse = Static<typeof MetricsResponse>;

/** Response of GET /health. */
export const HealthResponse = Type.Object({ status: Type.Literal("ok") });

/** Response of GET /ready. */
export const ReadyResponse = Type.Object({ status: Type.Literal("ready") });

/** One bad field of a request. `field` is a path such as `priority`, `payload/a` or `jobs/3/type`. */
export const FieldProblemSchema = Type.Object({
  field: Type.String({ examples: ["priority"] }),
  message: Type.String({ examples: ["must be an integer from 1 to 10"] }),
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

/**
 * A timestamp as an ISO-8601 string (or null). The jobs of one batch share their creation time (and
 * usually their run time), so the last conversion is kept and reused: `toISOString` was most of
 * the cost of answering POST /jobs/batch.
 */
let lastTimestamp = { ms: Number.NaN, iso: "" };
function isoTimestamp(date: Date | null): string | null {
  if (date === null) return null;
  const ms = date.getTime();
  if (ms !== lastTimestamp.ms) lastTimestamp = { ms, iso: date.toISOString() };
  return lastTimestamp.iso;
}

/** Maps a job to its wire shape (snake_case, ISO-8601 timestamps). The only such mapping. */
export function toJobResponse(job: Job): JobResponse {
  const response: JobResponse = {
    id: job.id,
    type: job.type,
    payload: job.payload,
    status: job.status,
    priority: job.priority,
    attempt: job.attempt,
    max_retries: job.maxRetries,
    run_at: isoTimestamp(job.runAt) as string,
    claimed_at: isoTimestamp(job.claimedAt),
    started_at: isoTimestamp(job.startedAt),
    heartbeat_at: isoTimestamp(job.heartbeatAt),
    completed_at: isoTimestamp(job.completedAt),
    result: job.result,
    error: job.error,
    errors: job.errors,
    worker_id: job.workerId,
    created_at: isoTimestamp(job.createdAt) as string,
  };
  if (job.payloadOmitted) response.payload_omitted = true;
  if (job.resultOmitted) response.result_omitted = true;
  return response;
}
