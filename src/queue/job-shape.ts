/**
 * The one definition of a job's shape and of every limit on it (issue 9). Everything that names a
 * job's fields or checks a limit is derived from the tables here:
 * - the select lists of the ledger (`JOB_COLUMNS`, `CLAIMED_COLUMNS`, `DEAD_LETTER_COLUMNS` in
 *   sql/columns.ts), which alias each column to its {@link Job} field, so rows are jobs as read;
 * - a new job as stored ({@link newJob}, used by insert.ts);
 * - the library's validation and its messages (validate.ts, ledger.ts);
 * - the API's TypeBox schemas, `toJobResponse` and the names of constraint violations (src/api).
 *
 * The migrations (src/db/migrations, immutable history) keep their own literals;
 * test/queue/job-shape.test.ts reads the migrated table's columns, defaults and CHECK constraints
 * and compares them with these tables, so the two cannot drift apart.
 */
import type { ClaimedJob, DeadLetterJob, Job, JobSpec } from "./types.js";

/** Every limit on a job and on the requests that carry jobs. */
export const LIMITS = {
  /** `priority`: 1–10, 10 most urgent; default 5 (CHECK `priority_in_range`). */
  priority: { min: 1, max: 10, default: 5 },
  /** `maxRetries`: 0–10, at most `maxRetries + 1` executions; default 3 (CHECK `max_retries_in_range`). */
  maxRetries: { min: 0, max: 10, default: 3 },
  /** `type`: 1–200 characters, UTF-16 code units as JavaScript and PostgreSQL count them (CHECK `type_length`). */
  typeLength: { min: 1, max: 200 },
  /** `idempotencyKey`: 1–255 characters, counted like `type` (CHECK `idempotency_key_length`, schema version 6). */
  idempotencyKeyLength: { min: 1, max: 255 },
  /** `timeoutSeconds`: 1–604800 (a week), whole seconds; default none (CHECK `timeout_seconds_in_range`, schema version 11). */
  timeoutSeconds: { min: 1, max: 604_800 },
  /** `limit` of a job list: 1–1000, default 50. */
  listLimit: { min: 1, max: 1000, default: 50 },
  /** Most jobs one batch enqueue takes (one statement, all or nothing). */
  batchJobs: 10_000,
  /** Largest payload (and handler result), bytes of UTF-8 JSON text: 1 MiB. */
  payloadBytes: 1024 * 1024,
  /** Deepest nesting of arrays and objects in a payload or result. */
  jsonDepth: 1000,
  /** Payloads and results larger than this (bytes of JSON text) are left out of job lists: 64 KiB. */
  listValueBytes: 64 * 1024,
  /** Largest progress value a handler reports (`job.progress`), bytes of UTF-8 JSON text: 8 KiB. */
  progressBytes: 8 * 1024,
  /** Longest wait of GET /jobs/{id}?wait=, seconds. */
  waitSeconds: 30,
  /** Most field problems one error (and one 422 answer) lists: enough for every field of a large bad batch. */
  fieldProblems: 1000,
} as const;

/** A field of a stored job: every {@link Job} field but the list-only omission flags. */
export type JobField = Exclude<keyof Job, "payloadOmitted" | "resultOmitted">;

/** How one job field is stored, named and sent. */
export interface JobFieldDefinition {
  /** Column of the `jobs` table. */
  readonly column: string;
  /** Name in the library (camelCase, a key of {@link Job}). */
  readonly field: JobField;
  /** Name on the wire (the HTTP API's snake_case). */
  readonly wire: string;
  /** A timestamptz column: a `Date` in the library, an ISO-8601 string (UTC) on the wire. */
  readonly timestamp: boolean;
  /** May be NULL (null in the library and on the wire). */
  readonly nullable: boolean;
  /**
   * What a new job holds before anything happened to it, for fields that neither the spec nor the
   * database's insert decides (absent for those that do).
   */
  readonly initial?: null | "pending" | 0 | "[]";
}

