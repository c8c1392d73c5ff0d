/**
 * Running alone on a busy worker (DESIGN.md §6): a worker process whose lanes hold ordinary jobs
 * learns from its claims that a run-alone job is due, stops claiming, drains, runs that job with
 * nothing beside it in any lane, then goes back to ordinary jobs.
 */
import assert from "node:assert/strict";
import { after, before, it } from "node:test";
import { setTimeout as sleep } from "node:timers/promises";
import { createTestDb, type TestDb } from "../helpers/db.js";
import { waitForEvents } from "../helpers/events.js";
import { startWorker } from "../helpers/worker.js";

let db: TestDb;
before(async () => {
  db = await createTestDb();
});
after(async () => {
  await db.drop();
});

it("a busy worker drains for a due run-alone job, runs it alone across its lanes, then resumes", async () => {
  const runs: { type: string; start: number; end: number }[] = [];
  const timed = (type: string, ms: number) => async () => {
    const start = performance.now();
    await sleep(ms);
    runs.push({ type, start, end: performance.now() });
    return null;
  };
  const worker = await startWorker(db, {
    builtins: false,
    handlers: { work: timed("work", 300), alone: timed("alone", 200) },
    config: { workerCount: 4, lockSessions: 2, pollIntervalSeconds: 0.2 },
  });
  try {
    const total = 8 + 1 + 4;
    const completed = waitForEvents(worker, "job:completed", total, () => true, 60_000);
    await db.ledger.addJobs(Array.from({ length: 8 }, () => ({ type: "work" })));
    // Inserted as run-alone (as the reaper leaves a job lost beside others), while the lanes are busy.
    const [alone] = await db.sql<{ id: number }>(
      "INSERT INTO jobs (type, run_alone) VALUES ('alone', true) RETURNING id",
    );
    const insertedAt = performance.now();
    await db.ledger.addJobs(Array.from({ length: 4 }, () => ({ type: "work" })));
    await completed;
    const aloneRun = runs.find((r) => r.type === "alone");
    assert.ok(aloneRun, "the run-alone job ran");
    for (const run of runs.filter((r) => r.type === "work"))
      assert.ok(
        run.end <= aloneRun.start || run.start >= aloneRun.end,
        "no job ran beside the run-alone job",
      );
    assert.ok(
      runs.some((r) => r.type === "work" && r.start >= aloneRun.end),
      "ordinary jobs resumed after it",
    );
    assert.ok(aloneRun.start - insertedAt < 10_000, "the busy worker got to it within its held jobs' time");
    const [row] = await db.sql<{ status: string; run_alone: boolean; attempt: number }>(
      "SELECT status, run_alone, attempt FROM jobs WHERE id = $1",
      [alone?.id],
    );
    assert.deepEqual(row, { status: "done", run_alone: false, attempt: 0 });
  } finally {
    await worker.stop();
  }
});
