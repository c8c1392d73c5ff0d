import { type Statement, statement } from "../../src/queue/sql/statement.js";

/**
 * Statements of the benchmarks (`npm run bench:math`, `npm run bench:load`). They run against a
 * throw-away schema that the benchmark creates and drops, never against a production schema.
 */

/**
 * Many jobs at once, with every timestamp as microseconds since the Unix epoch (float8: exact,
 * since 1.7e15 < 2^53), because node-postgres turns timestamptz into a millisecond `Date`.
 * $1 ids bigint[]. Rows in id order; ids that do not exist are simply absent.
 */
export const jobTimings = (schema: string): Statement =>
  statement(
    schema,
    "bench_job_timings",
    `SELECT id, type, status, payload, result, error,
            (extract(epoch FROM created_at) * 1000000)::float8 AS created_us,
            (extract(epoch FROM claimed_at) * 1000000)::float8 AS claimed_us,
            (extract(epoch FROM started_at) * 1000000)::float8 AS started_us,
            (extract(epoch FROM completed_at) * 1000000)::float8 AS completed_us
     FROM $S.jobs WHERE id = ANY($1::bigint[]) ORDER BY id`,
  );

/**
 * Makes pending jobs due now and wakes every worker: a `run_at` change alone sends no NOTIFY (the
 * update trigger only notifies on a transition into pending), so the statement notifies `*` itself.
 * The notification is delivered at commit, after the rows are due.
 * $1 ids bigint[], $2 notify channel. Returns `{due}`: how many jobs were made due.
 */
export const makeJobsDue = (schema: string): Statement =>
  statement(
    schema,
    "bench_make_jobs_due",
    `WITH due AS (
       UPDATE $S.jobs SET run_at = now()
       WHERE id = ANY($1::bigint[]) AND status = 'pending' AND run_at > now()
       RETURNING id
     )
     SELECT (SELECT count(*) FROM due)::int AS due, pg_notify($2::text, '*')`,
  );

/** The server's version string (`SHOW server_version`), for the benchmark's machine record. */
export const serverVersion: Statement = {
  name: "taskqueue_bench_server_version",
  text: `SELECT current_setting('server_version') AS version`,
};

/** Drops a benchmark schema and everything in it (simple-protocol text, not a prepared statement). */
export const dropSchema = (schema: string): string =>
  statement(schema, "bench_drop_schema", `DROP SCHEMA IF EXISTS $S CASCADE`).text;

/**
 * Finished history for `npm run bench:retention`: $1 `done` jobs of type `history`, created $2
 * seconds ago and completed $3 seconds ago, inserted in one statement (the insert trigger counts
 * them, as any insert). Returns `{inserted}`.
 */
export const insertHistory = (schema: string): Statement =>
  statement(
    schema,
    "bench_insert_history",
    `WITH inserted AS (
       INSERT INTO $S.jobs (type, status, created_at, run_at, started_at, completed_at, result)
       SELECT 'history', 'done', now() - make_interval(secs => $2::float8), now() - make_interval(secs => $2::float8),
              now() - make_interval(secs => $3::float8), now() - make_interval(secs => $3::float8), 'null'::jsonb
       FROM generate_series(1, $1::int)
       RETURNING 1
     )
     SELECT count(*)::int AS inserted FROM inserted`,
  );

/** How many `history` jobs are left (`npm run bench:retention`): one row, `left`. */
export const historyLeft = (schema: string): Statement =>
  statement(schema, "bench_history_left", `SELECT count(*)::int AS left FROM $S.jobs WHERE type = 'history'`);

/**
 * Whether some session holds the pruning lock of this schema (lock class $1, objid −2: a pruning
 * pass runs). One row, `pruning`.
 */
export const pruningLockHeld = (schema: string): Statement =>
  statement(
    schema,
    "bench_pruning_lock_held",
    `SELECT EXISTS (SELECT FROM pg_locks WHERE locktype = 'advisory' AND objsubid = 2 AND granted
       AND classid = ($1::int4::bigint & 4294967295)::oid AND objid = 4294967294) AS pruning`,
  );
