/**
 * A job's wire shape, derived from the job-shape table (src/queue/job-shape.ts): the response
 * schema {@link JobResponse} (wire names, timestamps as ISO-8601 strings, which may be null) and
 * {@link toJobResponse}, the one mapping from the library's {@link Job} to it.
 */
import { Readable } from "node:stream";
import { type Static, type TNull, type TSchema, type TString, type TUnion, Type } from "@sinclair/typebox";
import type { InsertedJob } from "../queue/insert.js";
import {
  JOB_FIELDS,
  type JobField,
  LIMITS,
  type NullableTimestampField,
  newJob,
  OMISSION_FLAGS,
  type TimestampField,
  type WireName,
} from "../queue/job-shape.js";
import { JOB_STATUSES, type Job } from "../queue/types.js";
import { StringEnum } from "./kinds.js";

/** `schema` or null, for response fields that may be empty. */
export function nullable<T extends TSchema>(schema: T): TUnion<[T, TNull]> {
  return Type.Union([schema, Type.Null()]);
}

/** The six lifecycle states (DESIGN.md §4). */
export const JobStatusSchema = StringEnum(JOB_STATUSES, {
  description: `Lifecycle state: one of ${JOB_STATUSES.join(", ")}.`,
});

/** One failed attempt in a job's history. */
export const AttemptErrorSchema = Type.Object(
  {
    attempt: Type.Optional(Type.Integer({ description: "0-based number of the attempt that failed." })),
    error: Type.Optional(Type.String()),
    worker_id: Type.Optional(nullable(Type.String())),
    failed_at: Type.Optional(Type.String({ description: "When it failed (database clock)." })),
    permanent: Type.Optional(
      Type.Literal(true, { description: "Present when the attempt failed permanently: no retry followed." }),
    ),
  },
  { additionalProperties: true },
);

/** A timestamp in a response: ISO-8601, UTC. */
const Timestamp = (): TString => Type.String({ format: "date-time", description: "ISO-8601, UTC." });

/** Response schemas of the job fields that are not timestamps (those come from the table). */
const VALUE_SCHEMAS = {
  id: Type.Integer({ minimum: 1 }),
  type: Type.String(),
  payload: Type.Unknown({ description: "The payload as enqueued." }),
  status: JobStatusSchema,
  priority: Type.Integer({ minimum: LIMITS.priority.min, maximum: LIMITS.priority.max }),
  attempt: Type.Integer({ minimum: 0, description: "Failed attempts so far." }),
  maxRetries: Type.Integer({ minimum: LIMITS.maxRetries.min, maximum: LIMITS.maxRetries.max }),
  result: Type.Unknown({ description: "The handler's result once done, else null." }),
  error: nullable(Type.String({ description: "Error of the latest failed attempt." })),
  errors: Type.Array(AttemptErrorSchema, { description: "Every failed attempt, oldest first." }),
  workerId: nullable(Type.String({ description: "Worker that holds or last held the job." })),
  idempotencyKey: nullable(
    Type.String({
      description:
        "The idempotency key it was enqueued with, or null (also once its window passed and the key was reused).",
    }),
  ),
  timeoutSeconds: nullable(
    Type.Integer({
      minimum: LIMITS.timeoutSeconds.min,
      maximum: LIMITS.timeoutSeconds.max,
      description: "Bound of one attempt's run time, seconds, as enqueued; null: the worker's default.",
    }),
  ),
  progress: Type.Unknown({
    description: "The latest progress its handler reported (any JSON value, at most 8 KiB), or null.",
  }),
} satisfies Record<Exclude<JobField, TimestampField>, TSchema>;

/** The response properties of a job: each table field under its wire name. */
type JobResponseProperties = {
  [F in JobField as WireName<F>]: F extends TimestampField
    ? F extends NullableTimestampField
      ? TUnion<[TString, TNull]>
      : TString
    : (typeof VALUE_SCHEMAS)[Exclude<F, TimestampField>];
};

const jobResponseProperties = Object.fromEntries(
  JOB_FIELDS.map((f) => {
    if (!f.timestamp) return [f.wire, VALUE_SCHEMAS[f.field as Exclude<JobField, TimestampField>]];
    return [f.wire, f.nullable ? nullable(Timestamp()) : Timestamp()];
  }),
) as JobResponseProperties;

const omissionFlag = (of: string) =>
  Type.Optional(
    Type.Boolean({
      description: `In lists only: the ${of} is over ${LIMITS.listValueBytes / 1024} KiB and left out (null); GET /jobs/{id} has it.`,
    }),
  );

/** A job as the API returns it. Timestamps are ISO-8601 strings in UTC; empty ones are null. */
export const JobResponse = Type.Object(
  {
    ...jobResponseProperties,
    [OMISSION_FLAGS[0].wire]: omissionFlag(OMISSION_FLAGS[0].of),
    [OMISSION_FLAGS[1].wire]: omissionFlag(OMISSION_FLAGS[1].of),
  },
  { description: "A job." },
);
export type JobResponse = Static<typeof JobResponse>;

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

