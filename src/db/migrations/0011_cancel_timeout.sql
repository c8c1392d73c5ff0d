-- taskqueue schema, version 11: cancelling running jobs and per-job timeouts (issue 14, items 3–4).
--
-- `timeout_seconds`: how long one attempt of the job may run, in whole seconds (1 to 604800, one
-- week); NULL: the worker's default (JOB_TIMEOUT_SECONDS), or no bound when that is unset. At the
-- deadline the worker aborts the handler's AbortSignal and writes a failed attempt that says so.
--
-- Cancelling a claimed or running job needs no column: the cancel statement moves the row to
-- `cancelled` itself (a write fenced on the held statuses, so it cannot race the worker's outcome,
-- which is fenced on them too) and NOTIFYs `cancel:<id>` on the workers' channel through
-- wake_workers(); the owning worker aborts the handler, and its heartbeat finds the row no longer
-- held if the NOTIFY was missed. Additive: workers of version 10 keep working (they see a cancelled
-- running job as a lost claim).

ALTER TABLE :SCHEMA.jobs
  ADD COLUMN timeout_seconds integer,
  ADD CONSTRAINT timeout_seconds_in_range CHECK (timeout_seconds BETWEEN 1 AND 604800);
