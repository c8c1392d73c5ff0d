/**
 * The stale reaper (DESIGN.md §6) and the fence (§5): held jobs with an old heartbeat and no lock
 * holder come back as a failed attempt; anything still owned, fresh or finished is left alone;
 * a worker that lost its claim cannot write over the new owner.
 */
import assert from "node:assert/strict";
import { after, before, beforeEach, describe, it } from "node:test";
import { createTestDb, type TestDb } from "../helpers/db.js";
import { waitForEvent } from "../helpers/events.js";
import { startWorker } from "../helpers/worker.js";

let db: TestDb;
const reapPolicy = () => ({ ...db.config, staleThresholdSeconds: 30 });

/** A job held by `worker_id` with a heartbeat `ageSeconds` old and no advisory lock (its worker died). */
async function orphanedJob(status: "claimed" | "running", ageSeconds: number, maxRetries = 3) {
  const job = await db.ledger.addJob({ type: "noop", maxRetries });
  await db.sql(
    `UPDATE jobs SET status = $2, worker_id = 'dead-worker', claimed_at = now() - make_interval(secs => $3),
       heartbeat_at = now() - make_interval(secs => $3), started_at = CASE WHEN $2 = 'running' THEN now() END
     WHERE id = $1`,
    [job.id, status, ageSeconds],
  );
  return job;
}

before(async () => {
  db = await createTestDb();
});
after(async () => {
  await db.drop();
});
beforeEach(async () => {
  await db.closeLockSessions();
  await db.sql("DELETE FROM jobs");
});

