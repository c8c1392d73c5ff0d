/**
 * Several lock sessions in one worker process (config `lockSessions`): each lane claims and
 * writes its own batches, and together they keep every guarantee of one worker.
 */
import assert from "node:assert/strict";
import { after, before, it } from "node:test";
import { createTestDb, type TestDb } from "../helpers/db.js";
import { waitForEvent, waitForEvents } from "../helpers/events.js";
import { startWorker } from "../helpers/worker.js";

let db: TestDb;
before(async () => {
  db = await createTestDb();
});
after(async () => {
  await db.drop();
});

it("two lock sessions run each of 2,000 jobs exactly once, each lane writing what it claimed", async () => {
  const runs = new Map<number, number>();
  const worker = await startWorker(db, {
    handlers: {
      count: (job) => {
        runs.set(job.id, (runs.get(job.id) ?? 0) + 1);
        return null;
      },
    },
    config: { lockSessions: 2, workerCount: 8, prefetch: 200 },
  });
  try {
    const allDone = waitForEvents(worker, "job:completed", 2000);
    await db.ledger.addJobs(Array.from({ length: 2000 }, () => ({ type: "count" })));
    await allDone;
    assert.equal(runs.size, 2000);
    assert.ok(
      [...runs.values()].every((n) => n === 1),
      "no job ran twice",
    );
    const lanes = await db.sql<{ worker_id: string; n: number }>(
      "SELECT worker_id, count(*)::int AS n FROM jobs WHERE status = 'done' GROUP BY worker_id ORDER BY worker_id",
    );
    assert.deepEqual(
      lanes.map((l) => l.worker_id),
      [`${worker.id}/1`, `${worker.id}/2`],
      "both lanes claimed and completed jobs, under their own ids",
    );
    assert.equal(
      lanes.reduce((sum, l) => sum + l.n, 0),
      2000,
    );
    const sessions = await db.sql<{ n: number }>(
      "SELECT count(*)::int AS n FROM pg_stat_activity WHERE application_name LIKE 'taskqueue lock session ' || $1 || '/%'",
      [worker.id],
    );
    assert.equal(sessions[0]?.n, 2, "one connection per lock session");
  } finally {
    const report = await worker.stop();
    assert.deepEqual(report, { releasedJobIds: [], abandonedJobIds: [] });
  }
  assert.deepEqual(await db.ledger.heldJobLocks(), [], "no advisory lock outlives the worker");
  assert.equal((await db.ledger.metrics(30)).activeWorkers, 0, "both lanes deleted their worker rows");
});

it("stopping a worker with two lock sessions gives back what each lane holds", async () => {
  const worker = await startWorker(db, {
    config: { lockSessions: 2, workerCount: 2, prefetch: 10, shutdownGraceSeconds: 0.2 },
  });
  let claimed = 0;
  const allClaimed = waitForEvent<[{ jobs: unknown[] }]>(worker, "job:claimed", (e) => {
    claimed += e.jobs.length;
    return claimed >= 10;
  });
  const jobs = await db.ledger.addJobs(
    Array.from({ length: 10 }, () => ({ type: "slow", payload: { sleep_seconds: 30 } })),
  );
  await allClaimed;
  const report = await worker.stop();
  assert.equal(report.abandonedJobIds.length, 2, "one running job per lane, aborted at the grace deadline");
  assert.deepEqual(
    [...report.releasedJobIds, ...report.abandonedJobIds].sort((a, b) => a - b),
    jobs.map((j) => j.id).sort((a, b) => a - b),
  );
  const pending = await db.sql<{ n: number }>("SELECT count(*)::int AS n FROM jobs WHERE status = 'pending'");
  assert.equal(pending[0]?.n, 10);
  assert.deepEqual(await db.ledger.heldJobLocks(), []);
});
