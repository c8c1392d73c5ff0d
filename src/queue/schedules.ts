/**
 * Cron schedules (issue 13, item 2; DESIGN.md §3, "Schedules"): named, persisted in `schedules`
 * (schema version 9), each enqueueing one job per tick of its cron expression in its time zone.
 *
 * There is no leader. Every worker process runs a scheduler (worker/scheduler.ts) that calls
 * {@link runSchedulePass}: one read of every schedule with the database's `now()`, the due ticks
 * computed here (cron.ts), and per schedule with due ticks one statement that moves its
 * `last_tick` from the value read (compare and set) and inserts the ticks' jobs, each keyed
 * `schedule:<name>@<tick>` under the unique key index. However many processes pass at once, a tick
 * has one job: the loser of the compare and set inserts nothing, and the key refuses a duplicate
 * even if the row's place were lost. A process killed mid-pass leaves either its whole statement
 * or nothing.
 */
import type pg from "pg";
import { type FieldProblem, JobValidationError, ScheduleNotFoundError } from "../errors.js";
import { checkAllowedTypes } from "./checks.js";
import { cronProblem, dueTicks, isTimeZone, nextTick } from "./cron.js";
import * as sql from "./sql/schedules.js";
import type { JsonValue } from "./types.js";
import { type FieldNaming, validateJobSpec } from "./validate.js";

/** What a schedule enqueues and how it fires (the third argument of `schedule`). */
export interface ScheduleOptions {
  /** Job type of every tick's job, 1–200 characters. */
  type: string;
  /** Payload of every tick's job. Default `{}`. */
  payload?: JsonValue;
  /** IANA time zone the expression is read in (e.g. `Europe/Berlin`). Default `UTC`. */
  timezone?: string;
  /**
   * After a downtime, enqueue the ticks missed (at most `scheduleCatchUpLimit`, the latest).
   * Default false: a tick found more than `scheduleMisfireSeconds` late is skipped.
   */
  catchUp?: boolean;
  /** 1–10 of every tick's job. Default 5. */
  priority?: number;
  /** 0–10 of every tick's job. Default 3. */
  maxRetries?: number;
}

/** A schedule as stored. Times from the database clock. */
export interface Schedule {
  name: string;
  cron: string;
  timezone: string;
  type: string;
  payload: JsonValue;
  priority: number;
  maxRetries: number;
  catchUp: boolean;
  createdAt: Date;
  updatedAt: Date;
  /** The latest tick dealt with (enqueued, or skipped as a misfire); the creation time at first. */
  lastTick: Date;
  /** The next tick after now (and after `lastTick`), or null if the expression has none left. */
  nextTickAt: Date | null;
}

/** A row of the schedule statements: a schedule without `nextTickAt`, with the database's now. */
type ScheduleRow = Omit<Schedule, "nextTickAt"> & { dbNow: Date };

/** Names: letters, digits and `_ . : -`, 1–200 characters (they appear in URLs and job keys). */
const NAME = /^[A-Za-z0-9_.:-]{1,200}$/;

const OPTION_FIELDS = new Set(["type", "payload", "timezone", "catchUp", "priority", "maxRetries"]);

/** @throws {JobValidationError} naming `name` unless it is a schedule name. */
export function checkScheduleName(name: unknown): asserts name is string {
  if (typeof name !== "string" || !NAME.test(name))
    throw new JobValidationError([
      { field: "name", message: "must be 1–200 characters: letters, digits, _ . : -" },
    ]);
}

/** A schedule checked and normalised, ready for the upsert. */
interface NormalizedSchedule {
  values: [string, string, string, string, string, string, boolean];
}

/**
 * Checks a schedule's name, expression, zone and job before anything is written.
 * @throws {JobValidationError} listing every bad field (spelt per `naming`).
 */
