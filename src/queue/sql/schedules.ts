import { type Statement, statement } from "./statement.js";

/**
 * Statements of cron schedules (schema version 9; ../schedules.ts). A schedule's row is read with
 * its fields named as {@link ScheduleRow}'s, and `now()` as `dbNow`: the database's clock is the
 * one schedules are computed against.
 */
const SCHEDULE_COLUMNS = `name, cron, timezone, type, payload,
  coalesce((options->>'priority')::int, 5) AS priority, coalesce((options->>'max_retries')::int, 3) AS "maxRetries",
  catch_up AS "catchUp", created_at AS "createdAt", updated_at AS "updatedAt", last_tick AS "lastTick", now() AS "dbNow"`;

/**
 * Creates or replaces a schedule. $1 name, $2 cron, $3 timezone, $4 type, $5 payload jsonb,
 * $6 options jsonb (`{priority, max_retries}`), $7 catch_up. A new schedule, or one whose cron or
 * zone changes, starts now (its `last_tick`); any other change keeps its place. Returns the row and
 * `created` (false: it replaced one).
 */
export const upsertSchedule = (schema: string): Statement =>
  statement(
    schema,
    "upsert_schedule",
    `INSERT INTO $S.schedules AS s (name, cron, timezone, type, payload, options, catch_up)
     VALUES ($1::text, $2::text, $3::text, $4::text, $5::jsonb, $6::jsonb, $7::boolean)
     ON CONFLICT (name) DO UPDATE SET
       cron = excluded.cron, timezone = excluded.timezone, type = excluded.type, payload = excluded.payload,
       options = excluded.options, catch_up = excluded.catch_up, updated_at = now(),
       last_tick = CASE WHEN s.cron = excluded.cron AND s.timezone = excluded.timezone
                        THEN s.last_tick ELSE excluded.last_tick END
     RETURNING ${SCHEDULE_COLUMNS}, (xmax = 0) AS created`,
  );

/** The schedule named $1, if any. */
export const getSchedule = (schema: string): Statement =>
  statement(schema, "get_schedule", `SELECT ${SCHEDULE_COLUMNS} FROM $S.schedules WHERE name = $1::text`);

/** Schedules by name, $1 limit, $2 offset. */
export const listSchedules = (schema: string): Statement =>
  statement(
    schema,
    "list_schedules",
    `SELECT ${SCHEDULE_COLUMNS} FROM $S.schedules ORDER BY name LIMIT $1::int OFFSET $2::int`,
  );

/** Deletes the schedule named $1; returns it as it was. Jobs it enqueued stay. */
export const deleteSchedule = (schema: string): Statement =>
  statement(
    schema,
    "delete_schedule",
    `DELETE FROM $S.schedules WHERE name = $1::text RETURNING ${SCHEDULE_COLUMNS}`,
  );

/** What a scheduler pass needs of every schedule (one read per pass), and the database's `now()`. */
export const schedulesForPass = (schema: string): Statement =>
  statement(
    schema,
    "schedules_for_pass",
    `SELECT name, cron, timezone, catch_up AS "catchUp", last_tick AS "lastTick", now() AS "dbNow"
     FROM $S.schedules ORDER BY name`,
  );

/**
 * Enqueues a schedule's due ticks, one job each, and moves its `last_tick` on, in one statement.
 * $1 name, $2 the `last_tick` the pass read, $3 and $4 the cron and zone it computed with, $5 the
 * new `last_tick`, $6 the ticks (timestamptz[], oldest first; may be empty when every due tick was
 * skipped).
 *
 * Compare and set: the row moves only from what the pass read, with the expression it read; a
 * concurrent pass that got there first (or a changed schedule) leaves the update without a row,
 * and so the insert without any. Each job carries the key `schedule:<name>@<tick>` (UTC, ms), and
 * the unique key index drops a tick's second job whatever happens (ON CONFLICT DO NOTHING). Its
 * fingerprint is the one an enqueue of the same body with `runAt` = the tick computes
 * (sql/enqueue.ts `enqueueKeyedJobs`), so such an enqueue answers the tick's job. `run_at` is the
 * tick, or now for a tick already past. The insert trigger wakes the workers of the type.
 * Returns the new jobs' ids.
 */
export const enqueueScheduleTicks = (schema: string): Statement =>
  statement(
    schema,
    "enqueue_schedule_ticks",
    `WITH advanced AS (
       UPDATE $S.schedules SET last_tick = $5::timestamptz
       WHERE name = $1::text AND last_tick = $2::timestamptz AND cron = $3::text AND timezone = $4::text
       RETURNING name, type, payload, coalesce((options->>'priority')::smallint, 5) AS priority,
                 coalesce((options->>'max_retries')::int, 3) AS max_retries
     )
     INSERT INTO $S.jobs (type, payload, priority, max_retries, run_at, idempotency_key, idempotency_fingerprint)
     SELECT a.type, a.payload, a.priority, a.max_retries, greatest(t.tick, now()),
            'schedule:' || a.name || '@' || to_char(t.tick AT TIME ZONE 'UTC', 'YYYY-MM-DD"T"HH24:MI:SS.MS"Z"'),
            decode(md5(jsonb_build_array(a.type, a.payload, a.priority, a.max_retries, extract(epoch FROM t.tick))::text), 'hex')
     FROM advanced a CROSS JOIN unnest($6::timestamptz[]) WITH ORDINALITY AS t(tick, ord)
     ORDER BY t.ord
     ON CONFLICT (idempotency_key) WHERE idempotency_key IS NOT NULL DO NOTHING
     RETURNING id`,
  );
