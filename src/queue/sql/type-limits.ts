import { type Statement, statement } from "./statement.js";

/**
 * Statements of the global limits per type (schema version 13; issue 13, item 3): a limited type is
 * a row of `type_limits`; the ordinary claim skips it and the limited claim (claim-limited.ts)
 * claims it within its limits. Each change NOTIFYs `limits:<type>` on the workers' channel at
 * commit, so that workers of the type re-read which of their types are limited at once (their
 * heartbeat re-reads it anyway).
 */

/** The columns of a limit as the library reads it. */
const LIMIT_COLUMNS = `type, max_running, rate_per_second, burst, updated_at`;

/**
 * Sets the limits of type `$1` (creating or replacing the row): `$2` max_running int, `$3`
 * rate_per_second float8, `$4` burst int, each NULL for none. A new bucket starts full (`burst`,
 * else ceil(rate)); a replaced one keeps its tokens, at most the new burst (full when it had no
 * rate before). Returns the row.
 */
export const setTypeLimit = (schema: string): Statement =>
  statement(
    schema,
    "set_type_limit",
    `WITH saved AS (
       INSERT INTO $S.type_limits AS l (type, max_running, rate_per_second, burst, tokens)
       VALUES ($1, $2::int, $3::float8, $4::int, coalesce($4::int, ceil($3::float8), 0))
       ON CONFLICT (type) DO UPDATE
         SET max_running = excluded.max_running, rate_per_second = excluded.rate_per_second,
             burst = excluded.burst, updated_at = now(),
             tokens = CASE WHEN l.rate_per_second IS NULL THEN excluded.tokens ELSE least(l.tokens, excluded.tokens) END,
             refilled_at = CASE WHEN l.rate_per_second IS NULL THEN now() ELSE l.refilled_at END
       RETURNING l.type, l.max_running, l.rate_per_second, l.burst, l.updated_at
     )
     SELECT ${LIMIT_COLUMNS}, $S.wake_workers('limits:' || type) AS woke FROM saved`,
  );

/** Removes the limits of type `$1` (idempotent). Returns the row removed (none if it had none). */
export const removeTypeLimit = (schema: string): Statement =>
  statement(
    schema,
    "remove_type_limit",
    `WITH gone AS (DELETE FROM $S.type_limits WHERE type = $1 RETURNING ${LIMIT_COLUMNS})
     SELECT ${LIMIT_COLUMNS}, $S.wake_workers('limits:' || type) AS woke FROM gone`,
  );

/** Every limited type's limits, in type order, at most `$1`. */
export const typeLimits = (schema: string): Statement =>
  statement(schema, "type_limits", `SELECT ${LIMIT_COLUMNS} FROM $S.type_limits ORDER BY type LIMIT $1`);
