/**
 * Statements of waiting for a job (schema version 12, migration 0012) and of a handler's own
 * writes while it runs: progress, and the claim check that follows a transactional completion.
 */
import { JOB_COLUMNS, quoteIdentifier, quoteLiteral, type Statement, statement } from "./statement.js";

/** Longest channel name PostgreSQL accepts (NAMEDATALEN - 1), bytes. */
const MAX_CHANNEL_BYTES = 63;

/**
 * The channel on which watched jobs of `schema` announce a final state or new progress (payload:
 * the job id), as {@link notifyWatched} sends it: `taskqueue_wait_<schema>`, cut to 63
 * bytes (schema names are lower-case ASCII identifiers, one byte a character).
 */
export const waitChannel = (schema: string): string => `taskqueue_wait_${schema}`.slice(0, MAX_CHANNEL_BYTES);

/**
 * A one-row subquery (column `notified`, the number sent) that notifies the waiters of the watched
 * rows of `source` (a CTE returning `id` and `watched`) for which `where` holds: one NOTIFY per
 * watched job, payload its id, on {@link waitChannel}. Written into the statements that end a job
 * or change its progress (schema version 12): for rows nobody watches it only filters the rows the
 * statement already holds, which is what keeps waiting free for the drain (a row trigger fetched
 * every updated row's old version, measured at about 9 % of a drain's CPU). An aggregate, so it
 * is evaluated where it is joined even if no column of it is read.
 */
export const notifyWatched = (schema: string, source: string, where = "true"): string =>
  `(SELECT count(pg_notify(${quoteLiteral(waitChannel(schema))}, id::text)) AS notified
       FROM ${source} WHERE watched AND ${where})`;

/** LISTEN on the wait channel of `schema` (plain text; the channel is quoted). */
export const listenForWaits = (schema: string): string => `LISTEN ${quoteIdentifier(waitChannel(schema))}`;

/**
 * Marks job $1 watched (its later final state and progress notify) and returns it as it is after
 * any write in flight on its row: an UPDATE waits for a concurrent writer and then reads the row it
 * committed, where a plain SELECT would answer from before it. No row: no such job.
 */
export const watchJob = (schema: string): Statement =>
  statement(schema, "watch_job", `UPDATE $S.jobs SET watched = true WHERE id = $1 RETURNING ${JOB_COLUMNS}`);

/**
 * A handler's progress, fenced like every write after a claim: only while job $1 is held (claimed
 * or running) by worker $3 for attempt $2. $4 the value as JSON text. Returns the id if written.
 */
export const writeProgress = (schema: string): Statement =>
  statement(
    schema,
    "write_progress",
    `WITH written AS (
       UPDATE $S.jobs SET progress = $4::jsonb
       WHERE id = $1 AND attempt = $2 AND worker_id = $3 AND status IN ('claimed', 'running')
       RETURNING id, watched
     )
     SELECT id FROM written CROSS JOIN ${notifyWatched(schema, "written")} AS n`,
  );

/**
 * Where a claim stands after its handler completed it in its own transaction: job $1's status and
 * whether attempt $2 of worker $3 still holds it (the transaction did not commit), or no row.
 */
export const claimStanding = (schema: string): Statement =>
  statement(
    schema,
    "claim_standing",
    `SELECT status, (attempt = $2 AND worker_id = $3 AND status IN ('claimed', 'running')) AS held,
            (attempt = $2 AND worker_id = $3 AND status = 'done') AS completed
     FROM $S.jobs WHERE id = $1`,
  );
