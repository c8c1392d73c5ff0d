import { JOB_FIELDS, OMISSION_FLAGS } from "../job-shape.js";
import { countEvents, countStatuses } from "./accounting.js";
import { DEAD_LETTER_SELECT_LIST, jobSelectList } from "./columns.js";
import { JOB_COLUMNS, type Statement, statement } from "./statement.js";
import { notifyWatched } from "./waits.js";

/** Every job field but the two a list may leave out (payload, result). */
const LISTED_COLUMNS = jobSelectList(
  JOB_FIELDS.map((f) => f.field).filter((field) => !OMISSION_FLAGS.some((flag) => flag.of === field)),
);

/** One job by id. $1 id. */
export const getJob = (schema: string): Statement =>
  statement(schema, "get_job", `SELECT ${JOB_COLUMNS} FROM $S.jobs WHERE id = $1`);

/** Jobs by id, in no particular order (ids without a job are left out). $1 ids bigint[]. */
export const getJobs = (schema: string): Statement =>
  statement(schema, "get_jobs", `SELECT ${JOB_COLUMNS} FROM $S.jobs WHERE id = ANY($1::bigint[])`);

/**
 * Jobs, newest first, with optional filters in fixed slots (NULL = no filter).
 * $1 status, $2 type, $3 created_after, $4 limit, $5 offset, $6 largest payload/result (JSON text
 * bytes) a list carries: larger ones are NULL with `payloadOmitted`/`resultOmitted` true, so a
 * page of 1,000 jobs stays small; GET /jobs/{id} has them whole.
 */
export const listJobs = (schema: string): Statement =>
  statement(
    schema,
    "list_jobs",
    `SELECT ${LISTED_COLUMNS},
            CASE WHEN octet_length(payload::text) <= $6 THEN payload END AS payload,
            octet_length(payload::text) > $6 AS "payloadOmitted",
            CASE WHEN octet_length(result::text) <= $6 THEN result END AS result,
            coalesce(octet_length(result::text) > $6, false) AS "resultOmitted"
     FROM $S.jobs
     WHERE ($1::text IS NULL OR status = $1::text)
       AND ($2::text IS NULL OR type = $2::text)
       AND ($3::timestamptz IS NULL OR created_at > $3::timestamptz)
     ORDER BY id DESC
     LIMIT $4 OFFSET $5`,
  );

/**
 * Cancels a job only while it is pending. $1 id. Returns one row: `cancelled` true with the
 * cancelled job, or false with the job as it stands (no row at all: no such job).
 */
export const cancelJob = (schema: string): Statement =>
  statement(
    schema,
    "cancel_job",
    `WITH cancelled AS (
       UPDATE $S.jobs SET status = 'cancelled', completed_at = now()
       WHERE id = $1 AND status = 'pending'
       RETURNING ${JOB_COLUMNS}, watched
     ), counted AS (
       ${countStatuses("SELECT s, n FROM cancelled, (VALUES ('pending'::text, -1), ('cancelled', 1)) AS v(s, n)")}
     ), cancel_events AS (
       ${countEvents("SELECT type, 'cancelled', count(*) FROM cancelled GROUP BY type")}
     )
     SELECT true AS cancelled, ${JOB_FIELDS.map((f) => `"${f.field}"`).join(", ")}
     FROM cancelled CROSS JOIN ${notifyWatched(schema, "cancelled")} AS n
     UNION ALL
     SELECT false AS cancelled, ${JOB_COLUMNS} FROM $S.jobs
     WHERE id = $1 AND NOT EXISTS (SELECT 1 FROM cancelled)`,
  );

/**
 * Cancels a job in any live state (DESIGN.md §4, "Cancel"): pending, claimed or running → cancelled,
 * in one statement fenced on those statuses, so that it and the owning worker's outcome write (fenced
 * on the held statuses too) cannot both apply. A held job's worker is told by a NOTIFY
 * `cancel:<id>` on the workers' channel (wake_workers), sent at commit; its advisory lock stays with
 * that worker until the handler is aborted; waiters of a watched job are notified (waits.ts).
 * $1 id. Returns one row like {@link cancelJob}, plus `was_held`: the job was claimed or running.
 */
export const cancelAnyJob = (schema: string): Statement =>
  statement(
    schema,
    "cancel_any_job",
    `WITH before AS MATERIALIZED (
       SELECT id, status AS old_status FROM $S.jobs
       WHERE id = $1 AND status IN ('pending', 'claimed', 'running')
       FOR UPDATE
     ), cancelled AS (
       UPDATE $S.jobs AS j SET status = 'cancelled', completed_at = now(), run_alone = false
       FROM before WHERE j.id = before.id
       RETURNING ${jobSelectList(undefined, "j")}, before.old_status, j.watched
     ), counted AS (
       ${countStatuses(
         `SELECT s, n FROM cancelled, (VALUES ('pending'::text, -1), ('cancelled', 1)) AS v(s, n)
          WHERE cancelled.old_status = 'pending' OR v.s = 'cancelled'`,
       )}
     ), cancel_events AS (
       ${countEvents("SELECT type, 'cancelled', count(*) FROM cancelled GROUP BY type")}
     )
     SELECT true AS cancelled, old_status <> 'pending' AS was_held, cancelled.*,
            CASE WHEN old_status <> 'pending' THEN $S.wake_workers('cancel:' || id) END AS told
     FROM cancelled CROSS JOIN ${notifyWatched(schema, "cancelled")} AS n
     UNION ALL
     SELECT false AS cancelled, false AS was_held, ${JOB_COLUMNS}, NULL::text, NULL::boolean, NULL::int
     FROM $S.jobs
     WHERE id = $1 AND NOT EXISTS (SELECT 1 FROM cancelled)`,
  );

