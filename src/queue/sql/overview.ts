import { type Statement, statement } from "./statement.js";

/**
 * The dashboard's overview reads (GET /stats/types, GET /stats/throughput). Each reads only what is
 * bounded whatever the history: the live jobs through their partial indexes, the per-second stats
 * buckets (pruned after an hour), the worker rows. `test/api/overview.test.ts` checks the plans.
 */

/**
 * Live jobs per type: pending (all, and due now), claimed, running, the age of the oldest due
 * pending job and the next scheduled run, plus the live workers that claim the type.
 * $1 worker liveness threshold seconds, $2 most types returned.
 *
 * The pending jobs are read through the two partial claim indexes (`jobs_claim_idx` holds the
 * ordinary ones, `jobs_alone_idx` the run-alone ones) and the held ones through `jobs_stale_idx`,
 * so the cost follows the live queue, never the done/dead history.
 */
export const typeDepths = (schema: string): Statement =>
  statement(
    schema,
    "type_depths",
    `WITH live AS (
       SELECT type, status, run_at FROM $S.jobs WHERE status = 'pending' AND NOT run_alone
       UNION ALL
       SELECT type, status, run_at FROM $S.jobs WHERE status = 'pending' AND run_alone
       UNION ALL
       SELECT type, status, run_at FROM $S.jobs WHERE status IN ('claimed', 'running')
     ), live_workers AS MATERIALIZED (
       SELECT types FROM $S.workers WHERE heartbeat_at > now() - make_interval(secs => $1::float8)
     ), per_type AS (
       SELECT type,
              count(*) FILTER (WHERE status = 'pending') AS pending,
              count(*) FILTER (WHERE status = 'pending' AND run_at <= now()) AS due,
              count(*) FILTER (WHERE status = 'claimed') AS claimed,
              count(*) FILTER (WHERE status = 'running') AS running,
              min(run_at) FILTER (WHERE status = 'pending' AND run_at <= now()) AS oldest_due_at,
              min(run_at) FILTER (WHERE status = 'pending' AND run_at > now()) AS next_run_at
       FROM live GROUP BY type
     )
     SELECT p.type, p.pending::bigint, p.due::bigint, p.claimed::bigint, p.running::bigint,
            extract(epoch FROM now() - p.oldest_due_at)::float8 AS oldest_due_seconds, p.next_run_at,
            (SELECT count(*) FROM live_workers w WHERE p.type = ANY(w.types))::int AS live_workers
     FROM per_type p
     ORDER BY p.pending + p.claimed + p.running DESC, p.type
     LIMIT $2`,
  );

/**
 * Completed and failed attempts per minute over the last $1 minutes (the current minute included),
 * oldest first, from the per-second `job_stats` buckets (kept an hour). Minutes without any are
 * absent. Columns: minute, done, failed, exec_seconds (total execution seconds of the done jobs).
 */
export const throughputPerMinute = (schema: string): Statement =>
  statement(
    schema,
    "throughput_per_minute",
    `SELECT date_trunc('minute', bucket) AS minute, sum(done)::bigint AS done, sum(failed)::bigint AS failed,
            sum(exec_seconds)::float8 AS exec_seconds, date_trunc('minute', now()) AS now_minute
     FROM $S.job_stats
     WHERE bucket >= date_trunc('minute', now()) - make_interval(mins => $1::int - 1)
     GROUP BY 1
     UNION ALL
     SELECT NULL, 0, 0, 0, date_trunc('minute', now())
     ORDER BY 1 NULLS FIRST`,
  );
