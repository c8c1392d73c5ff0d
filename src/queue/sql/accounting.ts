/**
 * Counting in the statement that changes a job (schema version 2): each ledger statement that moves
 * jobs between statuses adds its own deltas to `job_counts` and `job_stats` through these data-
 * modifying CTEs, which PostgreSQL runs whether or not the outer query reads them. This replaces an
 * UPDATE trigger whose transition tables copied every old and new row (docs/performance.md).
 *
 * Counted statuses: pending, done, dead, cancelled (inserts and deletes count through triggers).
 * Held statuses (claimed, running) are counted live through jobs_stale_idx by the metrics query
 * (held jobs are bounded by the lock table).
 * Every statement that changes `status` must use {@link countStatuses}; test/queue/metrics.test.ts
 * checks the counters against a full count after every path.
 */

/**
 * A CTE body adding per-status deltas to job_counts. `deltas` is a query of `(status text,
 * n bigint)` rows; rows of one status are summed, zero sums are skipped. The slot spreads
 * concurrent writers over 16 rows per status (migration 0001).
 */
export const countStatuses = (deltas: string): string =>
  `INSERT INTO $S.job_counts AS c (status, slot, count)
       SELECT status, pg_backend_pid() % 16, sum(n) FROM (${deltas}) AS d(status, n)
       GROUP BY status HAVING sum(n) <> 0
       ON CONFLICT (status, slot) DO UPDATE SET count = c.count + excluded.count`;

/**
 * A CTE body adding finished attempts to this second's job_stats bucket: `done` and `failed`
 * counts and `execSeconds` (total execution seconds of done jobs), expressions over `source`.
 * Nothing is written when both counts are zero.
 */
export const recordStats = (p: {
  source: string;
  done: string;
  failed: string;
  execSeconds: string;
}): string =>
  `INSERT INTO $S.job_stats AS s (bucket, slot, done, failed, exec_seconds)
       SELECT date_trunc('second', now()), pg_backend_pid() % 16, ${p.done}, ${p.failed}, coalesce(${p.execSeconds}, 0)
       FROM ${p.source}
       HAVING ${p.done} + ${p.failed} > 0
       ON CONFLICT (bucket, slot) DO UPDATE
         SET done = s.done + excluded.done, failed = s.failed + excluded.failed,
             exec_seconds = s.exec_seconds + excluded.exec_seconds`;

/**
 * The execution-time bin of `secondsExpr` (schema version 3): floor(8 * log2(1 + microseconds)),
 * eight bins per doubling. The metrics query estimates quantiles from these bins.
 */
const executionBin = (secondsExpr: string): string =>
  `floor(8 * ln(1 + greatest(${secondsExpr}, 0) * 1e6) / ln(2))::smallint`;

/**
 * A CTE body adding the completed jobs of `source` (which has a column `exec_seconds`) to this
 * second's job_exec_bins rows, one row per execution-time bin: count and total seconds.
 */
export const recordExecutionBins = (source: string): string =>
  `INSERT INTO $S.job_exec_bins AS b (bucket, slot, bin, jobs, exec_seconds)
       SELECT date_trunc('second', now()), pg_backend_pid() % 16, ${executionBin("exec_seconds")}, count(*),
              sum(exec_seconds)
       FROM ${source}
       GROUP BY 3
       ON CONFLICT (bucket, slot, bin) DO UPDATE
         SET jobs = b.jobs + excluded.jobs, exec_seconds = b.exec_seconds + excluded.exec_seconds`;

/**
 * An expression: the distinct types (comma-separated, or NULL if none) of `source`'s rows that are
 * pending and due now, i.e. jobs that became claimable without an insert.
 */
export const dueTypes = (source: string): string =>
  `(SELECT string_agg(DISTINCT type, ',') FROM ${source} WHERE status = 'pending' AND run_at <= now())`;

/**
 * A subquery (one row, always) that NOTIFYs workers of the types among `source`'s rows that are
 * pending and due now (see {@link dueTypes}). Join it into the outer query (`CROSS JOIN (…) AS
 * woke`) so that it runs.
 */
export const wakeForDue = (source: string): string =>
  `(SELECT coalesce(sum($S.wake_workers(t)), 0) AS notified
       FROM (SELECT ${dueTypes(source)} AS t) AS due
       WHERE t IS NOT NULL)`;
