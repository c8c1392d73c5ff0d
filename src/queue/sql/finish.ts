import {
  countEvents,
  countStatuses,
  dueTypes,
  failureEvents,
  recordCompletions,
  recordStats,
  wakeForDue,
} from "./accounting.js";
import { type JsonArrayType, jsonArrayElements } from "./params.js";
import { fence, idsNotFound, JOB_COLUMNS, lockKey, type Statement, statement } from "./statement.js";
import { notifyWatched } from "./waits.js";

/**
 * A failed attempt, shared by handler failures and reaped jobs (DESIGN.md §4): the attempt count
 * goes up, the error joins the history, and the job either waits `min(base * 2^a, max)` seconds
 * (times a jitter factor in [0.5, 1]) or, with retries exhausted, dies. `a` is the 0-based number
 * of the attempt that failed, i.e. `attempt` before this update.
 * Parameters named here: $backoff_base, $backoff_max (float8 seconds), $jitter (bool).
 */
function failedAttemptSet(p: {
  error: string;
  workerId: string;
  base: string;
  max: string;
  jitter: string;
  /** A boolean expression: the failure is permanent (the handler asked for no retries). */
  permanent?: string;
}) {
  const exhausted = p.permanent
    ? `(j.attempt >= j.max_retries OR ${p.permanent})`
    : "j.attempt >= j.max_retries";
  const marked = p.permanent
    ? ` || CASE WHEN ${p.permanent} THEN '{"permanent": true}'::jsonb ELSE '{}'::jsonb END`
    : "";
  // Rows an operator or an older version left in unusual states must not break the statement for
  // every row of its batch (shared/cases 20): the attempt count stops at int4's largest value
  // instead of overflowing, and the doubling stops at 2^60 (more than any delay the cap allows)
  // instead of overflowing float8 or the interval.
  return `attempt = least(j.attempt::int8 + 1, 2147483647)::int4,
     status = CASE WHEN ${exhausted} THEN 'dead' ELSE 'pending' END,
     run_at = CASE WHEN ${exhausted} THEN j.run_at
       ELSE now() + make_interval(secs => least(${p.base}::float8 * power(2, least(greatest(j.attempt, 0), 60)), ${p.max}::float8)
                                       * CASE WHEN ${p.jitter}::bool THEN 0.5 + random() * 0.5 ELSE 1 END) END,
     completed_at = CASE WHEN ${exhausted} THEN now() END,
     error = ${p.error},
     errors = j.errors || jsonb_build_array(jsonb_build_object(
       'attempt', j.attempt, 'error', ${p.error}, 'worker_id', ${p.workerId}, 'failed_at', now())${marked}),
     claimed_at = NULL, heartbeat_at = NULL`;
}

/**
 * Copies jobs that just died (rows of CTE `cte`) into dead_letter_jobs. A job that was replayed and
 * died again (schema version 6) refreshes its entry, which waits again (`replayed_at` NULL) and
 * keeps its count of replays.
 */
function deadLetterInsert(cte: string) {
  return `INSERT INTO $S.dead_letter_jobs AS d
       (job_id, type, payload, priority, max_retries, error, attempts, errors, worker_id, created_at, died_at)
     SELECT id, type, payload, priority, max_retries, error, attempt, errors, worker_id, created_at, now()
     FROM ${cte} WHERE status = 'dead'
     ON CONFLICT (job_id) DO UPDATE
       SET type = excluded.type, payload = excluded.payload, priority = excluded.priority,
           max_retries = excluded.max_retries, error = excluded.error, attempts = excluded.attempts,
           errors = excluded.errors, worker_id = excluded.worker_id, created_at = excluded.created_at,
           died_at = excluded.died_at, replayed_at = NULL`;
}

/**
 * Counters of failed attempts whose rows (new status pending or dead) are CTE `cte`: the new
 * statuses are counted, each row is one failed attempt in this second's stats, and one `retried`
 * or `dead` event of its type (job_totals).
 */
function failedAttemptCounts(cte: string) {
  return `${cte}_counted AS (
       ${countStatuses(`SELECT status, count(*) FROM ${cte} GROUP BY status`)}
     ), ${cte}_stats AS (
       ${recordStats({ source: cte, done: "0", failed: "count(*)", execSeconds: "0" })}
     ), ${cte}_events AS (
       ${countEvents(failureEvents(cte))}
     )`;
}

/**
 * The fence of the held-job writes of this module (see `fence`): held = claimed or running; ids
 * `idsParam` (default $1), rows found as `locate` says if given.
 */
const held = (workerParam: string, idsParam = "$1", locate?: string) =>
  fence({ idsParam, workerParam, heldStatuses: "'claimed', 'running'", locate });

