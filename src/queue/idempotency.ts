/**
 * Idempotency keys (issue 14, item 7; DESIGN.md §3, §8): an enqueue that names a key a job holds
 * creates nothing and answers that job. A job holds its key while it exists, in any state, for
 * `idempotencyWindowSeconds` after it was created (0: for as long as it exists); after the window
 * the next enqueue of the key frees it from the old job and creates a new one.
 *
 * The guarantee is the database's: `jobs_idempotency_key_idx` is a partial unique index, and the
 * insert is `ON CONFLICT … DO UPDATE` (sql/enqueue.ts `enqueueKeyedJobs`), so fifty concurrent
 * enqueues of one key create one job, whichever commits first; there is no read-then-write. An
 * enqueue without a key never comes here: it takes the ordinary insert (and, single, the
 * EnqueueBatcher), which the partial index costs nothing.
 *
 * In one batch, jobs that repeat a key with the same body are folded into one (every position
 * answers the same job); with a different body the batch is refused (JobValidationError naming
 * `jobs/<i>/idempotency_key`). A key held with a different body refuses the whole batch with an
 * {@link IdempotencyConflictError}; nothing is written. Bodies are compared on type, payload (as
 * jsonb: key order and spacing do not matter), priority, max retries and the run time as asked for
 * (none given is not the same as a time given).
 *
 * The pending-jobs caps count a keyed enqueue as one job, whether it creates one or not (until the
 * next count, capacity.ts).
 */
import type pg from "pg";
import type { Queryable } from "../db/pool.js";
import { type FieldProblem, IdempotencyConflictError, JobValidationError } from "../errors.js";
import {
  type InsertedJob,
  type InsertedRow,
  insertedJob,
  insertSliced,
  type TransactionSource,
} from "./insert.js";
import { wireName } from "./job-shape.js";
import { enqueueKeyedJobs, expireIdempotencyKeys } from "./sql/enqueue.js";
import { jsonArrayType, jsonTextArray, numberArray } from "./sql/params.js";
import { getJobs } from "./sql/read.js";
import type { Job } from "./types.js";
import type { FieldNaming, NormalizedJobSpec } from "./validate.js";

/** SQLSTATE raised by `idempotency_conflict` (migration 0006). */
const IDEMPOTENCY_CONFLICT = "TQ409";

/** Default of `idempotencyWindowSeconds`: a day, as Stripe keeps its keys. */
export const IDEMPOTENCY_WINDOW_SECONDS = 86_400;

/** A row of the keyed insert: the database's part, the key, and whether the job is new. */
interface KeyedRow extends InsertedRow {
  idempotency_key: string | null;
  inserted: boolean;
}

/** True if two specs enqueue the same body (what a repeated request sends). */
function sameBody(a: NormalizedJobSpec, b: NormalizedJobSpec): boolean {
  return (
    a.type === b.type &&
    a.payloadJson === b.payloadJson &&
    a.priority === b.priority &&
    a.maxRetries === b.maxRetries &&
    (a.runAt?.getTime() ?? null) === (b.runAt?.getTime() ?? null) &&
    a.timeoutSeconds === b.timeoutSeconds
  );
}

/**
 * Folds the jobs of one call that repeat a key: `unique` holds each key once (and every job
 * without one), `slot[i]` is where job `i` went, `first[i]` whether it is the one inserted.
 * @throws {JobValidationError} naming `jobs/<i>/idempotency_key` for a repeat with another body.
 */
function foldRepeats(
  jobs: readonly NormalizedJobSpec[],
  naming: FieldNaming,
): { unique: NormalizedJobSpec[]; slot: number[]; first: boolean[] } {
  const unique: NormalizedJobSpec[] = [];
  const slot: number[] = [];
  const first: boolean[] = [];
  const byKey = new Map<string, number>();
  const problems: FieldProblem[] = [];
  jobs.forEach((job, i) => {
    const key = job.idempotencyKey;
    const seen = key === null ? undefined : byKey.get(key);
    if (seen === undefined) {
      if (key !== null) byKey.set(key, unique.length);
      slot.push(unique.push(job) - 1);
      first.push(true);
      return;
    }
    if (!sameBody(unique[seen] as NormalizedJobSpec, job)) {
      const at = jobs.indexOf(unique[seen] as NormalizedJobSpec);
      problems.push({
        field: `jobs/${i}/${naming === "snake" ? wireName("idempotencyKey") : "idempotencyKey"}`,
        message: `repeats the idempotency key of jobs/${at} with a different body`,
      });
    }
    slot.push(seen);
    first.push(false);
  });
  if (problems.length > 0) throw new JobValidationError(problems);
  return { unique, slot, first };
}