/** The fields of a job, in the order of the `jobs` table. */
export const JOB_FIELDS = [
  { column: "id", field: "id", wire: "id", timestamp: false, nullable: false },
  { column: "type", field: "type", wire: "type", timestamp: false, nullable: false },
  { column: "payload", field: "payload", wire: "payload", timestamp: false, nullable: false },
  {
    column: "status",
    field: "status",
    wire: "status",
    timestamp: false,
    nullable: false,
    initial: "pending",
  },
  { column: "priority", field: "priority", wire: "priority", timestamp: false, nullable: false },
  { column: "attempt", field: "attempt", wire: "attempt", timestamp: false, nullable: false, initial: 0 },
  { column: "max_retries", field: "maxRetries", wire: "max_retries", timestamp: false, nullable: false },
  { column: "run_at", field: "runAt", wire: "run_at", timestamp: true, nullable: false },
  {
    column: "claimed_at",
    field: "claimedAt",
    wire: "claimed_at",
    timestamp: true,
    nullable: true,
    initial: null,
  },
  {
    column: "started_at",
    field: "startedAt",
    wire: "started_at",
    timestamp: true,
    nullable: true,
    initial: null,
  },
  {
    column: "heartbeat_at",
    field: "heartbeatAt",
    wire: "heartbeat_at",
    timestamp: true,
    nullable: true,
    initial: null,
  },
  {
    column: "completed_at",
    field: "completedAt",
    wire: "completed_at",
    timestamp: true,
    nullable: true,
    initial: null,
  },
  { column: "result", field: "result", wire: "result", timestamp: false, nullable: true, initial: null },
  { column: "error", field: "error", wire: "error", timestamp: false, nullable: true, initial: null },
  { column: "errors", field: "errors", wire: "errors", timestamp: false, nullable: false, initial: "[]" },
  {
    column: "worker_id",
    field: "workerId",
    wire: "worker_id",
    timestamp: false,
    nullable: true,
    initial: null,
  },
  { column: "created_at", field: "createdAt", wire: "created_at", timestamp: true, nullable: false },
  {
    column: "idempotency_key",
    field: "idempotencyKey",
    wire: "idempotency_key",
    timestamp: false,
    nullable: true,
  },
  {
    column: "timeout_seconds",
    field: "timeoutSeconds",
    wire: "timeout_seconds",
    timestamp: false,
    nullable: true,
  },
  {
    column: "progress",
    field: "progress",
    wire: "progress",
    timestamp: false,
    nullable: true,
    initial: null,
  },
] as const satisfies readonly JobFieldDefinition[];

/**
 * Columns of `jobs` that are no field of a {@link Job}: the ledger's own bookkeeping, never read
 * into a job nor sent. `run_alone` (schema version 5): the job was reclaimed from a lost worker
 * process and runs alone (DESIGN.md §6). `idempotency_fingerprint` (schema version 6): a hash of
 * the body enqueued under the job's idempotency key (idempotency.ts). `watched` (schema version
 * 12): someone waits for the job, so its changes notify (waits.ts).
 */
export const INTERNAL_JOB_COLUMNS = ["run_alone", "idempotency_fingerprint", "watched"] as const;

type JobFieldRow = (typeof JOB_FIELDS)[number];

/** Compile-time proof that JOB_FIELDS names every stored field of {@link Job}, each once. */
type MissingJobFields = Exclude<JobField, JobFieldRow["field"]>;
const jobFieldsComplete: [MissingJobFields] extends [never] ? true : MissingJobFields = true;
void jobFieldsComplete;

/** Wire name of job field `F`, as the table says. */
export type WireName<F extends JobField> = Extract<JobFieldRow, { field: F }>["wire"];

/** Job fields that are timestamps, and those of them that may be null. */
export type TimestampField = Extract<JobFieldRow, { timestamp: true }>["field"];
export type NullableTimestampField = Extract<JobFieldRow, { timestamp: true; nullable: true }>["field"];

/** Wire name of a job field. */
export function wireName<F extends JobField>(field: F): WireName<F> {
  return (JOB_FIELDS.find((f) => f.field === field) as JobFieldRow).wire as WireName<F>;
}

/** The list-only omission flags of {@link Job}, with their wire names and the value they flag. */
export const OMISSION_FLAGS = [
  { field: "payloadOmitted", wire: "payload_omitted", of: "payload" },
  { field: "resultOmitted", wire: "result_omitted", of: "result" },
] as const satisfies readonly { field: keyof Job; wire: string; of: JobField }[];

/** The fields of a job a claim hands to a worker (see {@link ClaimedJob}). */
export const CLAIMED_FIELDS = [
  "id",
  "type",
  "payload",
  "priority",
  "attempt",
  "maxRetries",
  "timeoutSeconds",
] as const satisfies readonly (keyof ClaimedJob)[];

type MissingClaimedFields = Exclude<keyof ClaimedJob, (typeof CLAIMED_FIELDS)[number]>;
const claimedFieldsComplete: [MissingClaimedFields] extends [never] ? true : MissingClaimedFields = true;
void claimedFieldsComplete;

/** Fields of a job spec (what an enqueue sends), each a {@link Job} field with its wire name. */
export const JOB_SPEC_FIELDS = [
  "type",
  "payload",
  "priority",
  "maxRetries",
  "runAt",
  "idempotencyKey",
  "timeoutSeconds",
] as const satisfies readonly (keyof JobSpec & JobField)[];