/**
 * Maps a job to its wire shape (snake_case, ISO-8601 timestamps). The only such mapping. Written
 * as one object literal because it runs for every job of a batch answer (a loop over the table's
 * fields took 3.7 ms for 10,000 jobs, the literal 0.2 ms: bench/job-response.ts). It cannot drift
 * from the table: {@link JobResponse}, its type, is derived from JOB_FIELDS, so a field missing
 * here or one the table does not have fails to compile, and test/queue/job-shape.test.ts checks
 * that every wire field holds its table field's value.
 */
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
    idempotency_key: job.idempotencyKey,
    timeout_seconds: job.timeoutSeconds,
    progress: job.progress,
  };
  if (job.payloadOmitted) response.payload_omitted = true;
  if (job.resultOmitted) response.result_omitted = true;
  return response;
}

/** Where a job's payload goes in its answer: `"payload":` then the payload's JSON text. */
const PAYLOAD_KEY = ',"payload":';
const PLACEHOLDER = `${PAYLOAD_KEY}null,`;

/** Bytes of one piece of a streamed answer, about. */
const ANSWER_CHUNK_CHARS = 64 * 1024;

/**
 * The answer of POST /jobs/batch, `{"jobs":[…]}`, as the texts that make it up, in order, and its
 * length in UTF-8 bytes: exactly
 * `JSON.stringify({ jobs: inserted.map((j) => toJobResponse(insertedJob(j.spec, j.row))) })`
 * once joined, but with each payload as the JSON text that was stored (`spec.payloadJson`, from
 * `JSON.stringify`, which a parse and a second stringify give back unchanged), so no payload is
 * parsed back into objects (test/api/large-batch.test.ts checks the bytes against the built jobs).
 */
function answerParts(inserted: readonly InsertedJob[]): { parts: string[]; bytes: number } {
  const parts: string[] = ['{"jobs":['];
  let bytes = '{"jobs":[]}'.length;
  inserted.forEach(({ spec, row, existing }, i) => {
    // A job that held the spec's idempotency key already: answered as it is now.
    if (existing) {
      const whole = `${i === 0 ? "" : ","}${JSON.stringify(toJobResponse(existing))}`;
      parts.push(whole);
      bytes += Buffer.byteLength(whole);
      return;
    }
    // The job's answer without its payload, split where the payload goes: a `"` inside a string
    // value is always escaped, so the first `,"payload":null,` is the key's.
    const text = JSON.stringify(
      toJobResponse(
        newJob({
          id: row.id,
          type: spec.type,
          payload: null,
          priority: spec.priority,
          maxRetries: spec.maxRetries,
          runAt: new Date(row.run_at_ms),
          createdAt: new Date(row.created_at_ms),
          idempotencyKey: spec.idempotencyKey,
          timeoutSeconds: spec.timeoutSeconds,
        }),
      ),
    );
    const at = text.indexOf(PLACEHOLDER) + PAYLOAD_KEY.length;
    const head = i === 0 ? text.slice(0, at) : `,${text.slice(0, at)}`;
    const tail = text.slice(at + "null".length);
    parts.push(head, spec.payloadJson, tail);
    bytes += Buffer.byteLength(head) + Buffer.byteLength(spec.payloadJson) + Buffer.byteLength(tail);
  });
  parts.push("]}");
  return { parts, bytes };
}

/** The answer of POST /jobs/batch as one buffer (see {@link answerParts}). */
export function newJobsAnswer(inserted: readonly InsertedJob[]): Buffer {
  return joinParts(answerParts(inserted));
}

/** Answers longer than this (bytes) are streamed by {@link batchAnswer}. */
const STREAM_MIN_BYTES = 1024 * 1024;

/**
 * The answer of POST /jobs/batch for the route: one buffer ({@link newJobsAnswer}) up to a MiB,
 * else a stream ({@link newJobsAnswerStream}) with its length in bytes for `Content-Length`.
 */
export function batchAnswer(inserted: readonly InsertedJob[]): Buffer | { bytes: number; stream: Readable } {
  const answer = answerParts(inserted);
  return answer.bytes <= STREAM_MIN_BYTES ? joinParts(answer) : streamParts(answer);
}

/** The parts of an answer written into one buffer of their length. */
function joinParts({ parts, bytes }: { parts: string[]; bytes: number }): Buffer {
  const answer = Buffer.allocUnsafe(bytes);
  let offset = 0;
  for (const part of parts) offset += answer.write(part, offset, "utf8");
  return answer;
}

/**
 * The answer of POST /jobs/batch as a stream of pieces of about 64 KiB, and its length in bytes
 * (for `Content-Length`): the bytes of {@link newJobsAnswer}, without holding them all at once.
 * For a 32 MiB batch the whole answer was another 32 MiB held next to the request's other copies.
 */
export function newJobsAnswerStream(inserted: readonly InsertedJob[]): { bytes: number; stream: Readable } {
  return streamParts(answerParts(inserted));
}

/** The parts of an answer as a stream of pieces of about {@link ANSWER_CHUNK_CHARS}. */
function streamParts({ parts, bytes }: { parts: string[]; bytes: number }): {
  bytes: number;
  stream: Readable;
} {
  let next = 0;
  const stream = new Readable({
    read() {
      let piece = "";
      while (next < parts.length && piece.length < ANSWER_CHUNK_CHARS) piece += parts[next++];
      if (piece !== "") this.push(Buffer.from(piece, "utf8"));
      if (next >= parts.length) this.push(null);
    },
  });
  return { bytes, stream };
}
