/**
 * Statements of the operator's actions on finished jobs (issue 14): dead letters listed, replayed
 * and discarded, and a job retried now. None is on the hot path; each is one statement, so that
 * what it changes and what it counts move together.
 */

import { DEAD_LETTER_FIELDS } from "../job-shape.js";
import { countStatuses, wakeForDue } from "./accounting.js";
import { DEAD_LETTER_SELECT_LIST, deadLetterSelectList } from "./columns.js";
import { JOB_COLUMNS, type Statement, statement } from "./statement.js";

/**
 * A dead job sent back to pending (DESIGN.md §4, "Replay"): due now, its attempt count reset, its
 * history (`errors`, `error`, `worker_id`) kept, its result and times of the last run cleared. A
 * job reclaimed as a culprit keeps running alone (`run_alone` untouched, DESIGN.md §6).
 */
const REVIVE = `status = 'pending', attempt = 0, run_at = now(), completed_at = NULL, claimed_at = NULL,
       started_at = NULL, heartbeat_at = NULL, result = NULL`;

/** Marks the dead-letter entries of the jobs of CTE `revived` replayed (the CTE body). */
const markReplayed = (revived: string) =>
  `UPDATE $S.dead_letter_jobs AS d SET replayed_at = now(), replays = d.replays + 1
       WHERE d.job_id = ANY(ARRAY(SELECT id FROM ${revived}))`;

/** Counts the jobs of CTE `revived` out of `dead` and into `pending` (the CTE body). */
const countRevived = (revived: string) =>
  countStatuses(`SELECT s, n FROM ${revived}, (VALUES ('dead'::text, -1), ('pending', 1)) AS v(s, n)`);

/**
 * The filter of a bulk action on dead letters, in fixed slots (NULL = no filter): `$type` text,
 * `$after` / `$before` timestamptz (died strictly after / before), on table alias `d`.
 */
const letterFilter = (p: { type: string; after: string; before: string }) =>
  `(${p.type}::text IS NULL OR d.type = ${p.type}::text)
       AND (${p.after}::timestamptz IS NULL OR d.died_at > ${p.after}::timestamptz)
       AND (${p.before}::timestamptz IS NULL OR d.died_at < ${p.before}::timestamptz)`;

/** Every dead-letter field but the payload, which a list may leave out. */
const LISTED_LETTER_COLUMNS = deadLetterSelectList(
  DEAD_LETTER_FIELDS.map((f) => f.field).filter((field) => field !== "payload"),
);

/**
 * Dead-letter entries, newest death first (`dead_letter_jobs_died_idx`), with optional filters in
 * fixed slots (NULL = no filter): $1 type, $2 died after, $3 died before, $4 replayed (true: only
 * entries whose job was replayed since it died; false: only those still waiting), $5 limit,
 * $6 offset, $7 largest payload (JSON text bytes) a list carries: a larger one is NULL with
 * `payloadOmitted` true, as in a job list.
 */
export const listDeadLetterPage = (schema: string): Statement =>
  statement(
    schema,
    "list_dead_letter_page",
    `SELECT ${LISTED_LETTER_COLUMNS},
            CASE WHEN octet_length(payload::text) <= $7 THEN payload END AS payload,
            octet_length(payload::text) > $7 AS "payloadOmitted"
     FROM $S.dead_letter_jobs AS d
     WHERE ${letterFilter({ type: "$1", after: "$2", before: "$3" })}
       AND ($4::bool IS NULL OR (d.replayed_at IS NOT NULL) = $4::bool)
     ORDER BY d.died_at DESC, d.job_id DESC
     LIMIT $5 OFFSET $6`,
  );

/**
 * Replays one dead letter: if its job is `dead`, back to pending (see {@link REVIVE}), the entry
 * marked replayed, the workers of its type woken. A job that is not dead (replayed already, by
 * this or another call) is left as it is, so replaying twice makes one pending job. The entry is
 * locked first, so concurrent replays of one entry run one after the other.
 * $1 job id. Returns one row: `found` (the entry exists), `replayed` (this call sent the job back),
 * and the job's fields as they are now (all NULL if its row is gone).
 */
export const replayDeadLetter = (schema: string): Statement =>
  statement(
    schema,
    "replay_dead_letter",
    `WITH letter AS MATERIALIZED (
       SELECT job_id FROM $S.dead_letter_jobs WHERE job_id = $1 FOR UPDATE
     ), revived AS (
       UPDATE $S.jobs AS j SET ${REVIVE}
       WHERE j.id = (SELECT job_id FROM letter) AND j.status = 'dead'
       RETURNING j.*
     ), marked AS (
       ${markReplayed("revived")}
     ), counted AS (
       ${countRevived("revived")}
     )
     SELECT EXISTS (SELECT FROM letter) AS found, r.*
     FROM (SELECT 1) AS one
     LEFT JOIN (
       SELECT true AS replayed, ${JOB_COLUMNS} FROM revived
       UNION ALL
       SELECT false, ${JOB_COLUMNS} FROM $S.jobs WHERE id = $1 AND NOT EXISTS (SELECT FROM revived)
     ) AS r ON true
     CROSS JOIN ${wakeForDue("revived")} AS woke`,
  );

