-- taskqueue schema, version 3: execution-time quantiles from a histogram, not from an index.
--
-- Versions 1 and 2 computed the quantiles of /metrics from the most recent finished jobs, through
-- jobs_completed_idx. That index cost every completion one more index entry (about a tenth of a
-- completion's time, docs/performance.md) to serve a metrics query. From this version a completion
-- also adds its jobs to this second's rows of job_exec_bins, one row per execution-time bin:
-- bin floor(8 * log2(1 + microseconds)), eight bins per doubling. Each row keeps the count and the
-- sum of its jobs' seconds, so a quantile is estimated by the mean of the bin it falls in (exact
-- when the bin's jobs took the same time, within 9 % otherwise).
--
-- Additive on purpose: job_stats keeps its shape, so workers of version 2 still running while the
-- schema moves to 3 keep writing their counters (their completions just add no bins); their
-- metrics query, which read jobs_completed_idx, still works without it, only slower.

CREATE TABLE :SCHEMA.job_exec_bins (
  bucket        timestamptz NOT NULL,
  slot          smallint    NOT NULL,
  bin           smallint    NOT NULL,
  jobs          bigint      NOT NULL,
  exec_seconds  float8      NOT NULL,
  PRIMARY KEY (bucket, slot, bin)
);

DROP INDEX :SCHEMA.jobs_completed_idx;
