-- taskqueue schema, version 8: counters and histograms by job type, kept in the database.
--
-- Prometheus counters must only grow and must not depend on which process is scraped, so they are
-- kept here, by the statements that change the jobs (the mechanism of version 2, see
-- src/queue/sql/accounting.ts), and not in a process's memory.
--
-- job_totals: events per job type since this version was applied: `enqueued` (insert trigger),
-- `retried` and `dead` (a failed attempt scheduled again or dead-lettered, by the failure and
-- reaper statements), `cancelled` (cancel statements) and `fenced` (late writes a worker could not
-- hand in, counted by the worker). Failed attempts are `retried` + `dead`; completions are the
-- count of the execution histogram. Spread over 16 shards per (type, event) by backend pid, as
-- job_counts, so that concurrent writers rarely wait on the same row.
--
-- job_histogram: completed jobs per type in fixed buckets of `execution` seconds (completed_at -
-- started_at) and `queue_wait` seconds (claimed_at - run_at: from due to claimed, of the attempt
-- that completed). `bucket` is the index of the first upper bound the value does not exceed (the
-- bounds are in src/queue/sql/accounting.ts; the last index is +Inf); `sum_seconds` the total.
-- Neither table is pruned: retention deletes jobs, not what was counted.
--
-- Additive: workers of version 7 still running while the schema moves keep working; their
-- completions and failures are simply not counted here.

CREATE TABLE :SCHEMA.job_totals (
  type   text     NOT NULL,
  event  text     NOT NULL,
  shard  smallint NOT NULL,
  count  bigint   NOT NULL,
  PRIMARY KEY (type, event, shard)
);

CREATE TABLE :SCHEMA.job_histogram (
  type         text     NOT NULL,
  metric       text     NOT NULL,
  bucket       smallint NOT NULL,
  shard        smallint NOT NULL,
  count        bigint   NOT NULL,
  sum_seconds  float8   NOT NULL,
  PRIMARY KEY (type, metric, bucket, shard)
);

CREATE OR REPLACE FUNCTION :SCHEMA.jobs_after_insert() RETURNS trigger LANGUAGE plpgsql AS $$
DECLARE
  inserted_types text;
BEGIN
  INSERT INTO :SCHEMA.job_counts AS c (status, slot, count)
    SELECT status, pg_backend_pid() % 16, count(*) FROM new_jobs
    WHERE status NOT IN ('claimed', 'running') GROUP BY status
    ON CONFLICT (status, slot) DO UPDATE SET count = c.count + excluded.count;
  INSERT INTO :SCHEMA.job_totals AS t (type, event, shard, count)
    SELECT type, 'enqueued', pg_backend_pid() % 16, count(*) FROM new_jobs GROUP BY type
    ON CONFLICT (type, event, shard) DO UPDATE SET count = t.count + excluded.count;
  SELECT string_agg(DISTINCT type, ',') INTO inserted_types FROM new_jobs WHERE status = 'pending';
  IF inserted_types IS NOT NULL THEN
    PERFORM pg_notify(TG_ARGV[0], CASE WHEN octet_length(inserted_types) > 7000 THEN '*' ELSE inserted_types END);
  END IF;
  RETURN NULL;
END
$$;
