/**
 * The core of the exactly-once contention test (test/worker/contention.test.ts), shared with the
 * PgBouncer session-mode test: worker processes of the real CLI drain jobs whose handler appends
 * the job id to a table of its own, then every job must have run exactly once, in every process,
 * and no advisory lock may outlive its job.
 */
import assert from "node:assert/strict";
import type { TestDb } from "./db.js";
import { type CliProcess, startCli, until } from "./process.js";

export interface ContentionOptions {
  /** Environment of the worker processes (cliEnv of the test database, a DATABASE_URL of a pooler...). */
  env: NodeJS.ProcessEnv;
  /** Jobs enqueued, in batches of 1,000. */
  jobs: number;
  /** Worker processes, each with concurrency 8 and prefetch 16. Default 3. */
  processes?: number;
  /** Bound on the drain, ms. Default 120 s. */
  timeoutMs?: number;
}

/** Creates the `executions` table the record handler writes to (call once, before {@link runContention}). */
export async function createExecutionsTable(db: TestDb): Promise<void> {
  await db.sql("CREATE TABLE executions (job_id bigint NOT NULL, attempt int NOT NULL, pid int NOT NULL)");
}

/** Runs the contention drain and asserts exactly-once execution (see the top of this file). */
export async function runContention(db: TestDb, options: ContentionOptions): Promise<void> {
  const { env, jobs } = options;
  const processes = options.processes ?? 3;
  const workers: CliProcess[] = [];
  for (let i = 0; i < processes; i++) {
    workers.push(
      startCli(
        [
          "worker",
          "--concurrency",
          "8",
          "--handlers",
          "dist/test/fixtures/record-handler.js",
          "--types",
          "record",
        ],
        { ...env, WORKER_PREFETCH: "16" },
      ),
    );
  }
  await Promise.all(workers.map((w) => w.waitForLog((l) => l.msg === "worker started")));
  for (let i = 0; i < jobs; i += 1000)
    await db.ledger.addJobs(
      Array.from({ length: Math.min(1000, jobs - i) }, (_, k) => ({ type: "record", payload: { k: i + k } })),
    );
  await until(
    async () =>
      (await db.sql<{ n: number }>("SELECT count(*)::int AS n FROM jobs WHERE status = 'done'"))[0]?.n ===
      jobs,
    options.timeoutMs ?? 120_000,
    "all jobs done",
  );
  for (const w of workers) w.child.kill("SIGTERM");
  assert.deepEqual(
    await Promise.all(workers.map((w) => w.exited)),
    workers.map(() => 0),
  );

  const [counts] = await db.sql<{ rows: number; distinct_ids: number; pids: number }>(
    "SELECT count(*)::int AS rows, count(DISTINCT job_id)::int AS distinct_ids, count(DISTINCT pid)::int AS pids FROM executions",
  );
  assert.equal(counts?.rows, jobs);
  assert.equal(counts?.distinct_ids, jobs);
  assert.equal(counts?.pids, processes, "every process took part");
  const [statuses] = await db.sql<{ done: number; other: number; attempts: number }>(
    "SELECT count(*) FILTER (WHERE status = 'done')::int AS done, count(*) FILTER (WHERE status <> 'done')::int AS other, sum(attempt)::int AS attempts FROM jobs",
  );
  assert.deepEqual(statuses, { done: jobs, other: 0, attempts: 0 });
  const [joined] = await db.sql<{ missing: number }>(
    "SELECT count(*)::int AS missing FROM jobs j WHERE NOT EXISTS (SELECT 1 FROM executions e WHERE e.job_id = j.id)",
  );
  assert.equal(joined?.missing, 0);
  assert.deepEqual(await db.ledger.heldJobLocks(), [], "no advisory lock outlives its job");
}
