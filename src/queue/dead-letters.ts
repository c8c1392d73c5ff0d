/**
 * The operator's actions on dead jobs (issue 14, items 1 and 2; DESIGN.md §4, "Replay"): dead
 * letters listed, replayed (one, or those matching a filter, a bounded batch per statement) and
 * discarded, and a job retried now. The {@link Ledger} exposes each; the SQL is in
 * sql/dead-letters.ts.
 */
import type pg from "pg";
import type { Queryable } from "../db/pool.js";
import {
  DeadLetterNotFoundError,
  type FieldProblem,
  JobNotFoundError,
  JobStateConflictError,
  JobValidationError,
} from "../errors.js";
import { integerRangeMessage, LIMITS, lengthRangeMessage } from "./job-shape.js";
import {
  discardDeadLetter,
  discardDeadLetters,
  listDeadLetterPage,
  replayDeadLetter,
  replayDeadLetters,
  retryJob,
} from "./sql/dead-letters.js";
import type { DeadLetterJob, Job } from "./types.js";
import type { FieldNaming } from "./validate.js";

/**
 * Which dead letters a bulk replay or discard takes. At least one of `type`, `diedAfter`,
 * `diedBefore` (and for a discard `replayed`), or `all: true`: an empty filter is refused, so that
 * a forgotten argument never replays or discards the whole table.
 */
export interface DeadLetterFilter {
  /** Only entries of this job type. */
  type?: string;
  /** Only jobs that died strictly after this instant. */
  diedAfter?: Date;
  /** Only jobs that died strictly before this instant. */
  diedBefore?: Date;
  /** Take every entry (when no other filter is given). */
  all?: boolean;
}

/** Filters of a dead-letter list, or of a bulk discard: a {@link DeadLetterFilter} and `replayed`. */
export interface DeadLetterQuery extends DeadLetterFilter {
  /** true: only entries whose job was replayed since it died; false: only those still waiting. */
  replayed?: boolean;
}

/** A page of {@link Ledger.listDeadLetters}: the filters, `limit` (1–1000, default 50) and `offset`. */
export interface ListDeadLettersQuery extends Omit<DeadLetterQuery, "all"> {
  limit?: number;
  offset?: number;
}

/** What one bulk replay or discard did. */
export interface DeadLetterBatch {
  /** The jobs replayed (or whose entries were discarded), ascending. */
  ids: number[];
  /** More entries may match: the batch was full. Call again to go on. */
  more: boolean;
}

/** What a replay of one dead letter did. */
export interface ReplayOutcome {
  /** True if this call sent the job back to pending; false if it was not dead (replayed already). */
  replayed: boolean;
  /** The job as it is now; null if its row is gone (deleted by hand). */
  job: Job | null;
}

/** What a retry did. */
export interface RetryOutcome {
  /** True if this call made the job due (pending and waiting, or dead); false if it was already due. */
  changed: boolean;
  job: Job;
}

/** Default and largest size of one bulk replay or discard (one statement): `LIMITS.batchJobs`. */
export const DEAD_LETTER_BATCH = { default: 1000, max: LIMITS.batchJobs } as const;

type Row<T> = T & pg.QueryResultRow;

function fieldName(naming: FieldNaming, camel: string, snake: string): string {
  return naming === "snake" ? snake : camel;
}

function isDate(value: unknown): value is Date {
  return value instanceof Date && !Number.isNaN(value.getTime());
}

/** Problems of a filter's fields (type, dates, replayed), each named as the caller spells it. */
function filterProblems(filter: DeadLetterQuery, naming: FieldNaming): FieldProblem[] {
  const problems: FieldProblem[] = [];
  const { type, diedAfter, diedBefore, replayed } = filter;
  if (
    type !== undefined &&
    (typeof type !== "string" || type.length < LIMITS.typeLength.min || type.length > LIMITS.typeLength.max)
  )
    problems.push({ field: "type", message: lengthRangeMessage(LIMITS.typeLength) });
  if (diedAfter !== undefined && !isDate(diedAfter))
    problems.push({ field: fieldName(naming, "diedAfter", "died_after"), message: "must be a valid date" });
  if (diedBefore !== undefined && !isDate(diedBefore))
    problems.push({ field: fieldName(naming, "diedBefore", "died_before"), message: "must be a valid date" });
  if (replayed !== undefined && typeof replayed !== "boolean")
    problems.push({ field: "replayed", message: "must be true or false" });
  return problems;
}

/**
 * Checks a bulk action's filter and batch size. `replayedCounts`: whether `replayed` is a filter of
 * this action (discard) or not allowed (replay).
 * @throws {JobValidationError} naming each bad field; an empty filter without `all: true` names `all`.
 */
function checkBulk(
  filter: DeadLetterQuery,
  limit: number,
  naming: FieldNaming,
  replayedCounts: boolean,
): void {
  const problems = filterProblems(filter, naming);
  if (!replayedCounts && filter.replayed !== undefined)
    problems.push({
      field: "replayed",
      message: "is not a filter of a replay (it takes the jobs still dead)",
    });
  const given = [
    filter.type,
    filter.diedAfter,
    filter.diedBefore,
    replayedCounts ? filter.replayed : undefined,
  ];
  if (filter.all !== undefined && typeof filter.all !== "boolean")
    problems.push({ field: "all", message: "must be true or false" });
  else if (filter.all !== true && given.every((value) => value === undefined))
    problems.push({
      field: "all",
      message: `must be true to take every entry; or give a filter (type, ${fieldName(naming, "diedAfter", "died_after")}, ${fieldName(naming, "diedBefore", "died_before")}${replayedCounts ? ", replayed" : ""})`,
    });
  if (!Number.isInteger(limit) || limit < 1 || limit > DEAD_LETTER_BATCH.max)
    problems.push({ field: "limit", message: integerRangeMessage({ min: 1, max: DEAD_LETTER_BATCH.max }) });
  if (problems.length > 0) throw new JobValidationError(problems);
}