function validateSchedule(
  name: string,
  cron: string,
  options: ScheduleOptions,
  naming: FieldNaming,
  allowedTypes: ReadonlySet<string> | null,
): NormalizedSchedule {
  checkScheduleName(name);
  const problems: FieldProblem[] = [];
  const catchUpField = naming === "snake" ? "catch_up" : "catchUp";
  if (typeof options !== "object" || options === null)
    throw new JobValidationError([{ field: "type", message: "is required (the job type of every tick)" }]);
  for (const key of Object.keys(options))
    if (!OPTION_FIELDS.has(key)) problems.push({ field: key, message: "is not a schedule field" });
  const { timezone = "UTC", catchUp = false } = options;
  if (typeof timezone !== "string" || !isTimeZone(timezone))
    problems.push({
      field: "timezone",
      message: "must be an IANA time zone name, e.g. Europe/Berlin or UTC",
    });
  if (typeof catchUp !== "boolean") problems.push({ field: catchUpField, message: "must be a boolean" });
  if (typeof cron !== "string" || cron.length < 1 || cron.length > 200)
    problems.push({ field: "cron", message: "must be a cron expression of 1–200 characters" });
  else if (typeof timezone === "string" && isTimeZone(timezone)) {
    const problem = cronProblem(cron, timezone);
    if (problem) problems.push({ field: "cron", message: problem });
  }
  let job: ReturnType<typeof validateJobSpec> | null = null;
  try {
    const { type, payload, priority, maxRetries } = options;
    job = validateJobSpec({ type, payload, priority, maxRetries }, "", naming);
    if (allowedTypes) checkAllowedTypes([job], allowedTypes, false);
  } catch (error) {
    if (!(error instanceof JobValidationError)) throw error;
    problems.push(...error.problems);
  }
  if (problems.length > 0 || !job) throw new JobValidationError(problems);
  const settings = JSON.stringify({ priority: job.priority, max_retries: job.maxRetries });
  return { values: [name, cron, timezone, job.type, job.payloadJson, settings, catchUp] };
}

/** The schedule of a row, with its next tick after now. */
function toSchedule(row: ScheduleRow): Schedule {
  const { dbNow, ...schedule } = row;
  const after = dbNow.getTime() > row.lastTick.getTime() ? dbNow : row.lastTick;
  let next: Date | null = null;
  try {
    next = nextTick(row.cron, row.timezone, after);
  } catch {
    // A zone this Node.js does not know (written by another version): no next tick to show.
  }
  return { ...schedule, nextTickAt: next };
}

/** Creates or replaces a schedule; `created` is false when it replaced one. */
export async function upsertSchedule(
  pool: pg.Pool,
  schema: string,
  args: { name: string; cron: string; options: ScheduleOptions; naming?: FieldNaming },
  allowedTypes: ReadonlySet<string> | null,
): Promise<{ schedule: Schedule; created: boolean }> {
  const { values } = validateSchedule(
    args.name,
    args.cron,
    args.options,
    args.naming ?? "camel",
    allowedTypes,
  );
  const { rows } = await pool.query<ScheduleRow & { created: boolean } & pg.QueryResultRow>({
    ...sql.upsertSchedule(schema),
    values,
  });
  const { created, ...row } = rows[0] as ScheduleRow & { created: boolean };
  return { schedule: toSchedule(row), created };
}

/** The schedule named `name`, or null. @throws {JobValidationError} for a malformed name. */
export async function readSchedule(pool: pg.Pool, schema: string, name: string): Promise<Schedule | null> {
  checkScheduleName(name);
  const { rows } = await pool.query<ScheduleRow & pg.QueryResultRow>({
    ...sql.getSchedule(schema),
    values: [name],
  });
  return rows[0] ? toSchedule(rows[0]) : null;
}

/** Schedules by name, `limit` (1–1000) from `offset`. */
export async function readSchedules(
  pool: pg.Pool,
  schema: string,
  page: { limit?: number; offset?: number } = {},
): Promise<Schedule[]> {
  const { limit = 1000, offset = 0 } = page;
  const problems: FieldProblem[] = [];
  if (!Number.isInteger(limit) || limit < 1 || limit > 1000)
    problems.push({ field: "limit", message: "must be an integer from 1 to 1000" });
  if (!Number.isInteger(offset) || offset < 0)
    problems.push({ field: "offset", message: "must be an integer ≥ 0" });
  if (problems.length > 0) throw new JobValidationError(problems);
  const { rows } = await pool.query<ScheduleRow & pg.QueryResultRow>({
    ...sql.listSchedules(schema),
    values: [limit, offset],
  });
  return rows.map(toSchedule);
}

