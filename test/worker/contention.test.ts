/**
 * Exactly-once under contention (DESIGN.md §5): three worker processes with concurrency 8 each
 * drain 3,000 jobs whose handler appends the job id to a table of its own.
 */
import assert from "node:assert/strict";
import { after, before, it } from "node:test";
import { createTestDb, type TestDb } from "../helpers/db.js";
import { type CliProcess, cliEnv, startCli, until } from "../helpers/process.js";

const JOBS = 3000;
let db: TestDb;
before(async () => {
  db = await createTestDb();
  await db.sql("CREATE TABLE executions (job_id bigint NOT NULL, attempt int NOT NULL, pid int NOT NULL)");
});
after(async () => {
  await db.drop();
});

it("3 worker processes x concurrency 8 run each of 3,000 jobs exactly once", async () => {
  const workers: CliProcess[] = [];
  for (let i = 0; i < 3; i++) {
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
        cliEnv(db, { WORKER_PREFETCH: "16" }),
      ),
    );
  }
  await Promise.all(workers.map((w) => w.waitForLog((l) => l.msg === "worker started")));
  for (let i = 0; i < JOBS; i += 1000)
    await db.ledger.addJobs(
      Array.from({ length: 1000 }, (_, k) => ({ type: "record", payload: { k: i + k } })),
    );
  await until(
    async () =>
      (await db.sql<{ n: number }>("SELECT count(*)::int AS n FROM jobs WHERE status = 'done'"))[0]?.n ===
      JOBS,
    120_000,
    "all jobs done",
  );
  for (const w of workers) w.child.kill("SIGTERM");
  assert.deepEqual(await Promise.all(workers.map((w) => w.exited)), [0, 0, 0]);

  const [counts] = await db.sql<{ rows: number; distinct_ids: number; pids: number }>(
    "SELECT count(*)::int AS rows, count(DISTINCT job_id)::int AS distinct_ids, count(DISTINCT pid)::int AS pids FROM executions",
  );
  assert.equal(counts?.rows, JOBS);
  assert.equal(counts?.distinct_ids, JOBS);
  assert.equal(counts?.pids, 3, "every process took part");
  const [statuses] = await db.sql<{ done: number; other: number; attempts: number }>(
    "SELECT count(*) FILTER (WHERE status = 'done')::int AS done, count(*) FILTER (WHERE status <> 'done')::int AS other, sum(attempt)::int AS attempts FROM jobs",
  );
  assert.deepEqual(statuses, { done: JOBS, other: 0, attempts: 0 });
  const [joined] = await db.sql<{ missing: number }>(
    "SELECT count(*)::int AS missing FROM jobs j WHERE NOT EXISTS (SELECT 1 FROM executions e WHERE e.job_id = j.id)",
  );
  assert.equal(joined?.missing, 0);
  assert.deepEqual(await db.ledger.heldJobLocks(), [], "no advisory lock outlives its job");
});
