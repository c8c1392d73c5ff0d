-- taskqueue schema, version 12: waiting for a job's outcome, and progress (issue 13, item 4).
--
-- `progress` (jsonb, NULL until a handler reports one): the latest value a handler reported with
-- `job.progress(value)`, written by a fenced update (only the claim holder's attempt changes it).
-- It keeps the last value reported, whichever attempt reported it.
--
-- `watched` (NULL until someone waits, then true): set by `waitForJob` (and GET /jobs/{id}?wait=)
-- as it reads the job. NULL, not `NOT NULL DEFAULT false`, so that an insert stores nothing more
-- (both new columns are NULL, in the row's null bitmap) and evaluates no default.
--
-- Only a watched job's changes notify: the statements that end a job (completion, failure to dead,
-- the reaper's dead letters, cancel) and the progress write send, in the same statement, the id of
-- each watched job they changed (a few bytes, far below NOTIFY's 8,000-byte limit) on channel
-- `taskqueue_wait_<schema>`, cut to 63 bytes (PostgreSQL's longest channel name; two schemas whose
-- names share those bytes only cost each other a re-read). The notification leaves at the commit,
-- so a handler's transactional completion notifies when the application commits. No trigger: a
-- row trigger, even one whose WHEN clause is false, makes PostgreSQL fetch the old version of every
-- updated row, and cost the drain about 9 % more CPU per job (bench:compare, interleaved A/B).
--
-- Additive: workers of version 11 still running while the schema moves never write progress, and
-- their completions of watched jobs do not notify (waits for those jobs end at their timeout).

ALTER TABLE :SCHEMA.jobs
  ADD COLUMN progress jsonb,
  ADD COLUMN watched  boolean;