/*
 * A worker writes the outcome of its jobs on its write connection and then, once that has
 * committed, releases their advisory locks on its lock session with {@link unlockJobs}
 * (docs/architecture.md, "Two connections per lock session"). The outcome statements below take no
 * lock and send no NOTIFY: jobs that became claimable again are reported in `due_types`, and the
 * unlock wakes the workers of those types once the locks are gone.
 */

/**
 * Fenced completion of a batch: done, result stored, counted, run-alone flag cleared. No unlock.
 * $1 ids bigint[], $2 attempts int[], $3 results as one JSON array read as `results` (see
 * params.ts), $4 run times float8[] (milliseconds, measured by the worker; used for started_at of
 * jobs never marked running), $5 worker id, $6 row versions tid[] (each job's ctid as its claim
 * returned it, or NULL: see `completionCtes`).
 * Returns one row: `refused_ids` bigint[], the input ids whose claim was lost (nothing changed for
 * them).
 */
export const writeDone = (schema: string, results: JsonArrayType = "jsonb"): Statement =>
  statement(
    schema,
    results === "jsonb" ? "write_done" : "write_done_json",
    `WITH ${completionCtes({ workerId: "$5", results })}
     SELECT coalesce(array_agg(i.id) FILTER (WHERE done.id IS NULL), '{}') AS refused_ids,
            ${notifyWatched(schema, DONE_ROWS)} AS notified
     FROM i LEFT JOIN ${DONE_ROWS} ON done.id = i.id`,
  );

/**
 * The rows a completion updated (`completionCtes`), as one relation named `done`: a subquery, not
 * a CTE of its own, which would copy every row once more.
 */
const DONE_ROWS = "(SELECT * FROM done_found UNION ALL SELECT * FROM done_rest) AS done";

/**
 * The completion's CTEs (`i`, `done_found`, `done_rest`, and the counters of {@link recordCompletions}: `done_groups`,
 * `done_counted`, `done_stats`, `done_bins`, `done_histograms`): $1 ids, $2 attempts,
 * $3 results (one JSON array, read as `results`), $4 run times (ms), $6 row versions, fenced on
 * `workerId`. Execution seconds come from `date_part` (float8), not `extract` (numeric, several
 * times slower).
 *
 * The rows are found in two steps, both under the same fence. `done_found` reads each job's row
 * at the version its claim returned (`$6`, a TID scan): in a drain nothing else writes a job
 * between its claim and its completion, and this spares a walk of the primary key per job
 * (measured: 0.9 µs of a completion's 12 per job). A version that moved since (a running mark, a
 * heartbeat, progress) or is NULL finds no row visible there, and a slot that now holds another
 * job's row fails the id test. `done_rest` then takes the ids `done_found` did not update
 * through the primary key, as every completion did before (and reads nothing when `done_found`
 * updated them all: its ids are then not computed); what the fence refused in the first step it
 * refuses again in the second, so an id is refused only by its job's current row.
 * The write connection runs with `enable_indexscan = off` (claim.ts `writeConnectionSettings`):
 * a plan cached while the table looked empty would otherwise read `done_found`'s rows by a walk
 * of the whole primary key, which costs less than a TID scan on an empty table.
 */
const completionCtes = (p: { workerId: string; results: JsonArrayType }) => {
  const set = `status = 'done', result = i.result::jsonb, completed_at = now(), heartbeat_at = now(), run_alone = false,
           started_at = coalesce(j.started_at, now() - make_interval(secs => i.run_ms / 1000))`;
  const returning = `j.id, j.type, j.watched, greatest(date_part('epoch', j.completed_at - j.started_at), 0) AS exec_seconds,
                 greatest(date_part('epoch', j.claimed_at - j.run_at), 0) AS wait_seconds`;
  return `i AS (
       SELECT * FROM ROWS FROM (unnest($1::bigint[]), unnest($2::int[]), ${jsonArrayElements("$3", p.results)},
                                unnest($4::float8[])) AS t(id, attempt, result, run_ms)
     ), done_found AS (
       UPDATE $S.jobs AS j SET ${set}
       FROM i WHERE ${held(p.workerId, "$1", "j.ctid = ANY($6::tid[])")}
       RETURNING ${returning}
     ), done_rest AS (
       UPDATE $S.jobs AS j SET ${set}
       FROM i WHERE ${held(p.workerId, idsNotFound("i", "done_found"))}
       RETURNING ${returning}
     ), ${recordCompletions("done", DONE_ROWS)}`;
};