const filterValues = (f: DeadLetterFilter) => [f.type ?? null, f.diedAfter ?? null, f.diedBefore ?? null];

/**
 * Dead-letter entries, newest death first; payloads over `LIMITS.listValueBytes` left out
 * (`payloadOmitted`).
 * @throws {JobValidationError} for a bad filter, limit (1–1000) or offset (≥ 0).
 */
export async function listDeadLetters(
  db: Queryable,
  schema: string,
  query: ListDeadLettersQuery,
  naming: FieldNaming = "camel",
): Promise<DeadLetterJob[]> {
  const { limit = LIMITS.listLimit.default, offset = 0 } = query;
  const problems = filterProblems(query, naming);
  if (!Number.isInteger(limit) || limit < LIMITS.listLimit.min || limit > LIMITS.listLimit.max)
    problems.push({ field: "limit", message: integerRangeMessage(LIMITS.listLimit) });
  if (!Number.isInteger(offset) || offset < 0)
    problems.push({ field: "offset", message: "must be an integer ≥ 0" });
  if (problems.length > 0) throw new JobValidationError(problems);
  const { rows } = await db.query<Row<DeadLetterJob>>({
    ...listDeadLetterPage(schema),
    values: [...filterValues(query), query.replayed ?? null, limit, offset, LIMITS.listValueBytes],
  });
  return rows;
}

/**
 * Replays the dead letter of job `jobId`: a dead job goes back to pending, due now, its attempt
 * count reset and its history kept; the entry is marked replayed; a worker of its type is woken.
 * Idempotent: a job that is no longer dead is left alone (`replayed: false`).
 * @throws {DeadLetterNotFoundError} the job has no dead-letter entry.
 */
export async function replayOne(db: Queryable, schema: string, jobId: number): Promise<ReplayOutcome> {
  const { rows } = await db.query<Row<Job & { found: boolean; replayed: boolean | null }>>({
    ...replayDeadLetter(schema),
    values: [jobId],
  });
  const row = rows[0];
  if (!row?.found) throw new DeadLetterNotFoundError(jobId);
  const { found: _, replayed, ...job } = row;
  return { replayed: replayed === true, job: job.id === null ? null : job };
}

/**
 * Replays up to `limit` dead letters matching `filter` whose job is still dead, oldest death first
 * (see {@link replayOne}), in one statement.
 * @throws {JobValidationError} for a bad or empty filter (see {@link DeadLetterFilter}), or a limit outside 1–10,000.
 */
export async function replayBatch(
  db: Queryable,
  schema: string,
  filter: DeadLetterFilter,
  limit: number = DEAD_LETTER_BATCH.default,
  naming: FieldNaming = "camel",
): Promise<DeadLetterBatch> {
  checkBulk(filter, limit, naming, false);
  const { rows } = await db.query<{ ids: number[]; picked: number }>({
    ...replayDeadLetters(schema),
    values: [...filterValues(filter), limit],
  });
  const row = rows[0] ?? { ids: [], picked: 0 };
  return { ids: row.ids, more: row.picked >= limit };
}

/**
 * Deletes the dead-letter entry of job `jobId` and returns it. The job stays as it is (`dead`, its
 * history readable) until retention deletes it; it can still be retried.
 * @throws {DeadLetterNotFoundError} the job has no dead-letter entry.
 */
export async function discardOne(db: Queryable, schema: string, jobId: number): Promise<DeadLetterJob> {
  const { rows } = await db.query<Row<DeadLetterJob>>({ ...discardDeadLetter(schema), values: [jobId] });
  const row = rows[0];
  if (!row) throw new DeadLetterNotFoundError(jobId);
  return row;
}

/**
 * Deletes up to `limit` dead-letter entries matching `filter`, oldest death first, in one
 * statement. The jobs stay as they are.
 * @throws {JobValidationError} for a bad or empty filter, or a limit outside 1–10,000.
 */
export async function discardBatch(
  db: Queryable,
  schema: string,
  filter: DeadLetterQuery,
  limit: number = DEAD_LETTER_BATCH.default,
  naming: FieldNaming = "camel",
): Promise<DeadLetterBatch> {
  checkBulk(filter, limit, naming, true);
  const { rows } = await db.query<{ ids: number[]; picked: number }>({
    ...discardDeadLetters(schema),
    values: [...filterValues(filter), filter.replayed ?? null, limit],
  });
  const row = rows[0] ?? { ids: [], picked: 0 };
  return { ids: row.ids, more: row.picked >= limit };
}

/**
 * Retry now: a pending job waiting for its run time (a backoff or a future `runAt`) becomes due at
 * once; a dead job is replayed (see {@link replayOne}); a worker of its type is woken. A pending job
 * already due is returned as it is (`changed: false`).
 * @throws {JobNotFoundError} no such job.
 * @throws {JobStateConflictError} the job is claimed, running, done or cancelled.
 */
export async function retryNow(db: Queryable, schema: string, id: number): Promise<RetryOutcome> {
  const { rows } = await db.query<Row<Job & { changed: boolean }>>({ ...retryJob(schema), values: [id] });
  const row = rows[0];
  if (!row) throw new JobNotFoundError(id);
  const { changed, ...job } = row;
  if (!changed && job.status !== "pending") throw new JobStateConflictError(id, job.status, "retry");
  return { changed, job };
}
