-- taskqueue schema, version 2: state changes are counted by the statements that make them.
--
-- Version 1 kept job_counts and job_stats with a statement-level UPDATE trigger. A trigger with
-- transition tables makes PostgreSQL copy every old and every new row of every claim and every
-- completion into tuplestores; that was about a tenth of a drain's time (docs/performance.md).
-- From this version each ledger statement that changes a job's status adds its own deltas, in the
-- same statement (src/queue/sql/accounting.ts). Inserts, deletes and truncates keep their triggers.
--
-- 'claimed' and 'running' are no longer counters: held jobs are counted live through
-- jobs_stale_idx, which holds only them and is bounded by the server's lock table.

DROP TRIGGER jobs_count_update ON :SCHEMA.jobs;
DROP FUNCTION :SCHEMA.jobs_after_update();
DELETE FROM :SCHEMA.job_counts WHERE status IN ('claimed', 'running');

-- Wakes workers for jobs that became due without an insert (released at shutdown, reaped with no
-- backoff). The channel is baked in here and re-pointed by migrate() with the notify trigger.
-- Returns 1, so that a statement can count it and must run it.
CREATE FUNCTION :SCHEMA.wake_workers(types text) RETURNS integer LANGUAGE plpgsql AS $$
BEGIN
  PERFORM pg_notify(:NOTIFY_CHANNEL, CASE WHEN length(types) > 7000 THEN '*' ELSE types END);
  RETURN 1;
END
$$;

CREATE OR REPLACE FUNCTION :SCHEMA.jobs_after_insert() RETURNS trigger LANGUAGE plpgsql AS $$
DECLARE
  inserted_types text;
BEGIN
  INSERT INTO :SCHEMA.job_counts AS c (status, slot, count)
    SELECT status, pg_backend_pid() % 16, count(*) FROM new_jobs
    WHERE status NOT IN ('claimed', 'running') GROUP BY status
    ON CONFLICT (status, slot) DO UPDATE SET count = c.count + excluded.count;
  SELECT string_agg(DISTINCT type, ',') INTO inserted_types FROM new_jobs WHERE status = 'pending';
  IF inserted_types IS NOT NULL THEN
    PERFORM pg_notify(TG_ARGV[0], CASE WHEN length(inserted_types) > 7000 THEN '*' ELSE inserted_types END);
  END IF;
  RETURN NULL;
END
$$;

CREATE OR REPLACE FUNCTION :SCHEMA.jobs_after_delete() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN
  INSERT INTO :SCHEMA.job_counts AS c (status, slot, count)
    SELECT status, pg_backend_pid() % 16, -count(*) FROM old_jobs
    WHERE status NOT IN ('claimed', 'running') GROUP BY status
    ON CONFLICT (status, slot) DO UPDATE SET count = c.count + excluded.count;
  RETURN NULL;
END
$$;
