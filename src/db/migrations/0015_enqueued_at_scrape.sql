-- taskqueue schema, version 15: the insert trigger no longer counts `enqueued`.
--
-- Every insert statement added its jobs to job_totals' `enqueued` counter (version 8), an upsert
-- of one row per type and statement. Measured on an insert of 50 jobs, the size a burst of single
-- enqueues is batched into (one backend, 300 statements each committed, medians of 11 runs): 709
-- µs per statement at version 14, 691 at this version, 653 at version 4 (the rest of the difference
-- is the indexes and columns versions 5 to 14 added). The counter is now derived at scrape time from what
-- is kept anyway (src/metrics/database.ts): the jobs of a type still in the queue (pending, claimed
-- or running, read in the same statement as the totals) plus those that left it, each counted once
-- by the statement that moved it out (completed: the execution histogram's count; dead and
-- cancelled: job_totals). Read in one snapshot, every job is in exactly one of those places, so the
-- sum only grows; a dead job replayed to pending counts as enqueued again.
--
-- The stored `enqueued` rows are deleted: nothing of version 15 reads them. An API replica of
-- version 14 still serving scrapes after this migration reports `enqueued` as 0 from then on (a
-- counter reset, to Prometheus) until it is upgraded; everything else of version 14 works as before.

DELETE FROM :SCHEMA.job_totals WHERE event = 'enqueued';

CREATE OR REPLACE FUNCTION :SCHEMA.jobs_after_insert() RETURNS trigger LANGUAGE plpgsql AS $$
DECLARE
  inserted_types text;
BEGIN
  WITH inserted AS MATERIALIZED (
    SELECT type, status, count(*) AS n FROM new_jobs GROUP BY type, status
  ), counted AS (
    INSERT INTO :SCHEMA.job_counts AS c (status, slot, count)
      SELECT status, pg_backend_pid() % 16, sum(n) FROM inserted
      WHERE status NOT IN ('claimed', 'running') GROUP BY status
      ON CONFLICT (status, slot) DO UPDATE SET count = c.count + excluded.count
  )
  SELECT string_agg(DISTINCT type, ',') INTO inserted_types FROM inserted WHERE status = 'pending';
  IF inserted_types IS NOT NULL THEN
    PERFORM pg_notify(TG_ARGV[0], CASE WHEN octet_length(inserted_types) > 7000 THEN '*' ELSE inserted_types END);
  END IF;
  RETURN NULL;
END
$$;
