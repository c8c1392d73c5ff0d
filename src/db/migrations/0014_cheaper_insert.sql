-- taskqueue schema, version 14: an insert that costs what it did before version 8.
--
-- Measured (instructions of a PostgreSQL 15 backend, an insert of 1,000 jobs of one type): 44.8
-- million at version 4, 58.6 million at version 13. Two parts of that were the indexed type and the
-- insert trigger, which this migration makes cheap again (44.7 million, both together).
--
-- jobs_claim_idx is rebuilt led by hashtext(type), an int4, instead of the type itself. A claim
-- still reads one type's pending jobs in claim order (priority DESC, run_at, id), asking for
-- `hashtext(type) = hashtext(<type>) AND type = <type>` (src/queue/sql/claim.ts): the index gives
-- the hash's rows in claim order and the second test drops another type's rows in the rare case
-- that two types share a hash. Every comparison in the index was a text comparison first, and every
-- column after the text was found by walking the tuple; now they are fixed-width. The type itself
-- is an INCLUDE column, stored but never compared: the per-type counts of pending jobs (metrics,
-- the overview, `GET /types`) still read them from the index alone, now in hash order, and
-- aggregate by hashing (measured: the INCLUDE column costs an insert nothing). hashtext's values
-- are the same on every server and survive pg_upgrade (hash partitions and hash indexes rely on
-- the same).
--
-- jobs_after_insert reads the inserted rows once, grouped by type and status, and takes the three
-- things it writes (job_counts, job_totals' `enqueued`, the wake-up NOTIFY) from those groups:
-- it read the transition table three times.
--
-- The new index is built under another name first, in the migration's transaction (CREATE INDEX
-- CONCURRENTLY cannot run in one): that blocks writes to jobs, not reads, while it reads the table
-- once; only the drop of the old index and the rename, at the end, lock the table against reads,
-- until the migration commits. Workers of version 13 still running while the schema moves keep
-- claiming with their own statement, which the new index does not serve: each claim then reads
-- the pending jobs in full until those workers are replaced.

CREATE INDEX jobs_claim_idx_v14 ON :SCHEMA.jobs (hashtext(type), priority DESC, run_at, id) INCLUDE (type)
  WHERE status = 'pending' AND NOT run_alone;
DROP INDEX :SCHEMA.jobs_claim_idx;
ALTER INDEX :SCHEMA.jobs_claim_idx_v14 RENAME TO jobs_claim_idx;

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
  ), enqueued AS (
    INSERT INTO :SCHEMA.job_totals AS t (type, event, shard, count)
      SELECT type, 'enqueued', pg_backend_pid() % 16, sum(n) FROM inserted GROUP BY type
      ON CONFLICT (type, event, shard) DO UPDATE SET count = t.count + excluded.count
  )
  SELECT string_agg(DISTINCT type, ',') INTO inserted_types FROM inserted WHERE status = 'pending';
  IF inserted_types IS NOT NULL THEN
    PERFORM pg_notify(TG_ARGV[0], CASE WHEN octet_length(inserted_types) > 7000 THEN '*' ELSE inserted_types END);
  END IF;
  RETURN NULL;
END
$$;
