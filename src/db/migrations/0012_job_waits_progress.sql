-- taskqueue schema, version 12: waiting for a job's outcome, and progress (issue 13, item 4).
--
-- `progress` (jsonb, NULL until a handler reports one): the latest value a handler reported with
-- `job.progress(value)`, written by a fenced update (only the claim holder's attempt changes it).
-- It keeps the last value reported, whichever attempt reported it.
--
-- `watched` (NULL until someone waits, then true): set by `waitForJob` (and GET /jobs/{id}?wait=)
-- as it reads the job. NULL, not `NOT NULL DEFAULT false`, so that an insert stores nothing more
-- (both new columns are NULL, in the row's null bitmap) and evaluates no default. Only a watched job's changes send a notification, so the drain of jobs nobody
-- waits for sends none: the row trigger below is queued only when its WHEN clause holds, which is
-- evaluated on the updated row and costs no function call otherwise. Once set it stays set.
--
-- The trigger sends the job's id (a few bytes, far below NOTIFY's 8,000-byte limit) on channel
-- `taskqueue_wait_<schema>` (cut to 63 bytes, PostgreSQL's longest channel name; two schemas
-- whose names share those bytes only cost each other a re-read) when a watched job reaches a final
-- state (done, dead, cancelled) or its progress changes. It fires on every path that ends a job:
-- the worker's completion and failure, a handler's transactional completion (the notification
-- leaves at the app's commit), the reaper, and cancel. The waiter then reads the row.
--
-- Additive: workers of version 11 still running while the schema moves never write progress, and
-- their completions of watched jobs notify as well (the trigger is the table's).

ALTER TABLE :SCHEMA.jobs
  ADD COLUMN progress jsonb,
  ADD COLUMN watched  boolean;

CREATE FUNCTION :SCHEMA.jobs_notify_watchers() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN
  PERFORM pg_notify(left('taskqueue_wait_' || TG_TABLE_SCHEMA, 63), NEW.id::text);
  RETURN NULL;
END
$$;

CREATE TRIGGER jobs_notify_watchers AFTER UPDATE ON :SCHEMA.jobs
  FOR EACH ROW
  WHEN (NEW.watched AND (
    (NEW.status IN ('done', 'dead', 'cancelled') AND NEW.status IS DISTINCT FROM OLD.status)
    OR NEW.progress IS DISTINCT FROM OLD.progress))
  EXECUTE FUNCTION :SCHEMA.jobs_notify_watchers();
