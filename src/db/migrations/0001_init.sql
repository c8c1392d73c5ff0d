-- taskqueue schema, version 1 (DESIGN.md §3).
-- :SCHEMA is replaced by the quoted schema identifier, :NOTIFY_CHANNEL by the quoted channel literal.

CREATE TABLE :SCHEMA.jobs (
  id            bigint GENERATED ALWAYS AS IDENTITY PRIMARY KEY,
  type          text        NOT NULL,
  payload       jsonb       NOT NULL DEFAULT '{}'::jsonb,
  status        text        NOT NULL DEFAULT 'pending',
  priority      smallint    NOT NULL DEFAULT 5,
  attempt       integer     NOT NULL DEFAULT 0,
  max_retries   integer     NOT NULL DEFAULT 3,
  run_at        timestamptz NOT NULL DEFAULT now(),
  claimed_at    timestamptz,
  started_at    timestamptz,
  heartbeat_at  timestamptz,
  completed_at  timestamptz,
  result        jsonb,
  error         text,
  errors        jsonb       NOT NULL DEFAULT '[]'::jsonb,
  worker_id     text,
  created_at    timestamptz NOT NULL DEFAULT now(),
  CONSTRAINT type_length CHECK (length(type) BETWEEN 1 AND 200),
  CONSTRAINT status_known CHECK (status IN ('pending', 'claimed', 'running', 'done', 'dead', 'cancelled')),
  CONSTRAINT priority_in_range CHECK (priority BETWEEN 1 AND 10),
  CONSTRAINT attempt_not_negative CHECK (attempt >= 0),
  CONSTRAINT max_retries_in_range CHECK (max_retries BETWEEN 0 AND 10),
  CONSTRAINT errors_is_array CHECK (jsonb_typeof(errors) = 'array'),
  CONSTRAINT held_jobs_have_owner CHECK (status NOT IN ('claimed', 'running') OR (worker_id IS NOT NULL AND heartbeat_at IS NOT NULL))
);

-- Claiming: pending jobs in claim order. Stays small however large the done/dead history grows.
CREATE INDEX jobs_claim_idx ON :SCHEMA.jobs (priority DESC, run_at, id) WHERE status = 'pending';
-- Reaping: held jobs by heartbeat age.
CREATE INDEX jobs_stale_idx ON :SCHEMA.jobs (heartbeat_at) WHERE status IN ('claimed', 'running');
-- Metrics: jobs finished in a trailing window.
CREATE INDEX jobs_completed_idx ON :SCHEMA.jobs (completed_at) WHERE status IN ('done', 'dead');

CREATE TABLE :SCHEMA.dead_letter_jobs (
  job_id       bigint      PRIMARY KEY,
  type         text        NOT NULL,
  payload      jsonb       NOT NULL,
  priority     smallint    NOT NULL,
  max_retries  integer     NOT NULL,
  error        text,
  attempts     integer     NOT NULL,
  errors       jsonb       NOT NULL,
  worker_id    text,
  created_at   timestamptz NOT NULL,
  died_at      timestamptz NOT NULL DEFAULT now()
);

CREATE TABLE :SCHEMA.workers (
  id              text        PRIMARY KEY,
  host            text        NOT NULL,
  pid             integer     NOT NULL,
  types           text[]      NOT NULL,
  concurrency     integer     NOT NULL,
  fenced_writes   bigint      NOT NULL DEFAULT 0,
  started_at      timestamptz NOT NULL DEFAULT now(),
  heartbeat_at    timestamptz NOT NULL DEFAULT now()
);

-- Exact job counts per status, kept by statement-level triggers so that metrics never scan the
-- history. Spread over 16 slots per status (by backend pid) so concurrent writers rarely wait on
-- the same counter row.
CREATE TABLE :SCHEMA.job_counts (
  status  text     NOT NULL,
  slot    smallint NOT NULL,
  count   bigint   NOT NULL,
  PRIMARY KEY (status, slot)
);

-- Finished attempts per second (trailing-window metrics: jobs/s, error rate, mean execution time),
-- kept by the update trigger; the reaper deletes buckets older than an hour.
CREATE TABLE :SCHEMA.job_stats (
  bucket        timestamptz NOT NULL,
  slot          smallint    NOT NULL,
  done          bigint      NOT NULL,
  failed        bigint      NOT NULL,
  exec_seconds  float8      NOT NULL,
  PRIMARY KEY (bucket, slot)
);

-- One NOTIFY per inserting statement (not per row). Payload: the distinct types inserted,
-- comma-separated, or '*' when they do not fit in a notification.
CREATE FUNCTION :SCHEMA.jobs_after_insert() RETURNS trigger LANGUAGE plpgsql AS $$
DECLARE
  inserted_types text;