type MissingSpecFields = Exclude<keyof JobSpec, (typeof JOB_SPEC_FIELDS)[number]>;
const specFieldsComplete: [MissingSpecFields] extends [never] ? true : MissingSpecFields = true;
void specFieldsComplete;

/** A stored field of a dead-letter entry: every {@link DeadLetterJob} field but the list-only flag. */
export type DeadLetterField = Exclude<keyof DeadLetterJob, "payloadOmitted">;

/** How one dead-letter field is stored and named. */
export interface DeadLetterFieldDefinition {
  /** Column of the `dead_letter_jobs` table. */
  readonly column: string;
  /** Name in the library (a key of {@link DeadLetterJob}). */
  readonly field: DeadLetterField;
}

/** The fields of a dead-letter entry, in the order of the `dead_letter_jobs` table. */
export const DEAD_LETTER_FIELDS = [
  { column: "job_id", field: "jobId" },
  { column: "type", field: "type" },
  { column: "payload", field: "payload" },
  { column: "priority", field: "priority" },
  { column: "max_retries", field: "maxRetries" },
  { column: "error", field: "error" },
  { column: "attempts", field: "attempts" },
  { column: "errors", field: "errors" },
  { column: "worker_id", field: "workerId" },
  { column: "created_at", field: "createdAt" },
  { column: "died_at", field: "diedAt" },
  { column: "replayed_at", field: "replayedAt" },
  { column: "replays", field: "replays" },
] as const satisfies readonly DeadLetterFieldDefinition[];

type MissingDeadLetterFields = Exclude<DeadLetterField, (typeof DEAD_LETTER_FIELDS)[number]["field"]>;
const deadLetterFieldsComplete: [MissingDeadLetterFields] extends [never] ? true : MissingDeadLetterFields =
  true;
void deadLetterFieldsComplete;

/**
 * CHECK constraints of the `jobs` table that bound a job field, by constraint name: the field
 * they bound and the limit they enforce (src/db/migrations/0001_init.sql), so that a violation
 * can name the field and the test can compare the live constraint with the limit.
 */
export const JOB_CONSTRAINTS = {
  type_length: { field: "type", limit: LIMITS.typeLength },
  priority_in_range: { field: "priority", limit: LIMITS.priority },
  max_retries_in_range: { field: "maxRetries", limit: LIMITS.maxRetries },
  idempotency_key_length: { field: "idempotencyKey", limit: LIMITS.idempotencyKeyLength },
  timeout_seconds_in_range: { field: "timeoutSeconds", limit: LIMITS.timeoutSeconds },
} as const satisfies Record<string, { field: JobField; limit: { min: number; max: number } }>;

/** Message of an integer field out of its range, e.g. `must be an integer from 1 to 10`. */
export function integerRangeMessage(limit: { readonly min: number; readonly max: number }): string {
  return `must be an integer from ${limit.min} to ${limit.max}`;
}

/** Message of a string field out of its length range, e.g. `must be a string of 1 to 200 characters`. */
export function lengthRangeMessage(limit: { readonly min: number; readonly max: number }): string {
  return `must be a string of ${limit.min} to ${limit.max} characters`;
}

/** The fields a new job's spec and its insert decide; every other field starts as `initial` says. */
type DecidedField = Exclude<JobField, Extract<JobFieldRow, { initial: unknown }>["field"]>;

/**
 * A new job as stored: `decided` (the spec's fields and the database's id and times), every other
 * field as JOB_FIELDS's `initial` says a new job holds it (pending, no attempt, no times, an empty
 * history). One object literal, because it runs for every job of a batch (spreading a template
 * took 70–160 ms for 10,000 jobs, the literal 0.1 ms); the `Job` return type makes a missing field
 * fail to compile, and test/queue/job-shape.test.ts checks the values against `initial`.
 */
export function newJob(decided: Pick<Job, DecidedField>): Job {
  return {
    id: decided.id,
    type: decided.type,
    payload: decided.payload,
    status: "pending",
    priority: decided.priority,
    attempt: 0,
    maxRetries: decided.maxRetries,
    runAt: decided.runAt,
    claimedAt: null,
    startedAt: null,
    heartbeatAt: null,
    completedAt: null,
    result: null,
    error: null,
    errors: [],
    workerId: null,
    createdAt: decided.createdAt,
    idempotencyKey: decided.idempotencyKey,
    timeoutSeconds: decided.timeoutSeconds,
    progress: null,
  };
}
