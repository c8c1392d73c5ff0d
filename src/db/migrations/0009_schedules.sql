-- taskqueue schema, version 9: cron schedules (issue 13, item 2).
--
-- One row per schedule, named by the user. `cron` is a 5- or 6-field cron expression (6: with
-- seconds) read in `timezone` (an IANA name), so that a schedule follows its zone's daylight saving
-- transitions. `type`, `payload` and `options` (`{"priority", "max_retries"}`) are the job each tick
-- enqueues. `last_tick` is the latest tick dealt with (enqueued, or skipped as a misfire): the next
-- pass looks at the ticks after it. A new schedule, or one whose cron or zone changes, starts at the
-- time of that write (whole milliseconds: the schedulers compare the value they read).
--
-- Exactly one job per tick, however many worker processes run the scheduler, without a leader:
-- every tick's job carries the idempotency key `schedule:<name>@<tick, UTC ISO-8601>`, and
-- `jobs_idempotency_key_idx` (migration 0006) is unique over keys, so a second insert of a tick
-- does nothing (ON CONFLICT DO NOTHING). The pass's insert also advances `last_tick` only from the
-- value it read (compare and set), so a process that lost the race inserts nothing at all. No
-- index is added to jobs: a schedule's jobs cost the key index one entry each.

CREATE TABLE :SCHEMA.schedules (
  name       text        PRIMARY KEY,
  cron       text        NOT NULL,
  timezone   text        NOT NULL DEFAULT 'UTC',
  type       text        NOT NULL,
  payload    jsonb       NOT NULL DEFAULT '{}',
  options    jsonb       NOT NULL DEFAULT '{}',
  catch_up   boolean     NOT NULL DEFAULT false,
  created_at timestamptz NOT NULL DEFAULT now(),
  updated_at timestamptz NOT NULL DEFAULT now(),
  last_tick  timestamptz NOT NULL DEFAULT date_trunc('milliseconds', now()),
  CONSTRAINT schedule_name_length CHECK (length(name) BETWEEN 1 AND 200),
  CONSTRAINT schedule_cron_length CHECK (length(cron) BETWEEN 1 AND 200),
  CONSTRAINT schedule_type_length CHECK (length(type) BETWEEN 1 AND 200)
);
