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

/**
 * History for `npm run bench:ui`: $1 finished jobs of 20 types (`type_0` … `type_19`), completed
 * over the last $2 seconds, 94 % done, 5 % dead (each with its dead-letter entry), 1 % cancelled,
 * in one statement (the insert trigger counts them). Returns `{inserted}`.
 */
export const insertUiHistory = (schema: string): Statement =>
  statement(
    schema,
    "bench_insert_ui_history",
    `WITH rows AS (
       SELECT 'type_' || (i % 20) AS type,
              CASE WHEN i % 100 < 94 THEN 'done' WHEN i % 100 < 99 THEN 'dead' ELSE 'cancelled' END AS status,
              now() - make_interval(secs => random() * $2::float8) AS finished
       FROM generate_series(1, $1::int) AS i
     ), inserted AS (
       INSERT INTO $S.jobs (type, status, created_at, run_at, started_at, completed_at, result, error, attempt, errors)
       SELECT type, status, finished - interval '1 second', finished - interval '1 second', finished - interval '10 ms',
              finished, CASE WHEN status = 'done' THEN '{"ok":true}'::jsonb END,
              CASE WHEN status = 'dead' THEN 'bench: failed on purpose' END, CASE WHEN status = 'dead' THEN 4 ELSE 0 END,
              '[]'::jsonb
       FROM rows
       RETURNING id, type, status, payload, priority, max_retries, error, attempt, errors, worker_id, created_at, completed_at
     ), dead AS (
       INSERT INTO $S.dead_letter_jobs (job_id, type, payload, priority, max_retries, error, attempts, errors, worker_id, created_at, died_at)
       SELECT id, type, payload, priority, max_retries, error, attempt, errors, worker_id, created_at, completed_at
       FROM inserted WHERE status = 'dead'
     )
     SELECT count(*)::int AS inserted FROM inserted`,
  );

/**
 * Fills `job_stats` as an hour of steady work leaves it (`npm run bench:ui`): every second of the
 * last $1 seconds, all 16 slots, $2 done and $3 failed per row. Existing buckets are left alone.
 */
export const fillUiStats = (schema: string): Statement =>
  statement(
    schema,
    "bench_fill_ui_stats",
    `INSERT INTO $S.job_stats (bucket, slot, done, failed, exec_seconds)
     SELECT date_trunc('second', now()) - make_interval(secs => s), slot, $2::int, $3::int, $2::int * 0.01
     FROM generate_series(0, $1::int - 1) AS s, generate_series(0, 15) AS slot
     ON CONFLICT (bucket, slot) DO NOTHING`,
  );

/** Refreshes the planner's statistics of the jobs table (after a benchmark's bulk insert). */
export const analyzeJobs = (schema: string): string =>
  statement(schema, "bench_analyze_jobs", `ANALYZE $S.jobs`).text;

/**
 * A backlog: `$3` pending jobs of type `$1`, priority `$2`, due an hour ago (ahead of any job
 * enqueued now in claim order). One NOTIFY for the whole statement.
 */
export const insertBacklog = (schema: string): Statement =>
  statement(
    schema,
    "bench_insert_backlog",
    `INSERT INTO $S.jobs (type, priority, run_at)
     SELECT $1::text, $2::int, now() - interval '1 hour' FROM generate_series(1, $3::int)`,
  );
