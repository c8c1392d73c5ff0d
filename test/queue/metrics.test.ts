/** Metrics come from counters kept by triggers (DESIGN.md §8): exact, and cheap to read. */
import assert from "node:assert/strict";
import { after, before, it } from "node:test";
import type { TestLockSession as LockSession } from "../helpers/db.js";
import { createTestDb, type TestDb } from "../helpers/db.js";

let db: TestDb;
let session: LockSession;
before(async () => {
  db = await createTestDb();
  session = await db.openLockSession("metrics-worker");
});
after(async () => {
  await db.drop();
});

it("depth, rates, error rate and execution time match what happened", async () => {
  await db.ledger.addJobs(Array.from({ length: 6 }, () => ({ type: "m", maxRetries: 1 })));
  const cancelled = await db.ledger.addJob({ type: "other" });
  await db.ledger.cancelJob(cancelled.id);
  const claimed = await session.claim(["m"], 5);
  assert.equal(claimed.length, 5);
  const [a, b, c, d, e] = claimed as [
    (typeof claimed)[0],
    (typeof claimed)[0],
    (typeof claimed)[0],
    (typeof claimed)[0],
    (typeof claimed)[0],
  ];
  await session.complete([a, b, c].map((j) => ({ id: j.id, attempt: 0, resultJson: "null", runMs: 2000 })));
  const policy = { backoffBaseSeconds: 60, backoffMaxSeconds: 60, backoffJitter: false };
  await session.fail(
    [d, e].map((j) => ({ id: j.id, attempt: 0, error: "x", runMs: 1 })),
    policy,
  );

  const metrics = await db.ledger.metrics(30);
  assert.deepEqual(metrics.depth, { pending: 3, claimed: 0, running: 0, done: 3, dead: 0, cancelled: 1 });
  assert.equal(metrics.jobsPerSecond, 3 / 60);
  assert.equal(metrics.errorRate, 2 / 5);
  assert.ok(metrics.averageExecutionSeconds !== null && Math.abs(metrics.averageExecutionSeconds - 2) < 0.05);
  assert.equal(metrics.executionSecondsQuantiles.samples, 3);
  assert.equal(metrics.deadLetterCount, 0);
  assert.equal(metrics.activeWorkers, 0);

  // The counters agree with a full count, whatever path the rows took.
  const rows = await db.sql<{ status: string; n: number }>(
    "SELECT status, count(*)::int AS n FROM jobs GROUP BY status",
  );
  for (const { status, n } of rows) assert.equal(metrics.depth[status as keyof typeof metrics.depth], n);
  await db.sql("DELETE FROM jobs WHERE status = 'done'");
  assert.equal((await db.ledger.metrics(30)).depth.done, 0);
});

it("execution-time quantiles of the window come from the histogram, within 9 %", async () => {
  const fresh = await createTestDb();
  try {
    const worker = await fresh.openLockSession("quantile-worker");
    await fresh.ledger.addJobs(Array.from({ length: 100 }, () => ({ type: "q" })));
    const claimed = await worker.claim(["q"], 100);
    assert.equal(claimed.length, 100);
    // Run times 10 ms, 20 ms, … 1000 ms, unsorted; none marked running, so started_at comes from them.
    await worker.complete(
      claimed.map((j, i) => ({
        id: j.id,
        attempt: 0,
        resultJson: "null",
        runMs: ((i * 37) % 100) * 10 + 10,
      })),
    );
    const { p50, p90, p99, samples } = (await fresh.ledger.metrics(30)).executionSecondsQuantiles;
    assert.equal(samples, 100);
    for (const [estimate, exact] of [
      [p50, 0.5],
      [p90, 0.9],
      [p99, 0.99],
    ] as const) {
      assert.ok(estimate !== null && Math.abs(estimate - exact) <= 0.09 * exact, `${estimate} for ${exact}`);
    }
    // Jobs that took the same time get their exact time back.
    await fresh.ledger.addJobs(Array.from({ length: 1000 }, () => ({ type: "same" })));
    const same = await worker.claim(["same"], 1000);
    await worker.complete(same.map((j) => ({ id: j.id, attempt: 0, resultJson: "null", runMs: 3000 })));
    const after = (await fresh.ledger.metrics(30)).executionSecondsQuantiles;
    assert.equal(after.samples, 1100);
    assert.ok(after.p50 !== null && Math.abs(after.p50 - 3) < 1e-6, `p50 ${after.p50}`);
  } finally {
    await fresh.drop();
  }
});

it("the counters agree with a full count after every kind of state change", async () => {
  const fresh = await createTestDb();
  try {
    const worker = await fresh.openLockSession("counting-worker");
    const counted = async (step: string) => {
      const rows = await fresh.sql<{ status: string; n: number }>(
        "SELECT status, count(*)::int AS n FROM jobs GROUP BY status",
      );
      const actual = { pending: 0, claimed: 0, running: 0, done: 0, dead: 0, cancelled: 0 };
      for (const { status, n } of rows) actual[status as keyof typeof actual] = n;
      assert.deepEqual((await fresh.ledger.metrics(30)).depth, actual, `after ${step}`);
    };
    const policy = { backoffBaseSeconds: 0, backoffMaxSeconds: 0, backoffJitter: false };
    await fresh.ledger.addJobs(Array.from({ length: 12 }, () => ({ type: "c", maxRetries: 1 })));
    await counted("enqueue");
    const [a, b, c, d, e, f, g] = await worker.claim(["c"], 7);
    if (!a || !b || !c || !d || !e || !f || !g) throw new Error("expected seven claimed jobs");
    await counted("claim");
    await worker.markRunning([a, b, c, d]);
    await counted("mark running");
    await worker.complete([{ id: a.id, attempt: 0, resultJson: "1", runMs: 1 }]);
    await counted("complete");
    await worker.fail([{ id: b.id, attempt: 0, error: "retry", runMs: 1 }], policy);
    await counted("fail with a retry left");
    const [again] = await worker.claim(["c"], 1);
    if (!again) throw new Error("expected the retried job");
    await worker.fail([{ id: again.id, attempt: again.attempt, error: "dies", runMs: 1 }], policy);
    await counted("fail with no retry left (dead-lettered)");
    await worker.release([{ id: c.id, attempt: 0 }]);
    await counted("release");
    await fresh.ledger.cancelJob((await fresh.ledger.addJob({ type: "c" })).id);
    await counted("cancel");
    // d, e, f, g lose their worker: its session ends (locks gone) and the heartbeat is old.
    await fresh.closeLockSessions();
    await fresh.sql("UPDATE jobs SET heartbeat_at = now() - interval '1 hour' WHERE id = ANY($1)", [
      [d.id, e.id, f.id, g.id],
    ]);
    assert.equal((await fresh.ledger.reapStale({ ...policy, staleThresholdSeconds: 60 })).length, 4);
    await counted("reap");
    await fresh.sql("DELETE FROM jobs WHERE status = 'dead'");
    await counted("delete");
  } finally {
    await fresh.drop();
  }
});