describe("stale reaper", () => {
  it("a reaped job due at once (no backoff) wakes the workers on the channel", async () => {
    await orphanedJob("running", 120);
    const listener = await db.pool.connect();
    try {
      await listener.query(`LISTEN "${db.config.notifyChannel}"`);
      const woken = new Promise<string | undefined>((resolve) =>
        listener.once("notification", (m) => resolve(m.payload)),
      );
      const reaped = await db.ledger.reapStale({ ...reapPolicy(), backoffBaseSeconds: 0 });
      assert.equal(reaped.length, 1);
      assert.equal(await woken, "noop");
    } finally {
      await listener.query("UNLISTEN *");
      listener.release();
    }
  });

  it("reclaims a stale running job as a failed attempt naming the lost worker", async () => {
    const job = await orphanedJob("running", 120);
    const reaped = await db.ledger.reapStale(reapPolicy());
    assert.deepEqual(
      reaped.map((j) => j.id),
      [job.id],
    );
    const after = await db.ledger.getJob(job.id);
    assert.equal(after?.status, "pending");
    assert.equal(after?.attempt, 1);
    assert.match(after?.error ?? "", /worker dead-worker lost the job/);
    assert.equal(after?.errors[0]?.worker_id, "dead-worker");
  });

  it("reclaims a stale claimed job", async () => {
    const job = await orphanedJob("claimed", 120);
    const reaped = await db.ledger.reapStale(reapPolicy());
    assert.deepEqual(
      reaped.map((j) => j.id),
      [job.id],
    );
    assert.equal((await db.ledger.getJob(job.id))?.status, "pending");
  });

  it("dead-letters a reclaimed job whose retries are exhausted", async () => {
    const job = await orphanedJob("running", 120, 0);
    await db.ledger.reapStale(reapPolicy());
    assert.equal((await db.ledger.getJob(job.id))?.status, "dead");
    assert.ok(await db.ledger.getDeadLetter(job.id));
  });

  it("leaves terminal jobs alone", async () => {
    const done = await db.ledger.addJob({ type: "noop" });
    const cancelled = await db.ledger.addJob({ type: "noop" });
    const dead = await db.ledger.addJob({ type: "noop" });
    await db.sql(
      "UPDATE jobs SET status = 'done', completed_at = now() - interval '1 hour', heartbeat_at = now() - interval '1 hour' WHERE id = $1",
      [done.id],
    );
    await db.sql(
      "UPDATE jobs SET status = 'cancelled', heartbeat_at = now() - interval '1 hour' WHERE id = $1",
      [cancelled.id],
    );
    await db.sql("UPDATE jobs SET status = 'dead', heartbeat_at = now() - interval '1 hour' WHERE id = $1", [
      dead.id,
    ]);
    assert.deepEqual(await db.ledger.reapStale(reapPolicy()), []);
    assert.deepEqual(
      (await db.sql<{ status: string }>("SELECT status FROM jobs ORDER BY id")).map((r) => r.status),
      ["done", "cancelled", "dead"],
    );
  });

  it("leaves a job with a fresh heartbeat alone", async () => {
    const job = await orphanedJob("running", 1);
    assert.deepEqual(await db.ledger.reapStale(reapPolicy()), []);
    assert.equal((await db.ledger.getJob(job.id))?.status, "running");
  });

  it("never hands out a stale job whose owner still holds the advisory lock", async () => {
    const job = await db.ledger.addJob({ type: "noop" });
    const owner = await db.openLockSession("slow-owner");
    const [claimed] = await owner.claim(["noop"], 1);
    assert.equal(claimed?.id, job.id);
    // The owner missed its heartbeats (a long GC pause), but its session is alive.
    await db.sql("UPDATE jobs SET heartbeat_at = now() - interval '1 hour' WHERE id = $1", [job.id]);
    assert.deepEqual(await db.ledger.reapStale(reapPolicy()), []);
    const after = await db.ledger.getJob(job.id);
    assert.equal(after?.status, "claimed");
    assert.equal(after?.workerId, "slow-owner");
    const other = await db.openLockSession("other");
    assert.deepEqual(await other.claim(["noop"], 1), []);
    // The owner finishes normally.
    const refused = await owner.complete([{ id: job.id, attempt: 0, resultJson: "1", runMs: 5 }]);
    assert.deepEqual(refused, []);
    assert.equal((await db.ledger.getJob(job.id))?.status, "done");
    assert.deepEqual(await db.ledger.heldJobLocks(), []);
  });

  it("a late completion from a worker that lost its claim changes nothing", async () => {
    const job = await db.ledger.addJob({ type: "noop" });
    const first = await db.openLockSession("first");
    const [claimed] = await first.claim(["noop"], 1);
    assert.equal(claimed?.id, job.id);
    // The first worker's session dies (locks released by PostgreSQL) but its process lives on.
    // pg_terminate_backend only signals unless given a timeout: wait until the backend has exited
    // and so released its locks.
    const pid = await first.backendPid();
    const [terminated] = await db.sql<{ gone: boolean }>("SELECT pg_terminate_backend($1, 10000) AS gone", [
      pid,
    ]);
    assert.equal(terminated?.gone, true);
    await db.sql("UPDATE jobs SET heartbeat_at = now() - interval '1 hour' WHERE id = $1", [job.id]);
    const reaped = await db.ledger.reapStale(reapPolicy());
    assert.deepEqual(
      reaped.map((j) => j.id),
      [job.id],
    );
    await db.sql("UPDATE jobs SET run_at = now() WHERE id = $1", [job.id]);
    const second = await db.openLockSession("second");
    const [again] = await second.claim(["noop"], 1);
    assert.equal(again?.attempt, 1);
    await second.complete([{ id: job.id, attempt: 1, resultJson: '"second"', runMs: 1 }]);
    // The first worker hands in its result late, on a fresh connection, with its old claim.
    const late = await db.openLockSession("first");
    const refused = await late.complete([{ id: job.id, attempt: 0, resultJson: '"first"', runMs: 1 }]);
    assert.deepEqual(refused, [job.id]);
    const final = await db.ledger.getJob(job.id);
    assert.equal(final?.status, "done");
    assert.equal(final?.result, "second");
    assert.equal(final?.workerId, "second");
  });

  it("concurrent reapers reclaim each stale job once", async () => {
    const jobs = await Promise.all(Array.from({ length: 20 }, () => orphanedJob("running", 120)));
    const passes = await Promise.all(Array.from({ length: 4 }, () => db.ledger.reapStale(reapPolicy())));
    const reapedIds = passes.flat().map((j) => j.id);
    assert.equal(reapedIds.length, jobs.length);
    assert.equal(new Set(reapedIds).size, jobs.length);
    const rows = await db.sql<{ attempt: number }>("SELECT attempt FROM jobs");
    assert.ok(rows.every((r) => r.attempt === 1));
  });

  it("end to end: a job orphaned by a dead worker is reaped and then run by a live worker", async () => {
    const job = await orphanedJob("running", 120);
    const worker = await startWorker(db, { runReaper: true, config: { staleThresholdSeconds: 1 } });
    try {
      const [reaped] = await waitForEvent<[{ jobs: { id: number }[] }]>(worker, "reaper:reaped", (e) =>
        e.jobs.some((j) => j.id === job.id),
      );
      assert.ok(reaped.jobs.length >= 1);
      await waitForEvent<[{ id: number }]>(worker, "job:completed", (e) => e.id === job.id);
      const after = await db.ledger.getJob(job.id);
      assert.equal(after?.status, "done");
      assert.equal(after?.attempt, 1);
      assert.equal(after?.workerId, worker.id);
    } finally {
      await worker.stop();
    }
  });

  it("the reaper loop shuts down cleanly with its worker", async () => {
    const worker = await startWorker(db, { runReaper: true });
    await waitForEvent(worker, "claim:returned");
    const report = await worker.stop();
    assert.deepEqual(report, { releasedJobIds: [], abandonedJobIds: [] });
    // No session of this worker is left open.
    const rows = await db.sql<{ n: number }>(
      "SELECT count(*)::int AS n FROM pg_stat_activity WHERE application_name LIKE '%' || $1 || '%'",
      [worker.id],
    );
    assert.equal(rows[0]?.n, 0);
    assert.deepEqual(await db.sql("SELECT id FROM workers WHERE id = $1", [worker.id]), []);
    assert.equal(await worker.stop(), report, "stop is idempotent");
  });
});