/**
 * Replays up to $4 dead letters matching a filter ($1 type, $2 died after, $3 died before; see
 * `letterFilter`), oldest death first: those whose job is still `dead`, skipping entries another
 * replay holds. Each job as {@link replayDeadLetter} does, the workers of their types woken once.
 * Returns one row: `ids` (the jobs sent back, ascending) and `picked` (entries taken: fewer than
 * $4 means none was left).
 */
export const replayDeadLetters = (schema: string): Statement =>
  statement(
    schema,
    "replay_dead_letters",
    `WITH picked AS MATERIALIZED (
       SELECT d.job_id FROM $S.dead_letter_jobs AS d JOIN $S.jobs AS j ON j.id = d.job_id
       WHERE j.status = 'dead' AND ${letterFilter({ type: "$1", after: "$2", before: "$3" })}
       ORDER BY d.died_at, d.job_id
       LIMIT $4
       FOR UPDATE OF d SKIP LOCKED
     ), revived AS (
       UPDATE $S.jobs AS j SET ${REVIVE}
       WHERE j.id = ANY(ARRAY(SELECT job_id FROM picked)) AND j.status = 'dead'
       RETURNING j.id, j.type, j.status, j.run_at
     ), marked AS (
       ${markReplayed("revived")}
     ), counted AS (
       ${countRevived("revived")}
     )
     SELECT coalesce((SELECT array_agg(id ORDER BY id) FROM revived), '{}') AS ids,
            (SELECT count(*) FROM picked)::int AS picked
     FROM ${wakeForDue("revived")} AS woke`,
  );

/** Deletes one dead-letter entry; the job itself stays as it is. $1 job id. Returns the entry. */
export const discardDeadLetter = (schema: string): Statement =>
  statement(
    schema,
    "discard_dead_letter",
    `DELETE FROM $S.dead_letter_jobs WHERE job_id = $1 RETURNING ${DEAD_LETTER_SELECT_LIST}`,
  );

/**
 * Deletes up to $5 dead-letter entries matching a filter ($1 type, $2 died after, $3 died before,
 * $4 replayed, as in {@link listDeadLetterPage}), oldest death first, skipping entries another
 * action holds. The jobs stay as they are. Returns one row: `ids` (ascending) and `picked`.
 */
export const discardDeadLetters = (schema: string): Statement =>
  statement(
    schema,
    "discard_dead_letters",
    `WITH picked AS MATERIALIZED (
       SELECT d.job_id FROM $S.dead_letter_jobs AS d
       WHERE ${letterFilter({ type: "$1", after: "$2", before: "$3" })}
         AND ($4::bool IS NULL OR (d.replayed_at IS NOT NULL) = $4::bool)
       ORDER BY d.died_at, d.job_id
       LIMIT $5
       FOR UPDATE SKIP LOCKED
     ), discarded AS (
       DELETE FROM $S.dead_letter_jobs WHERE job_id = ANY(ARRAY(SELECT job_id FROM picked)) RETURNING job_id
     )
     SELECT coalesce((SELECT array_agg(job_id ORDER BY job_id) FROM discarded), '{}') AS ids,
            (SELECT count(*) FROM picked)::int AS picked`,
  );

/**
 * Retry now (issue 14, item 2): a pending job waiting for its run time (a backoff, or a `run_at`
 * in the future) becomes due now; a dead job is replayed as by {@link replayDeadLetter} (its
 * dead-letter entry, if it has one, marked replayed). Either way the workers of its type are woken.
 * $1 job id. Returns one row, `changed` (this call made it due) with the job as it is now; no row:
 * no such job. A job in any other state, or pending and already due, is returned unchanged.
 */
export const retryJob = (schema: string): Statement =>
  statement(
    schema,
    "retry_job",
    `WITH due AS (
       UPDATE $S.jobs AS j SET run_at = now()
       WHERE j.id = $1 AND j.status = 'pending' AND j.run_at > now()
       RETURNING j.*
     ), revived AS (
       UPDATE $S.jobs AS j SET ${REVIVE}
       WHERE j.id = $1 AND j.status = 'dead'
       RETURNING j.*
     ), marked AS (
       ${markReplayed("revived")}
     ), counted AS (
       ${countRevived("revived")}
     ), changed AS (
       SELECT * FROM due UNION ALL SELECT * FROM revived
     )
     SELECT true AS changed, ${JOB_COLUMNS} FROM changed CROSS JOIN ${wakeForDue("changed")} AS woke
     UNION ALL
     SELECT false, ${JOB_COLUMNS} FROM $S.jobs WHERE id = $1 AND NOT EXISTS (SELECT FROM changed)`,
  );