/**
 * Fenced failure of a batch: retry with backoff, or dead-letter in the same statement. No unlock.
 * A run-alone job that failed on its own goes back to ordinary pending (DESIGN.md §6). A permanent
 * failure (the handler threw a `PermanentJobError`) dies whatever retries are left, its history
 * entry marked `"permanent": true`.
 * $1 ids, $2 attempts, $3 errors text[], $4 run times float8[] ms, $5 worker id,
 * $6 backoff base s, $7 backoff max s, $8 jitter, $9 permanent bool[]. Returns every input id with `applied`, the new
 * `status` and, for retries, `retry_in_seconds` (by the database clock); every row also carries
 * `due_types`, the types of retries already due (no backoff), for the unlock to wake.
 */
export const writeFailures = (schema: string): Statement =>
  statement(
    schema,
    "write_failures",
    `WITH i AS (
       SELECT * FROM unnest($1::bigint[], $2::int[], $3::text[], $4::float8[], $9::bool[])
         AS t(id, attempt, error, run_ms, permanent)
     ), failed AS (
       UPDATE $S.jobs AS j
       SET ${failedAttemptSet({ error: "i.error", workerId: "$5::text", base: "$6", max: "$7", jitter: "$8", permanent: "i.permanent" })},
           run_alone = false,
           started_at = coalesce(j.started_at, now() - make_interval(secs => i.run_ms / 1000))
       FROM i WHERE ${held("$5")}
       RETURNING j.*
     ), dead AS (
       ${deadLetterInsert("failed")}
     ), ${failedAttemptCounts("failed")}
     SELECT i.id, failed.id IS NOT NULL AS applied, failed.status,
            greatest(extract(epoch FROM failed.run_at - now()), 0)::float8 AS retry_in_seconds,
            due.types AS due_types
     FROM i LEFT JOIN failed ON failed.id = i.id CROSS JOIN (SELECT ${dueTypes("failed")} AS types) AS due
       CROSS JOIN ${notifyWatched(schema, "failed", "status = 'dead'")} AS n`,
  );

/**
 * Fenced give-back without counting an attempt (claimed jobs never started, and jobs still running
 * at the shutdown deadline): back to pending, due at once (a claimed job was due: its run_at is not
 * in the future), so the unlock wakes a worker for it. A run-alone job stays one: it has not yet
 * succeeded or failed on its own. No unlock.
 * $1 ids, $2 attempts, $3 worker id. Returns one row: `refused_ids` like writeDone, and
 * `due_types`, the types given back, for the unlock to wake.
 */
export const writeReleases = (schema: string): Statement =>
  statement(
    schema,
    "write_releases",
    `WITH i AS (
       SELECT * FROM unnest($1::bigint[], $2::int[]) AS t(id, attempt)
     ), released AS (
       UPDATE $S.jobs AS j
       SET status = 'pending', claimed_at = NULL, started_at = NULL, heartbeat_at = NULL
       FROM i WHERE ${held("$3")}
       RETURNING j.id, j.type, j.status, j.run_at
     ), counted AS (
       ${countStatuses("SELECT 'pending'::text, count(*) FROM released")}
     )
     SELECT coalesce(array_agg(i.id) FILTER (WHERE released.id IS NULL), '{}') AS refused_ids,
            ${dueTypes("released")} AS due_types
     FROM i LEFT JOIN released ON released.id = i.id`,
  );

/**
 * Releases the advisory locks of a batch whose outcome has committed, on the lock session that
 * holds them, and wakes the workers of `$3` (comma-separated types, or NULL: nobody) once they are
 * released: the NOTIFY leaves at this statement's commit, after the unlock.
 * $1 ids bigint[], $2 lock class, $3 types to wake. Returns `unlocked`, the number of locks
 * released (ids whose lock this session no longer held are not counted).
 */
export const unlockJobs = (schema: string): Statement =>
  statement(schema, "unlock_jobs", unlockSelect({ ids: "$1", lockClass: "$2", wakeTypes: "$3" }));

/**
 * The unlock's query, parameters named by the caller (`ids` bigint[], `lockClass` int4, `wakeTypes`
 * text): one row, `unlocked` (locks released) and `woke`. Also the first CTE of a claim.
 */
export const unlockSelect = (p: { ids: string; lockClass: string; wakeTypes: string }): string =>
  `SELECT count(*) FILTER (WHERE pg_advisory_unlock(${lockKey(p.lockClass, "i.id")}))::int AS unlocked,
            CASE WHEN ${p.wakeTypes}::text IS NOT NULL THEN $S.wake_workers(${p.wakeTypes}::text) END AS woke
     FROM unnest(${p.ids}::bigint[]) AS i(id)`;

