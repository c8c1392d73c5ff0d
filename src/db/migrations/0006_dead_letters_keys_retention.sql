-- taskqueue schema, version 6: dead letters replayed and discarded, idempotency keys, retention.
--
-- dead_letter_jobs gains `replayed_at` (when its entry was last replayed: the job went back to
-- pending; NULL while the job waits dead) and `replays` (how many times). A replayed job that dies
-- again refreshes its entry (the failure statements' ON CONFLICT now updates the row instead of
-- leaving it), with `replayed_at` NULL again. `dead_letter_jobs_died_idx` serves the newest-first
-- list and the pruning of old entries; it costs a dead-lettering one index entry.
--
-- jobs gains `idempotency_key` (NULL unless the enqueue named one) and `idempotency_fingerprint`
-- (internal: a hash of the body enqueued under the key, to tell a repeated request from a
-- conflicting one). `jobs_idempotency_key_idx` is a partial unique index over keyed jobs only: an
-- insert without a key adds no entry to it, so enqueues without a key cost what they did. An
-- enqueue whose key is taken names the existing job through `ON CONFLICT … DO UPDATE`, which sees a
-- row committed by a concurrent transaction; `idempotency_conflict` aborts the statement (SQLSTATE
-- TQ409) when the bodies differ, so that a batch with one conflicting job writes nothing.
--
-- Adding columns without a default rewrites nothing. The unique index is built in the migration's
-- transaction (CREATE INDEX CONCURRENTLY cannot run in one): the upgrade blocks writes to jobs while
-- it reads the table once.
--
-- Workers of version 5 still running while the schema moves keep working: they name no keys and
-- read no new column. A replayed job that dies again under one keeps its entry as it was (DO
-- NOTHING, replayed_at set); a replay finds dead jobs by their status, so it still replays it.

ALTER TABLE :SCHEMA.dead_letter_jobs
  ADD COLUMN replayed_at timestamptz,
  ADD COLUMN replays integer NOT NULL DEFAULT 0;

CREATE INDEX dead_letter_jobs_died_idx ON :SCHEMA.dead_letter_jobs (died_at, job_id);

ALTER TABLE :SCHEMA.jobs
  ADD COLUMN idempotency_key text,
  ADD COLUMN idempotency_fingerprint bytea,
  ADD CONSTRAINT idempotency_key_length CHECK (length(idempotency_key) BETWEEN 1 AND 255);

CREATE UNIQUE INDEX jobs_idempotency_key_idx ON :SCHEMA.jobs (idempotency_key) WHERE idempotency_key IS NOT NULL;

-- Raised from an enqueue's ON CONFLICT clause when the job holding `key` was enqueued with another
-- body: the whole statement is refused. DETAIL is JSON naming the key and the existing job's id.
CREATE FUNCTION :SCHEMA.idempotency_conflict(key text, job_id bigint) RETURNS text LANGUAGE plpgsql AS $$
BEGIN
  RAISE EXCEPTION 'idempotency key % is taken by job %, enqueued with a different body', key, job_id
    USING ERRCODE = 'TQ409', DETAIL = json_build_object('key', key, 'job_id', job_id)::text;
END
$$;
