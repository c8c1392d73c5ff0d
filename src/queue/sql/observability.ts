/**
 * Statements of the Prometheus exposition (schema version 8): the counters and histograms by job
 * type (job_totals, job_histogram; see accounting.ts) and the live gauges by type, read in one
 * round trip; and the worker's count of the writes it could not hand in.
 */
import { countEvents } from "./accounting.js";
import { type Statement, statement } from "./statement.js";

/**
 * Adds event counts to job_totals, outside any job statement: `fenced` writes a worker refused or
 * dropped, which the fence's own statement cannot attribute (a dropped write never reaches the
 * database). $1 types text[], $2 events text[], $3 counts bigint[].
 */
export const countJobEvents = (schema: string): Statement =>
  statement(
    schema,
    "count_job_events",
    countEvents("SELECT * FROM unnest($1::text[], $2::text[], $3::bigint[])"),
  );

/**
 * Every figure by job type, each column a JSON array of arrays (one round trip, no per-type query):
 * - `totals`: `[type, event, count]` of job_totals;
 * - `histogram`: `[type, metric, bucket, count, sum_seconds]` of job_histogram (bucket: index of
 *   the upper bound, see HISTOGRAM_BOUNDS_SECONDS);
 * - `live`: `[type, status, jobs, oldest_due_seconds]` for pending (through jobs_claim_idx; the age
 *   of the oldest job already due, null if none is) and held jobs (through jobs_stale_idx).
 */
export const typeFigures = (schema: string): Statement =>
  statement(
    schema,
    "type_figures",
    `SELECT
       (SELECT coalesce(jsonb_agg(jsonb_build_array(type, event, n)), '[]'::jsonb)
          FROM (SELECT type, event, sum(count)::bigint AS n FROM $S.job_totals GROUP BY type, event) AS t) AS totals,
       (SELECT coalesce(jsonb_agg(jsonb_build_array(type, metric, bucket, n, s)), '[]'::jsonb)
          FROM (SELECT type, metric, bucket, sum(count)::bigint AS n, sum(sum_seconds) AS s
                FROM $S.job_histogram GROUP BY type, metric, bucket) AS h) AS histogram,
       (SELECT coalesce(jsonb_agg(jsonb_build_array(type, status, n, oldest)), '[]'::jsonb)
          FROM (SELECT type, 'pending'::text AS status, count(*) AS n,
                       date_part('epoch', now() - min(run_at) FILTER (WHERE run_at <= now())) AS oldest
                FROM $S.jobs WHERE status = 'pending' GROUP BY type
                UNION ALL
                SELECT type, status, count(*), NULL FROM $S.jobs
                WHERE status IN ('claimed', 'running') GROUP BY type, status) AS l) AS live`,
  );