/** Which of the jobs $1 (bigint[]) are cancelled now. Returns their ids. */
export const cancelledAmong = (schema: string): Statement =>
  statement(
    schema,
    "cancelled_among",
    `SELECT id FROM $S.jobs WHERE id = ANY($1::bigint[]) AND status = 'cancelled'`,
  );

/** One dead-letter entry by job id. $1 job id. */
export const getDeadLetter = (schema: string): Statement =>
  statement(
    schema,
    "get_dead_letter",
    `SELECT ${DEAD_LETTER_SELECT_LIST} FROM $S.dead_letter_jobs WHERE job_id = $1`,
  );

/**
 * Every figure of GET /metrics in one round trip, from counters (see accounting.ts) and small
 * partial-index scans (held jobs: jobs_stale_idx), so it stays fast with millions of finished jobs.
 * $1 window seconds (trailing, for rates and quantiles), $2 worker liveness threshold seconds.
 *
 * Quantiles of the execution seconds of jobs completed in the window come from job_exec_bins
 * (schema version 3): the quantile q is the mean of the first bin whose cumulative count reaches
 * q × the window's count (nearest rank).
 */
export const metrics = (schema: string): Statement =>
  statement(
    schema,
    "metrics",
    `WITH window_stats AS MATERIALIZED (
       SELECT coalesce(sum(done), 0) AS done, coalesce(sum(failed), 0) AS failed,
              coalesce(sum(exec_seconds), 0) AS exec_seconds
       FROM $S.job_stats WHERE bucket > now() - make_interval(secs => $1::float8)
     ), bins AS MATERIALIZED (
       SELECT sum(exec_seconds) / sum(jobs) AS mean_seconds,
              sum(sum(jobs)) OVER (ORDER BY bin) AS cumulative, sum(sum(jobs)) OVER () AS total
       FROM $S.job_exec_bins WHERE bucket > now() - make_interval(secs => $1::float8)
       GROUP BY bin HAVING sum(jobs) > 0
     )
     SELECT
       (SELECT coalesce(jsonb_object_agg(status, n), '{}'::jsonb)
          FROM (SELECT status, sum(count)::bigint AS n FROM $S.job_counts GROUP BY status
                UNION ALL
                SELECT status, count(*) FROM $S.jobs WHERE status IN ('claimed', 'running') GROUP BY status) AS c) AS depth,
       (SELECT count(*) FROM $S.workers
          WHERE heartbeat_at > now() - make_interval(secs => $2::float8))::int AS active_workers,
       (SELECT coalesce(sum(fenced_writes), 0) FROM $S.workers)::bigint AS fenced_writes,
       (SELECT count(*) FROM $S.dead_letter_jobs WHERE replayed_at IS NULL)::bigint AS dead_letter_count,
       (SELECT done FROM window_stats)::bigint AS done_in_window,
       (SELECT failed FROM window_stats)::bigint AS failed_in_window,
       (SELECT exec_seconds FROM window_stats)::float8 AS exec_seconds,
       (SELECT mean_seconds FROM bins WHERE cumulative >= 0.5 * total ORDER BY cumulative LIMIT 1) AS p50,
       (SELECT mean_seconds FROM bins WHERE cumulative >= 0.9 * total ORDER BY cumulative LIMIT 1) AS p90,
       (SELECT mean_seconds FROM bins WHERE cumulative >= 0.99 * total ORDER BY cumulative LIMIT 1) AS p99,
       (SELECT coalesce(max(total), 0) FROM bins)::int AS samples`,
  );

/** Deletes per-second stats buckets and execution-time bins older than $1 seconds. */
export const pruneStats = (schema: string): Statement =>
  statement(
    schema,
    "prune_stats",
    `WITH bins AS (DELETE FROM $S.job_exec_bins WHERE bucket < now() - make_interval(secs => $1::float8))
     DELETE FROM $S.job_stats WHERE bucket < now() - make_interval(secs => $1::float8)`,
  );

/** The schema's applied version (0: none). */
export const schemaVersion = (schema: string): Statement =>
  statement(schema, "schema_version", `SELECT coalesce(max(version), 0)::int AS version FROM $S.migrations`);

/** Readiness probe: the database answers and the schema is migrated. */
export const ping = (schema: string): Statement =>
  statement(schema, "ping", `SELECT count(*)::int AS n FROM $S.migrations`);

/** Live worker processes, newest heartbeat first. $1 liveness threshold seconds. */
export const listWorkers = (schema: string): Statement =>
  statement(
    schema,
    "list_workers",
    `SELECT id, host, pid, types, concurrency, fenced_writes, started_at, heartbeat_at,
            (SELECT count(*) FROM $S.jobs j WHERE j.worker_id = w.id AND j.status IN ('claimed', 'running'))::int AS held
     FROM $S.workers w
     WHERE heartbeat_at > now() - make_interval(secs => $1::float8)
     ORDER BY heartbeat_at DESC`,
  );
