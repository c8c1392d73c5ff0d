import { CLAIM_TAIL, CLAIMED_COLUMNS, ofType, PAUSED_TYPES } from "./claim.js";
import { unlockSelect } from "./finish.js";
import { type Statement, statement } from "./statement.js";

/**
 * The limited claim (schema version 13, DESIGN.md §4 "Type limits"): claims due jobs of limited
 * types (rows of type_limits), which the ordinary claim (claim.ts) never takes, within each type's
 * global limits: at most `max_running` of its jobs held (claimed or running) across every worker on
 * every host, and at most `rate_per_second` claims per second (a token bucket of `burst` tokens).
 * Not a hot statement: a worker sends it only for the types it handles that are limited.
 *
 * `type_limit_room($1, $2)` (migration 0013) locks the limit rows of `$1` that are not paused, in
 * type order, then counts their held jobs with a snapshot taken after the locks were granted, and
 * returns each type's room. Those row locks are held until this statement commits, claims
 * included, so the next claimer of a type counts them: two claimers never both see room for one
 * slot. This statement's own snapshot is older (taken before the wait), which is why the count is
 * not made here; its candidates' row locks re-check each job's status on its newest version
 * (READ COMMITTED), so a job another claimer took meanwhile is skipped.
 *
 * Then, as the ordinary claim: up to `room` due jobs per type through jobs_claim_idx in claim
 * order (FOR UPDATE SKIP LOCKED), the first `$2` of their union in claim order, their advisory
 * locks, `claimed` and the status accounting (CLAIM_TAIL); and the pending unlocks first ($5).
 * The bucket is written back: the tokens after refill less the jobs actually claimed of the type,
 * `refilled_at` the time the function refilled it to.
 * $1 types text[], $2 most jobs int, $3 lock class int4, $4 worker id text, $5 ids to unlock bigint[].
 *
 * `more_due` is a scalar subquery with LIMIT 1, not EXISTS: the planner may answer an EXISTS with
 * a hashed subplan that reads every due pending job of every type. The report row's record is
 * built in FROM, so that it is evaluated once, not once per column.
 *
 * Returns the claimed jobs in claim order, then one report row (every column NULL but `payload`),
 * whose payload is `{aloneDue, waitSeconds, heldBack}`: whether run-alone jobs of `$1` are due
 * (limits do not apply to them); the seconds until the next token of the soonest type that the
 * rate held back while it still has due jobs (null: none); and whether a type with due jobs left
 * was held back by its `max_running`.
 */
export const claimLimitedJobs = (schema: string): Statement =>
  statement(
    schema,
    "claim_limited_jobs",
    `WITH unlocked AS MATERIALIZED (
       ${unlockSelect({ ids: "$5", lockClass: "$3", wakeTypes: "NULL" })}
     ), room AS MATERIALIZED (
       SELECT * FROM $S.type_limit_room($1::text[], $2::int) WHERE (SELECT unlocked FROM unlocked) >= 0
     ), candidates AS MATERIALIZED (
       SELECT c.id, c.ctid FROM room AS r
       CROSS JOIN LATERAL (
         SELECT id, ctid, priority, run_at FROM $S.jobs
         WHERE ${ofType("type", "r.limit_type")} AND status = 'pending' AND NOT run_alone AND run_at <= now()
         ORDER BY priority DESC, run_at, id
         LIMIT r.room
         FOR UPDATE SKIP LOCKED
       ) AS c
       ORDER BY c.priority DESC, c.run_at, c.id
       LIMIT $2
     ${CLAIM_TAIL({ lockClass: "$3", workerId: "$4" })}, per_type AS MATERIALIZED (
       SELECT r.limit_type, r.tokens_now, r.checked_at, r.rate, r.running_room,
              (SELECT count(*) FROM claimed AS c WHERE c.type = r.limit_type)::int AS n,
              coalesce((SELECT true FROM $S.jobs AS j
                        WHERE ${ofType("j.type", "r.limit_type")} AND j.status = 'pending' AND NOT j.run_alone
                          AND j.run_at <= now() AND j.id <> ALL(ARRAY(SELECT id FROM claimed))
                        LIMIT 1), false) AS more_due
       FROM room AS r
     ), bucket AS (
       UPDATE $S.type_limits AS l SET tokens = p.tokens_now - p.n, refilled_at = p.checked_at
       FROM per_type AS p
       WHERE l.type = p.limit_type AND p.rate IS NOT NULL
     )
     (SELECT ${CLAIMED_COLUMNS}, ctid FROM claimed ORDER BY priority DESC, run_at, id)
     UNION ALL
     (SELECT ${CLAIMED_COLUMNS}, NULL::tid FROM jsonb_populate_record(NULL::$S.jobs, jsonb_build_object('payload', jsonb_build_object(
        'aloneDue', EXISTS (SELECT FROM $S.jobs WHERE status = 'pending' AND run_alone AND run_at <= now()
                            AND type = ANY($1::text[]) AND type <> ALL(${PAUSED_TYPES})),
        'waitSeconds', (SELECT min(greatest(0, 1 - (tokens_now - n)) / rate) FROM per_type
                        WHERE more_due AND rate IS NOT NULL AND n >= floor(tokens_now)
                          AND (running_room IS NULL OR n < running_room)),
        'heldBack', coalesce((SELECT bool_or(more_due AND n >= running_room) FROM per_type), false)
      ))) AS report)`,
  );

/** Limit rows of the types `$1` (a worker's types): `type`, the ones that are limited. */
export const limitedTypesOf = (schema: string): Statement =>
  statement(
    schema,
    "limited_types_of",
    `SELECT type FROM $S.type_limits WHERE type = ANY($1::text[]) ORDER BY type`,
  );