BEGIN
  INSERT INTO :SCHEMA.job_counts AS c (status, slot, count)
    SELECT status, pg_backend_pid() % 16, count(*) FROM new_jobs GROUP BY status
    ON CONFLICT (status, slot) DO UPDATE SET count = c.count + excluded.count;
  SELECT string_agg(DISTINCT type, ',') INTO inserted_types FROM new_jobs WHERE status = 'pending';
  IF inserted_types IS NOT NULL THEN
    PERFORM pg_notify(TG_ARGV[0], CASE WHEN length(inserted_types) > 7000 THEN '*' ELSE inserted_types END);
  END IF;
  RETURN NULL;
END
$$;

-- Keeps job_counts and job_stats exact, and wakes workers when jobs become due again without a
-- new insert (released at shutdown). Each transition table is aggregated once, without a join:
-- per status, the row count, the attempt sum and the execution seconds of done rows, counted
-- positive for new rows and negative for old ones. Attempts only grow on failure, so their net
-- change is the number of failed attempts.
CREATE FUNCTION :SCHEMA.jobs_after_update() RETURNS trigger LANGUAGE plpgsql AS $$
DECLARE
  due_types text;
BEGIN
  WITH delta AS (
    SELECT status, count(*) AS n, sum(attempt) AS attempts,
           coalesce(sum(extract(epoch FROM completed_at - started_at)) FILTER (WHERE status = 'done'), 0) AS exec
    FROM new_jobs GROUP BY status
    UNION ALL
    SELECT status, -count(*), -sum(attempt),
           -coalesce(sum(extract(epoch FROM completed_at - started_at)) FILTER (WHERE status = 'done'), 0)
    FROM old_jobs GROUP BY status
  ), counted AS (
    INSERT INTO :SCHEMA.job_counts AS c (status, slot, count)
      SELECT status, pg_backend_pid() % 16, sum(n) FROM delta GROUP BY status HAVING sum(n) <> 0
      ON CONFLICT (status, slot) DO UPDATE SET count = c.count + excluded.count
  )
  INSERT INTO :SCHEMA.job_stats AS s (bucket, slot, done, failed, exec_seconds)
    SELECT date_trunc('second', now()), pg_backend_pid() % 16,
           coalesce(sum(n) FILTER (WHERE status = 'done'), 0), sum(attempts), sum(exec)
    FROM delta
    HAVING coalesce(sum(n) FILTER (WHERE status = 'done'), 0) <> 0 OR sum(attempts) <> 0
    ON CONFLICT (bucket, slot) DO UPDATE
      SET done = s.done + excluded.done, failed = s.failed + excluded.failed,
          exec_seconds = s.exec_seconds + excluded.exec_seconds;
  IF EXISTS (SELECT 1 FROM new_jobs WHERE status = 'pending' AND run_at <= now()) THEN
    SELECT string_agg(DISTINCT n.type, ',') INTO due_types
      FROM new_jobs n JOIN old_jobs o ON o.id = n.id
      WHERE n.status = 'pending' AND o.status <> 'pending' AND n.run_at <= now();
    IF due_types IS NOT NULL THEN
      PERFORM pg_notify(TG_ARGV[0], CASE WHEN length(due_types) > 7000 THEN '*' ELSE due_types END);
    END IF;
  END IF;
  RETURN NULL;
END
$$;

CREATE FUNCTION :SCHEMA.jobs_after_delete() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN
  INSERT INTO :SCHEMA.job_counts AS c (status, slot, count)
    SELECT status, pg_backend_pid() % 16, -count(*) FROM old_jobs GROUP BY status
    ON CONFLICT (status, slot) DO UPDATE SET count = c.count + excluded.count;
  RETURN NULL;
END
$$;

CREATE FUNCTION :SCHEMA.jobs_after_truncate() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN
  DELETE FROM :SCHEMA.job_counts;
  RETURN NULL;
END
$$;

CREATE TRIGGER jobs_notify_insert AFTER INSERT ON :SCHEMA.jobs
  REFERENCING NEW TABLE AS new_jobs FOR EACH STATEMENT EXECUTE FUNCTION :SCHEMA.jobs_after_insert(:NOTIFY_CHANNEL);
CREATE TRIGGER jobs_count_update AFTER UPDATE ON :SCHEMA.jobs
  REFERENCING OLD TABLE AS old_jobs NEW TABLE AS new_jobs FOR EACH STATEMENT EXECUTE FUNCTION :SCHEMA.jobs_after_update(:NOTIFY_CHANNEL);
CREATE TRIGGER jobs_count_delete AFTER DELETE ON :SCHEMA.jobs
  REFERENCING OLD TABLE AS old_jobs FOR EACH STATEMENT EXECUTE FUNCTION :SCHEMA.jobs_after_delete();
CREATE TRIGGER jobs_count_truncate AFTER TRUNCATE ON :SCHEMA.jobs
  FOR EACH STATEMENT EXECUTE FUNCTION :SCHEMA.jobs_after_truncate();
