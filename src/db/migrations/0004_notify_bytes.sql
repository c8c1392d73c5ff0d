-- taskqueue schema, version 4: a notification's size is counted in bytes.
--
-- PostgreSQL refuses a NOTIFY payload of 8,000 bytes or more, and that refusal aborted the
-- statement that sent it: an insert whose distinct job types came to more than 8,000 bytes (25
-- types of 200 "é", each 400 bytes of UTF-8) was refused whole, although every job was valid.
-- Versions 1 to 3 compared length(), which counts characters, with 7,000. From this version the
-- insert trigger and wake_workers() compare octet_length(), bytes, so a payload that would not fit
-- is sent as '*' (wake every worker) instead. Replacing functions only: workers of version 3 keep
-- working while the schema moves.

CREATE OR REPLACE FUNCTION :SCHEMA.wake_workers(types text) RETURNS integer LANGUAGE plpgsql AS $$
BEGIN
  PERFORM pg_notify(:NOTIFY_CHANNEL, CASE WHEN octet_length(types) > 7000 THEN '*' ELSE types END);
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
    PERFORM pg_notify(TG_ARGV[0], CASE WHEN octet_length(inserted_types) > 7000 THEN '*' ELSE inserted_types END);
  END IF;
  RETURN NULL;
END
$$;