/** Deletes a schedule, returning it; its jobs stay. @throws {ScheduleNotFoundError} */
export async function deleteSchedule(pool: pg.Pool, schema: string, name: string): Promise<Schedule> {
  checkScheduleName(name);
  const { rows } = await pool.query<ScheduleRow & pg.QueryResultRow>({
    ...sql.deleteSchedule(schema),
    values: [name],
  });
  if (!rows[0]) throw new ScheduleNotFoundError(name);
  return toSchedule(rows[0]);
}

/** Bounds of a scheduler pass (config `scheduleCatchUpLimit`, `scheduleMisfireSeconds`). */
export interface SchedulePassPolicy {
  /** Most ticks one schedule enqueues in one pass (and so after a downtime). */
  scheduleCatchUpLimit: number;
  /** Without catch-up, a tick found later than this is skipped. */
  scheduleMisfireSeconds: number;
}

/** What one pass did. */
export interface SchedulePassReport {
  /** Ids of the jobs this pass enqueued, over every schedule. */
  enqueuedJobIds: number[];
  /** Due ticks left out (misfires, or past the catch-up limit), by schedule name. */
  skippedTicks: Record<string, number>;
  /** Schedules this pass could not evaluate (e.g. a zone unknown here), with the reason. */
  failed: Record<string, string>;
  /**
   * Milliseconds from the end of the pass until the earliest next tick of any schedule on the
   * database's clock (measured at the read, less the time the pass took), or null if none.
   */
  msUntilNextTick: number | null;
}

/**
 * One scheduler pass: enqueues every schedule's due ticks (see the file's comment). Safe to run
 * from any number of processes at once. @throws the first database error.
 */
export async function runSchedulePass(
  pool: pg.Pool,
  schema: string,
  policy: SchedulePassPolicy,
): Promise<SchedulePassReport> {
  const startedMs = Date.now();
  const { rows } = await pool.query<
    {
      name: string;
      cron: string;
      timezone: string;
      catchUp: boolean;
      lastTick: Date;
      dbNow: Date;
    } & pg.QueryResultRow
  >(sql.schedulesForPass(schema));
  const report: SchedulePassReport = {
    enqueuedJobIds: [],
    skippedTicks: {},
    failed: {},
    msUntilNextTick: null,
  };
  let earliest = Number.POSITIVE_INFINITY;
  const dbNowMs = rows[0]?.dbNow.getTime() ?? 0;
  for (const row of rows) {
    let due: ReturnType<typeof dueTicks>;
    let next: Date | null;
    try {
      due = dueTicks(row.cron, row.timezone, {
        lastTick: row.lastTick,
        now: row.dbNow,
        catchUp: row.catchUp,
        limit: policy.scheduleCatchUpLimit,
        misfireSeconds: policy.scheduleMisfireSeconds,
      });
      next = nextTick(row.cron, row.timezone, row.dbNow);
    } catch (error) {
      report.failed[row.name] = (error as Error).message;
      continue;
    }
    if (next) earliest = Math.min(earliest, next.getTime());
    if (due.skipped > 0) report.skippedTicks[row.name] = due.skipped;
    if (!due.latest) continue;
    const inserted = await pool.query<{ id: number } & pg.QueryResultRow>({
      ...sql.enqueueScheduleTicks(schema),
      values: [row.name, row.lastTick, row.cron, row.timezone, due.latest, due.ticks],
    });
    for (const { id } of inserted.rows) report.enqueuedJobIds.push(id);
  }
  if (Number.isFinite(earliest))
    report.msUntilNextTick = Math.max(0, earliest - dbNowMs - (Date.now() - startedMs));
  return report;
}
