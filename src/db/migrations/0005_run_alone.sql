-- taskqueue schema, version 5: jobs reclaimed from a lost worker run alone.
--
-- A worker process that dies (a handler calling process.exit, a throw from a timer, SIGKILL) loses
-- every job it held, and up to version 4 the reaper counted a failed attempt on each of them: one
-- poison job dead-lettered its innocent neighbours. From this version the reaper gives a job that
-- shared its lost process with other jobs back without counting an attempt, due at once, with
-- run_alone set: a worker process runs such a job only while it holds no other job, and claims
-- nothing else meanwhile. A run-alone job lost again is the culprit: that loss counts a failed
-- attempt. The flag clears when a handler's outcome is written (done, or a failed attempt).
-- DESIGN.md §6 has the rule and its bound.
--
-- Adding a column with a constant default rewrites nothing. The new partial index holds only the
-- pending run-alone jobs (usually none), so that a claim can tell whether one is due with one probe;
-- jobs_claim_idx is rebuilt without them. Both are built in the migration's transaction (CREATE
-- INDEX CONCURRENTLY cannot run in one): the upgrade blocks writes to jobs while it reads the table
-- twice.
--
-- Workers of version 4 still running while the schema moves ignore the flag: they claim run-alone
-- jobs as ordinary ones and their reaper counts an attempt for every loss, as before.

ALTER TABLE :SCHEMA.jobs ADD COLUMN run_alone boolean NOT NULL DEFAULT false;

CREATE INDEX jobs_alone_idx ON :SCHEMA.jobs (priority DESC, run_at, id) WHERE status = 'pending' AND run_alone;

-- The ordinary claim never takes a run-alone job: the claim index leaves them out, so that the claim
-- walks it as before, and so that the probe for run-alone jobs can only use jobs_alone_idx.
DROP INDEX :SCHEMA.jobs_claim_idx;
CREATE INDEX jobs_claim_idx ON :SCHEMA.jobs (priority DESC, run_at, id) WHERE status = 'pending' AND NOT run_alone;