/** One keyed insert statement of `jobs`; its rows in the order of `jobs`. */
async function insertKeyedStatement(
  db: Queryable,
  schema: string,
  jobs: readonly NormalizedJobSpec[],
  payloadBytes?: Buffer,
): Promise<KeyedRow[]> {
  const payloads = payloadBytes ?? jsonTextArray(jobs.map((j) => j.payloadJson));
  const { rows } = await db.query<KeyedRow & pg.QueryResultRow>({
    ...enqueueKeyedJobs(schema, typeof payloads === "string" ? jsonArrayType(payloads) : "jsonb"),
    values: [
      jobs.map((j) => j.type),
      payloads,
      numberArray(jobs.map((j) => j.priority)),
      numberArray(jobs.map((j) => j.maxRetries)),
      jobs.map((j) => j.runAt),
      jobs.map((j) => j.idempotencyKey),
      jobs.map((j) => j.timeoutSeconds),
    ],
  });
  // Keyed rows are matched by key (an existing job has an older id); new jobs without a key get
  // ids in insertion order, which follows the input order.
  const byKey = new Map<string, KeyedRow>();
  const unkeyed: KeyedRow[] = [];
  for (const row of rows) {
    if (row.idempotency_key === null) unkeyed.push(row);
    else byKey.set(row.idempotency_key, row);
  }
  unkeyed.sort((a, b) => a.id - b.id);
  let next = 0;
  return jobs.map((job) =>
    job.idempotencyKey === null ? (unkeyed[next++] as KeyedRow) : (byKey.get(job.idempotencyKey) as KeyedRow),
  );
}

/**
 * The typed error of a refused keyed insert (SQLSTATE TQ409), naming the field of the first job of
 * `jobs` with that key (`jobs/<i>/…` in a batch), or the error as it was.
 */
function conflictError(
  error: unknown,
  jobs: readonly NormalizedJobSpec[],
  options: { naming: FieldNaming; batch: boolean },
): unknown {
  const { code, detail } = error as { code?: unknown; detail?: unknown };
  if (code !== IDEMPOTENCY_CONFLICT || typeof detail !== "string") return error;
  let parsed: { key: string; job_id: number };
  try {
    parsed = JSON.parse(detail) as { key: string; job_id: number };
  } catch {
    return error;
  }
  const name = options.naming === "snake" ? wireName("idempotencyKey") : "idempotencyKey";
  const at = jobs.findIndex((job) => job.idempotencyKey === parsed.key);
  const field = options.batch ? `jobs/${Math.max(at, 0)}/${name}` : name;
  return new IdempotencyConflictError(parsed.key, Number(parsed.job_id), field);
}

/**
 * Inserts validated jobs of which at least one names an idempotency key, all or nothing (one
 * statement, or slices in one transaction as `insertRows` does), and answers each in the given
 * order: a new job, or (`existing`) the job that held its key, read after the insert.
 * `windowSeconds` > 0: keys held by jobs created longer ago are freed first.
 * @throws {JobValidationError} a key repeated in `jobs` with another body; nothing is written.
 * @throws {IdempotencyConflictError} a key held by a job enqueued with another body; nothing is written.
 */
export async function insertKeyedJobs(
  db: Queryable,
  schema: string,
  jobs: readonly NormalizedJobSpec[],
  options: {
    windowSeconds: number;
    transactions: TransactionSource | null;
    naming: FieldNaming;
    /** Field names are prefixed `jobs/<i>/` (a batch). */
    batch: boolean;
  },
): Promise<InsertedJob[]> {
  const { unique, slot, first } = foldRepeats(jobs, options.naming);
  const keys = unique.flatMap((job) => (job.idempotencyKey === null ? [] : [job.idempotencyKey]));
  if (options.windowSeconds > 0)
    await db.query({ ...expireIdempotencyKeys(schema), values: [keys, options.windowSeconds] });
  let rows: KeyedRow[];
  try {
    rows = await insertSliced(db, unique, options.transactions, (on, slice, payloads) =>
      insertKeyedStatement(on, schema, slice, payloads),
    );
  } catch (error) {
    throw conflictError(error, jobs, options);
  }
  const held = rows.filter((row) => !row.inserted).map((row) => row.id);
  const existing = new Map<number, Job>();
  if (held.length > 0) {
    const read = await db.query<Job & pg.QueryResultRow>({ ...getJobs(schema), values: [numberArray(held)] });
    for (const job of read.rows) existing.set(job.id, job);
  }
  return jobs.map((spec, i) => {
    const at = slot[i] as number;
    const row = rows[at] as KeyedRow;
    const uniqueSpec = unique[at] as NormalizedJobSpec;
    if (!row.inserted) {
      // Deleted since the insert saw it: answered as it was enqueued.
      const job = existing.get(row.id) ?? insertedJob(uniqueSpec, row);
      return { spec, row, existing: job };
    }
    return first[i] ? { spec, row } : { spec, row, existing: insertedJob(uniqueSpec, row) };
  });
}
