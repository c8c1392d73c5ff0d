/**
 * Global limits per job type (issue 13, item 3; DESIGN.md §4 "Type limits"): at most `maxRunning`
 * of a type's jobs held (claimed or running) across every worker on every host, and at most
 * `ratePerSecond` claims of it per second (a token bucket of `burst` tokens), enforced by the claim
 * itself (sql/claim-limited.ts), with no coordinator. Each function is one statement on the
 * shared pool (sql/type-limits.ts); the {@link Ledger} exposes them.
 */
import type { Queryable } from "../db/pool.js";
import { type FieldProblem, JobValidationError, TaskQueueError } from "../errors.js";
import { checkTypeName } from "./job-types.js";
import { removeTypeLimit, setTypeLimit, typeLimits } from "./sql/type-limits.js";
import type { FieldNaming } from "./validate.js";

/** The limits asked for: at least one of `maxRunning` and `ratePerSecond`. */
export interface TypeLimitOptions {
  /** Most jobs of the type held at once (claimed or running) over all workers: integer 1–1,000,000. */
  maxRunning?: number;
  /** Most claims of the type per second over all workers: a number > 0, at most 1,000,000. */
  ratePerSecond?: number;
  /**
   * Most claims at once after an idle spell (the token bucket's size): integer 1–1,000,000; only
   * with `ratePerSecond`. Default: ceil(ratePerSecond), one second's claims.
   */
  burst?: number;
}

/** A type's limits as stored (null: that limit is not set). */
export interface TypeLimit {
  type: string;
  maxRunning: number | null;
  ratePerSecond: number | null;
  /** The bucket's size as set (null: the default, ceil(ratePerSecond)). */
  burst: number | null;
  /** When the limits were last set (database clock). */
  updatedAt: Date;
}

/** Bounds of the limit values. */
export const TYPE_LIMIT_BOUNDS = {
  maxRunning: 1_000_000,
  ratePerSecond: 1_000_000,
  burst: 1_000_000,
} as const;

/** Most limits {@link readTypeLimits} returns. */
export const TYPE_LIMITS_MAX = 1000;

interface LimitRow {
  type: string;
  max_running: number | null;
  rate_per_second: number | null;
  burst: number | null;
  updated_at: Date;
}

const toLimit = (r: LimitRow): TypeLimit => ({
  type: r.type,
  maxRunning: r.max_running,
  ratePerSecond: r.rate_per_second,
  burst: r.burst,
  updatedAt: r.updated_at,
});

/**
 * The problems of `limit`, each naming its field (spelt per `naming`): integers within bounds, a
 * finite positive rate, a burst only with a rate, and at least one of maxRunning and ratePerSecond.
 */
export function typeLimitProblems(limit: TypeLimitOptions, naming: FieldNaming = "camel"): FieldProblem[] {
  const name = (camel: keyof TypeLimitOptions, snake: string) => (naming === "snake" ? snake : camel);
  const problems: FieldProblem[] = [];
  const integer = (value: unknown, field: string, max: number) => {
    if (
      value !== undefined &&
      !(Number.isInteger(value) && (value as number) >= 1 && (value as number) <= max)
    )
      problems.push({ field, message: `must be an integer from 1 to ${max.toLocaleString("en")}` });
  };
  integer(limit.maxRunning, name("maxRunning", "max_running"), TYPE_LIMIT_BOUNDS.maxRunning);
  integer(limit.burst, name("burst", "burst"), TYPE_LIMIT_BOUNDS.burst);
  const rate = limit.ratePerSecond;
  const rateField = name("ratePerSecond", "rate_per_second");
  if (
    rate !== undefined &&
    !(typeof rate === "number" && rate > 0 && rate <= TYPE_LIMIT_BOUNDS.ratePerSecond)
  )
    problems.push({
      field: rateField,
      message: `must be a number above 0, at most ${TYPE_LIMIT_BOUNDS.ratePerSecond.toLocaleString("en")}`,
    });
  if (limit.burst !== undefined && rate === undefined)
    problems.push({ field: name("burst", "burst"), message: `needs ${rateField}` });
  if (limit.maxRunning === undefined && rate === undefined)
    problems.push({
      field: name("maxRunning", "max_running"),
      message: `set ${name("maxRunning", "max_running")}, ${rateField}, or both`,
    });
  return problems;
}

/**
 * Sets (creates or replaces) the limits of `type`: from their next claim, workers on every host
 * hold at most `maxRunning` of its jobs and claim at most `ratePerSecond` per second (bursts of at
 * most `burst`). A limit left out is removed. Jobs held beyond a new `maxRunning` finish. Workers
 * of the type are told at once (NOTIFY) and re-read it at each heartbeat anyway.
 * @throws {JobValidationError} naming each bad field (per `naming`), or `type` for a bad type name.
 */
export async function setJobTypeLimit(
  db: Queryable,
  schema: string,
  type: string,
  limit: TypeLimitOptions,
  naming: FieldNaming = "camel",
): Promise<TypeLimit> {
  checkTypeName(type);
  const problems = typeLimitProblems(limit, naming);
  if (problems.length > 0) throw new JobValidationError(problems);
  const { rows } = await db.query<LimitRow>({
    ...setTypeLimit(schema),
    values: [type, limit.maxRunning ?? null, limit.ratePerSecond ?? null, limit.burst ?? null],
  });
  const row = rows[0];
  if (!row) throw new TaskQueueError("limit_failed", "the limit statement returned no row");
  return toLimit(row);
}

/**
 * Removes the limits of `type` (idempotent): its jobs are claimed by the ordinary claim again, and
 * its workers are told at once. Returns the limits removed, or null if it had none.
 * @throws {JobValidationError} for a bad type name.
 */
export async function removeJobTypeLimit(
  db: Queryable,
  schema: string,
  type: string,
): Promise<TypeLimit | null> {
  checkTypeName(type);
  const { rows } = await db.query<LimitRow>({ ...removeTypeLimit(schema), values: [type] });
  return rows[0] ? toLimit(rows[0]) : null;
}

/** Every limited type's limits, in type order, at most {@link TYPE_LIMITS_MAX}. */
export async function readTypeLimits(db: Queryable, schema: string): Promise<TypeLimit[]> {
  const { rows } = await db.query<LimitRow>({ ...typeLimits(schema), values: [TYPE_LIMITS_MAX] });
  return rows.map(toLimit);
}
