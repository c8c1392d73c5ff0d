-- taskqueue schema, version 3: execution-time quantiles from a histogram in job_stats.
--
-- Versions 1 and 2 computed the quantiles of /metrics from the most recent finished jobs, through
-- jobs_completed_idx. That index cost every completion one more index entry (about a tenth of a
-- completion's time, docs/performance.md) to serve a metrics query. From this version a completion
-- adds its jobs to this second's job_stats rows, one row per execution-time bin: bin
-- floor(8 * log2(1 + microseconds)), eight bins per doubling. Each row keeps the count and the sum
-- of its jobs' seconds, so a quantile is estimated by the mean of the bin it falls in (exact when
-- the bin's jobs took the same time, within 9 % otherwise). Rows of failed attempts, and rows
-- written before this version, have bin -1.

ALTER TABLE :SCHEMA.job_stats ADD COLUMN bin smallint NOT NULL DEFAULT -1;
ALTER TABLE :SCHEMA.job_stats DROP CONSTRAINT job_stats_pkey;
ALTER TABLE :SCHEMA.job_stats ADD PRIMARY KEY (bucket, slot, bin);
DROP INDEX :SCHEMA.jobs_completed_idx;
