import { type Statement, statement } from "./statement.js";

/**
 * Statements of paused types and the per-type states (issue 14, items 6 and 8; schema version 10).
 * A paused type is a row of `paused_types`; the claim statements (claim.ts) skip the types it lists.
 */

/**
 * Pauses type `$1` (idempotent: pausing a paused type keeps its `paused_at`). Returns one row:
 * `type`, `paused_at`.
 */
export const pauseType = (schema: string): Statement =>
  statement(
    schema,
    "pause_type",
    `INSERT INTO $S.paused_types AS p (type) VALUES ($1)
     ON CONFLICT (type) DO UPDATE SET paused_at = p.paused_at
     RETURNING p.type, p.paused_at`,
  );

/**
 * Resumes type `$1` (idempotent) and, when it was paused, wakes the workers (NOTIFY with the type,
 * as an insert does) so that idle ones claim its due jobs at once instead of at their next poll.
 * Returns one row: `resumed` (1 if it was paused, else 0).
 */
export const resumeType = (schema: string): Statement =>
  statement(
    schema,
    "resume_type",
    `WITH gone AS (DELETE FROM $S.paused_types WHERE type = $1 RETURNING type)
     SELECT count(*)::int AS resumed, coalesce(sum($S.wake_workers(type)), 0)::int AS woke FROM gone`,
  );

/**
 * Every type that has pending jobs, is paused, is limited, or is claimed by a live worker, in type
 * order, at most `$2`: `type`, `paused_at` (null unless paused), `pending` (due or scheduled later),
 * `max_running`, `rate_per_second`, `burst` (its limits, schema version 13; null: none),
 * `oldest_pending_age_seconds` (seconds since the oldest due pending job became due, from its
 * `run_at`; null if none is due), `live_workers` (worker rows with a heartbeat younger than `$1`
 * seconds whose `types` include it; 0 with pending jobs: no live worker handles the type).
 * Pending jobs are read through the two pending-only partial indexes (jobs_claim_idx and
 * jobs_alone_idx), so the cost follows the pending jobs, never the history.
 */
export const typeStates = (schema: string): Statement =>
  statement(
    schema,
    "type_states",
    `WITH pending AS (
       SELECT type, count(*) AS n, min(run_at) FILTER (WHERE run_at <= now()) AS oldest_due
       FROM (SELECT type, run_at FROM $S.jobs WHERE status = 'pending' AND NOT run_alone
             UNION ALL
             SELECT type, run_at FROM $S.jobs WHERE status = 'pending' AND run_alone) AS p
       GROUP BY type
     ), live AS (
       SELECT t.type, count(*) AS n
       FROM $S.workers AS w CROSS JOIN LATERAL unnest(w.types) AS t(type)
       WHERE w.heartbeat_at > now() - make_interval(secs => $1::float8)
       GROUP BY t.type
     ), known AS (
       SELECT type FROM pending UNION SELECT type FROM $S.paused_types UNION SELECT type FROM live
       UNION SELECT type FROM $S.type_limits
     )
     SELECT k.type, p.paused_at, coalesce(d.n, 0)::bigint AS pending,
            t.max_running, t.rate_per_second, t.burst,
            extract(epoch FROM now() - d.oldest_due)::float8 AS oldest_pending_age_seconds,
            coalesce(l.n, 0)::int AS live_workers
     FROM known AS k
     LEFT JOIN $S.paused_types AS p ON p.type = k.type
     LEFT JOIN $S.type_limits AS t ON t.type = k.type
     LEFT JOIN pending AS d ON d.type = k.type
     LEFT JOIN live AS l ON l.type = k.type
     ORDER BY k.type
     LIMIT $2`,
  );
