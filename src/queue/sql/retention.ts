/**
 * Retention (issue 14, item 9; DESIGN.md §3, "Retention"): the statements of a pruning pass
 * (../retention.ts). A pass holds a session advisory lock on (lock class, -2) so that one process
 * prunes at a time; job locks use objids ≥ 0 and the migration lock -1, so it meets neither.
 */
import { countStatuses } from "./accounting.js";
import { lockKey, type Statement, statement } from "./statement.js";

/** Takes the pruning lock if free: one row, `locked`. $1 lock class. */
export const tryPruneLock = (schema: string): Statement =>
  statement(schema, "try_prune_lock", `SELECT pg_try_advisory_lock(${lockKey("$1", "-2")}) AS locked`);

/** Releases the pruning lock. $1 lock class. */
export const pruneUnlock = (schema: string): Statement =>
  statement(schema, "prune_unlock", `SELECT pg_advisory_unlock(${lockKey("$1", "-2")}) AS unlocked`);

/** Whether a job row of CTE alias `j` (or none) is due for deletion: $3 done/cancelled, $4 dead (seconds; 0 keeps). */
const due = (j: string) =>
  `((${j}status IN ('done', 'cancelled') AND $3::float8 > 0 AND ${j}completed_at < now() - make_interval(secs => $3::float8))
      OR (${j}status = 'dead' AND $4::float8 > 0 AND ${j}completed_at < now() - make_interval(secs => $4::float8)))`;

/**
 * One batch of a pruning pass over `jobs`, in id order through the primary key: the next $2 rows
 * after id $1 are read, and those finished long enough ago are deleted with their dead-letter
 * entries: done and cancelled ones completed more than $3 seconds ago, dead ones more than $4
 * seconds ago (0: kept for ever). Finished jobs have no index of their own (a completion would pay
 * for its entry, docs/architecture.md), and ids follow creation: a row created less than $5 seconds
 * ago (the shorter retention) cannot be due, nor, nearly, any row after it, so the pass stops there
 * (`frontier`). Rows kept (pending, held, dead within their retention) are read again by each pass.
 *
 * Deleting changes no counter: the delete trigger takes the jobs out of `job_counts` and this
 * statement puts them back, so `queue_depth` of done, dead and cancelled still counts pruned jobs
 * (they were not undone), and job_stats / job_exec_bins (rates, quantiles) are not touched.
 * Returns one row: `last_id` (the cursor for the next batch; NULL when nothing was read),
 * `frontier`, `deleted` (jsonb: jobs deleted per status) and `letters` (dead-letter entries deleted).
 */
export const pruneJobs = (schema: string): Statement =>
  statement(
    schema,
    "prune_jobs",
    `WITH scanned AS MATERIALIZED (
       SELECT id, status, completed_at, created_at FROM $S.jobs WHERE id > $1::bigint ORDER BY id LIMIT $2
     ), doomed AS MATERIALIZED (
       SELECT id FROM scanned WHERE ${due("")}
     ), deleted AS (
       DELETE FROM $S.jobs AS j WHERE j.id = ANY(ARRAY(SELECT id FROM doomed)) AND ${due("j.")}
       RETURNING j.id, j.status
     ), letters AS (
       DELETE FROM $S.dead_letter_jobs WHERE job_id = ANY(ARRAY(SELECT id FROM deleted)) RETURNING job_id
     ), kept_counts AS (
       ${countStatuses("SELECT status, count(*) FROM deleted GROUP BY status")}
     )
     SELECT (SELECT max(id) FROM scanned) AS last_id,
            EXISTS (SELECT FROM scanned WHERE created_at >= now() - make_interval(secs => $5::float8)) AS frontier,
            (SELECT coalesce(jsonb_object_agg(status, n), '{}'::jsonb)
               FROM (SELECT status, count(*) AS n FROM deleted GROUP BY status) AS c) AS deleted,
            (SELECT count(*) FROM letters)::int AS letters`,
  );

/**
 * Deletes up to $2 dead-letter entries of jobs that died more than $1 seconds ago (the entries of
 * jobs deleted by {@link pruneJobs} go with them; these are entries left behind: a job replayed and
 * still kept, or a row deleted by hand), oldest first through `dead_letter_jobs_died_idx`.
 * Returns one row, `deleted`.
 */
export const pruneDeadLetters = (schema: string): Statement =>
  statement(
    schema,
    "prune_dead_letters",
    `WITH old AS MATERIALIZED (
       SELECT job_id FROM $S.dead_letter_jobs
       WHERE died_at < now() - make_interval(secs => $1::float8)
       ORDER BY died_at, job_id LIMIT $2
     ), deleted AS (
       DELETE FROM $S.dead_letter_jobs WHERE job_id = ANY(ARRAY(SELECT job_id FROM old)) RETURNING job_id
     )
     SELECT count(*)::int AS deleted FROM deleted`,
  );