/**
 * The stale reaper (DESIGN.md §6), one statement on any connection. It reclaims held jobs whose
 * heartbeat is older than $1 seconds AND whose advisory lock no session holds (tested with a
 * transaction-level try-lock, released at commit): their worker lost them. Stale worker rows are
 * deleted. Concurrent reapers skip each other's rows.
 *
 * The rule (DESIGN.md §6, "Lost jobs"): a worker process is the lanes whose ids share the part
 * before `/` (worker.ts). A reclaimed job
 * - that was not running alone, and whose process held other jobs when it was lost (counted over
 *   the jobs that process still holds, this pass's included, and the ones already reclaimed from
 *   it that wait to run alone), is an innocent neighbour or the culprit, nobody can tell: it counts
 *   no attempt, goes back to pending due at once, flagged `run_alone`;
 * - that was running alone (flag set), or was its process's only job, is the culprit or was unlucky
 *   alone: a failed attempt naming the lost worker, with its backoff (or dead-lettered), as any
 *   failure; the flag stays as it was (a culprit keeps running alone).
 * Bounded: a reclaim without count needs the flag clear and sets it; only a handler's written
 * outcome clears it (done, or a failed attempt: `writeDone`, `writeFailures`). So a job gets at
 * most one uncounted reclaim per counted attempt, at most max_retries + 2 in all; a job that keeps
 * crashing its worker is dead-lettered after its retries.
 * Every reclaimed job already due wakes the workers of its type, in this statement.
 * $1 stale threshold s, $2 batch limit, $3 lock class, $4 backoff base, $5 backoff max, $6 jitter.
 * Returns the reclaimed jobs (both kinds).
 */
export const reapStaleJobs = (schema: string): Statement =>
  statement(
    schema,
    "reap_stale_jobs",
    `WITH stale AS MATERIALIZED (
       SELECT id, run_alone, split_part(worker_id, '/', 1) AS process FROM $S.jobs
       WHERE status IN ('claimed', 'running') AND heartbeat_at < now() - make_interval(secs => $1::float8)
       ORDER BY heartbeat_at
       LIMIT $2
       FOR UPDATE SKIP LOCKED
     ), unowned AS MATERIALIZED (
       SELECT id, run_alone, process FROM stale WHERE pg_try_advisory_xact_lock(${lockKey("$3", "id")})
     ), process_jobs AS MATERIALIZED (
       SELECT process, count(*) AS n FROM (
         SELECT split_part(worker_id, '/', 1) AS process FROM $S.jobs WHERE status IN ('claimed', 'running')
         UNION ALL
         SELECT split_part(worker_id, '/', 1) FROM $S.jobs WHERE status = 'pending' AND run_alone
       ) AS held
       WHERE EXISTS (SELECT FROM unowned) AND process IN (SELECT process FROM unowned)
       GROUP BY process
     ), neighbours AS MATERIALIZED (
       SELECT u.id FROM unowned u JOIN process_jobs p ON p.process = u.process
       WHERE NOT u.run_alone AND p.n > 1
     ), freed AS (
       UPDATE $S.jobs AS j
       SET status = 'pending', run_at = now(), run_alone = true, claimed_at = NULL, started_at = NULL,
           heartbeat_at = NULL
       WHERE j.id = ANY(ARRAY(SELECT id FROM neighbours))
       RETURNING j.*
     ), reaped AS (
       UPDATE $S.jobs AS j
       SET ${failedAttemptSet({
         error: `('worker ' || coalesce(j.worker_id, 'unknown') || ' lost the job: no heartbeat since '
                  || j.heartbeat_at::text || CASE WHEN j.run_alone THEN ' (it ran alone)' ELSE '' END)`,
         workerId: "j.worker_id",
         base: "$4",
         max: "$5",
         jitter: "$6",
       })}
       WHERE j.id = ANY(ARRAY(SELECT id FROM unowned EXCEPT ALL SELECT id FROM neighbours))
       RETURNING j.*
     ), dead AS (
       ${deadLetterInsert("reaped")}
     ), gone_workers AS (
       DELETE FROM $S.workers WHERE heartbeat_at < now() - make_interval(secs => $1::float8)
     ), reclaimed AS (
       SELECT * FROM freed UNION ALL SELECT * FROM reaped
     ), counted AS (
       ${countStatuses("SELECT status, count(*) FROM reclaimed GROUP BY status")}
     ), reaped_stats AS (
       ${recordStats({ source: "reaped", done: "0", failed: "count(*)", execSeconds: "0" })}
     ), reaped_events AS (
       ${countEvents(failureEvents("reaped"))}
     )
     SELECT ${JOB_COLUMNS} FROM reclaimed CROSS JOIN ${wakeForDue("reclaimed")} AS woke
       CROSS JOIN ${notifyWatched(schema, "reaped", "status = 'dead'")} AS n`,
  );
