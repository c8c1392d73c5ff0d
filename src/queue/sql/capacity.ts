import { type Statement, statement } from "./statement.js";

/**
 * Pending jobs now, for the pending-jobs caps (../capacity.ts): `total` from the job_counts
 * counters (16 rows per status, exact, whatever the queue's size), and when $1 is true `by_type`,
 * a JSON object of type → pending count, counted through the pending-only claim index
 * (jobs_claim_idx), so its cost grows with the pending jobs, not with the history.
 * $1 count by type (boolean).
 */
export const pendingCounts = (schema: string): Statement =>
  statement(
    schema,
    "pending_counts",
    `SELECT (SELECT coalesce(sum(count), 0) FROM $S.job_counts WHERE status = 'pending')::bigint AS total,
            CASE WHEN $1::boolean THEN
              (SELECT coalesce(jsonb_object_agg(type, n), '{}'::jsonb)
                 FROM (SELECT type, count(*) AS n FROM $S.jobs WHERE status = 'pending' GROUP BY type) AS c)
            END AS by_type`,
  );
