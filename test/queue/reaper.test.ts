/**
 * The stale reaper (DESIGN.md §6) and the fence (§5): held jobs with an old heartbeat and no lock
 * holder come back as a failed attempt; anything still owned, fresh or finished is left alone;
 * a worker that lost its claim cannot write over the new owner.
 */
import assert from "node:assert/strict";
import { after, before, beforeEach, describe, it } from "node:test";
import type pg from "pg";
import { createTestDb, type TestDb } from "../helpers/db.js";
import { waitForEvent } from "../helpers/events.js";
import { startWorker } from "../helpers/worker.js";

let db: TestDb;
const reapPolicy = () => ({ ...db.config, staleThresholdSeconds: 30 });

/**
 * A job held by `workerId` with a heartbeat `ageSeconds` old and no advisory lock (its worker died).
 * `runAlone`: it ran as a run-alone job (DESIGN.md §6).
 */
async function orphanedJob(
  status: "claimed" | "running",
  ageSeconds: number,
  maxRetries = 3,
  workerId = "dead-worker",
  runAlone = false,
) {
  const job = await db.ledger.addJob({ type: "noop", maxRetries });
  await orphan(job.id, status, ageSeconds, workerId, runAlone);
  return job;
}

/** Puts job `id` in the state {@link orphanedJob} describes. */
async function orphan(
  id: number,
  status: "claimed" | "running",
  ageSeconds: number,
  workerId: string,
  runAlone: boolean,
) {
  await db.sql(
    `UPDATE jobs SET status = $2, worker_id = $4, run_alone = $5, claimed_at = now() - make_interval(secs => $3),
       heartbeat_at = now() - make_interval(secs => $3), started_at = CASE WHEN $2 = 'running' THEN now() END
     WHERE id = $1`,
    [id, status, ageSeconds, workerId, runAlone],
  );
}

/** The payload of the next notification `listener` gets, or a failure after `timeoutMs`. */
function nextNotification(listener: pg.PoolClient, timeoutMs = 5000): Promise<string | undefined> {
  return new Promise((resolve, reject) => {
    const timer = setTimeout(() => reject(new Error(`no notification within ${timeoutMs} ms`)), timeoutMs);
    listener.once("notification", (m) => {
      clearTimeout(timer);
      resolve(m.payload);
    });
  });
}

/** A job's reclaim state: status, attempt, run-alone flag, and whether it is due now. */
async function reclaimState(id: number) {
  const [row] = await db.sql<{ status: string; attempt: number; run_alone: boolean; due: boolean }>(
    "SELECT status, attempt, run_alone, run_at <= now() AS due FROM jobs WHERE id = $1",
    [id],
  );
  return row;
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
      const woken = nextNotification(listener);
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
    // Each from a worker process of its own, so that each loss counts an attempt.
    const jobs = await Promise.all(
      Array.from({ length: 20 }, (_, i) => orphanedJob("running", 120, 3, `dead-worker-${i}`)),
    );
    const passes = await Promise.all(Array.from({ length: 4 }, () => db.ledger.reapStale(reapPolicy())));
    const reapedIds = passes.flat().map((j) => j.id);
    assert.equal(reapedIds.length, jobs.length);
    assert.equal(new Set(reapedIds).size, jobs.length);
    const rows = await db.sql<{ attempt: number }>("SELECT attempt FROM jobs");
    assert.ok(rows.every((r) => r.attempt === 1));
  });

  it("concurrent reapers free the jobs of one lost process once each, none counted", async () => {
    const jobs = await Promise.all(
      Array.from({ length: 20 }, (_, i) => orphanedJob("running", 120, 3, `host:7:abc/${(i % 3) + 1}`)),
    );
    const passes = await Promise.all(Array.from({ length: 4 }, () => db.ledger.reapStale(reapPolicy())));
    const reapedIds = passes.flat().map((j) => j.id);
    assert.equal(new Set(reapedIds).size, jobs.length);
    assert.equal(reapedIds.length, jobs.length);
    const rows = await db.sql<{ attempt: number; run_alone: boolean }>("SELECT attempt, run_alone FROM jobs");
    assert.ok(rows.every((r) => r.attempt === 0 && r.run_alone));
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

describe("lost jobs (DESIGN.md §6): neighbours run alone, culprits count", () => {
  it("jobs lost with neighbours count no attempt: pending, due at once, run alone, and woken", async () => {
    // Three lanes of one worker process (ids share the part before '/'), one job each.
    const jobs = [
      await orphanedJob("running", 120, 0, "host:41:f00/1"),
      await orphanedJob("running", 120, 0, "host:41:f00/2"),
      await orphanedJob("claimed", 120, 0, "host:41:f00/3"),
    ];
    const listener = await db.pool.connect();
    try {
      await listener.query(`LISTEN "${db.config.notifyChannel}"`);
      const woken = nextNotification(listener);
      // A long backoff: nothing of it may apply.
      const reaped = await db.ledger.reapStale({ ...reapPolicy(), backoffBaseSeconds: 600 });
      assert.equal(reaped.length, 3);
      assert.equal(await woken, "noop");
    } finally {
      await listener.query("UNLISTEN *");
      listener.release();
    }
    for (const job of jobs)
      assert.deepEqual(await reclaimState(job.id), {
        status: "pending",
        attempt: 0,
        run_alone: true,
        due: true,
      });
    // Not a failed attempt: no history entry, and no dead letter although max_retries is 0.
    assert.deepEqual(
      await db.sql("SELECT job_id FROM dead_letter_jobs WHERE job_id = ANY($1)", [jobs.map((j) => j.id)]),
      [],
    );
    assert.deepEqual((await db.ledger.getJob(jobs[0]?.id ?? 0))?.errors, []);
  });

  it("a job lost while running alone counts a failed attempt with its backoff, and keeps running alone", async () => {
    const job = await orphanedJob("running", 120, 1, "host:42:f00", true);
    await db.ledger.reapStale({ ...reapPolicy(), backoffBaseSeconds: 600 });
    assert.deepEqual(await reclaimState(job.id), {
      status: "pending",
      attempt: 1,
      run_alone: true,
      due: false,
    });
    assert.match(
      (await db.ledger.getJob(job.id))?.error ?? "",
      /worker host:42:f00 lost the job: .*\(it ran alone\)/,
    );
    // Lost alone again, retries exhausted: dead-lettered, the loss named.
    await orphan(job.id, "running", 120, "host:43:f00", true);
    await db.ledger.reapStale(reapPolicy());
    assert.equal((await reclaimState(job.id))?.status, "dead");
    assert.match((await db.ledger.getDeadLetter(job.id))?.error ?? "", /worker host:43:f00 lost the job/);
  });

  it("bounded: a job lost again and again beside neighbours is dead-lettered after its retries", async () => {
    const maxRetries = 3;
    const culprit = await orphanedJob("running", 120, maxRetries, "host:50:f00");
    let reclaims = 0;
    for (let round = 1; (await reclaimState(culprit.id))?.status !== "dead"; round++) {
      assert.ok(round <= 20, "the job reached the dead-letter table");
      // A fresh neighbour in the same process each time, lost with it.
      await orphanedJob("running", 120, maxRetries, `host:50:r${round}`);
      await orphan(
        culprit.id,
        "running",
        120,
        `host:50:r${round}`,
        (await reclaimState(culprit.id))?.run_alone ?? false,
      );
      await db.ledger.reapStale({ ...reapPolicy(), backoffBaseSeconds: 0 });
      reclaims++;
    }
    assert.ok(reclaims <= maxRetries + 2, `${reclaims} reclaims before the dead-letter table`);
    assert.equal((await db.ledger.getDeadLetter(culprit.id))?.attempts, maxRetries + 1);
    const neighbours = await db.sql<{ attempt: number }>("SELECT attempt FROM jobs WHERE id <> $1", [
      culprit.id,
    ]);
    assert.ok(
      neighbours.every((n) => n.attempt === 0),
      "no neighbour lost an attempt",
    );
  });

  it("a job found stale after its process's other jobs were freed is freed too", async () => {
    const first = await orphanedJob("running", 120, 3, "host:60:f00/1");
    const second = await orphanedJob("running", 120, 3, "host:60:f00/2");
    // Claimed after the process's last heartbeat: not stale yet when the others are reclaimed.
    const late = await orphanedJob("claimed", 5, 3, "host:60:f00/1");
    assert.equal((await db.ledger.reapStale(reapPolicy())).length, 2);
    await db.sql("UPDATE jobs SET heartbeat_at = now() - interval '2 minutes' WHERE id = $1", [late.id]);
    assert.deepEqual(
      (await db.ledger.reapStale(reapPolicy())).map((j) => j.id),
      [late.id],
    );
    for (const job of [first, second, late])
      assert.deepEqual(await reclaimState(job.id), {
        status: "pending",
        attempt: 0,
        run_alone: true,
        due: true,
      });
  });

  it("a run-alone job's written outcome clears the flag: a failure is an ordinary retry, a completion done", async () => {
    const failing = await db.ledger.addJob({ type: "noop" });
    const passing = await db.ledger.addJob({ type: "noop" });
    await db.sql("UPDATE jobs SET run_alone = true WHERE id = ANY($1)", [[failing.id, passing.id]]);
    const session = await db.openLockSession("alone-worker");
    const first = await session.claimAlone(["noop"]);
    assert.equal(first?.id, failing.id);
    const policy = { backoffBaseSeconds: 0, backoffMaxSeconds: 0, backoffJitter: false };
    await session.fail([{ id: failing.id, attempt: 0, error: "boom", runMs: 1 }], policy);
    assert.deepEqual(await reclaimState(failing.id), {
      status: "pending",
      attempt: 1,
      run_alone: false,
      due: true,
    });
    const second = await session.claimAlone(["noop"]);
    assert.equal(second?.id, passing.id);
    await session.complete([{ id: passing.id, attempt: 0, resultJson: "1", runMs: 1 }]);
    assert.deepEqual(await reclaimState(passing.id), {
      status: "done",
      attempt: 0,
      run_alone: false,
      due: true,
    });
    assert.deepEqual(await db.ledger.heldJobLocks(), []);
  });

  it("given-back jobs are due at once and wake the workers; a run-alone one stays run-alone", async () => {
    const plain = await db.ledger.addJob({ type: "noop" });
    const alone = await db.ledger.addJob({ type: "noop" });
    await db.sql("UPDATE jobs SET run_alone = true WHERE id = $1", [alone.id]);
    const session = await db.openLockSession("leaving-worker");
    const claimed = [...(await session.claim(["noop"], 10)), await session.claimAlone(["noop"])];
    assert.deepEqual(
      claimed.map((j) => j?.id),
      [plain.id, alone.id],
    );
    const listener = await db.pool.connect();
    try {
      await listener.query(`LISTEN "${db.config.notifyChannel}"`);
      const woken = nextNotification(listener);
      await session.release([
        { id: plain.id, attempt: 0 },
        { id: alone.id, attempt: 0 },
      ]);
      assert.equal(await woken, "noop");
    } finally {
      await listener.query("UNLISTEN *");
      listener.release();
    }
    assert.deepEqual(await reclaimState(plain.id), {
      status: "pending",
      attempt: 0,
      run_alone: false,
      due: true,
    });
    assert.deepEqual(await reclaimState(alone.id), {
      status: "pending",
      attempt: 0,
      run_alone: true,
      due: true,
    });
  });

  it("an ordinary claim never takes a run-alone job, and reports it due", async () => {
    const plain = await db.ledger.addJob({ type: "noop", priority: 1 });
    const alone = await db.ledger.addJob({ type: "noop", priority: 10 });
    await db.sql("UPDATE jobs SET run_alone = true WHERE id = $1", [alone.id]);
    const session = await db.openLockSession("w");
    const first = await session.claimReporting(["noop"], 10);
    assert.deepEqual([first.jobs.map((j) => j.id), first.aloneDue], [[plain.id], true]);
    assert.deepEqual(Object.keys(first.jobs[0] ?? {}).sort(), [
      "attempt",
      "id",
      "maxRetries",
      "payload",
      "priority",
      "timeoutSeconds",
      "type",
    ]);
    // Not due for other types, and not due once it is claimed.
    assert.equal((await session.claimReporting(["other"], 10)).aloneDue, false);
    assert.equal((await session.claimAlone(["noop"]))?.id, alone.id);
    assert.deepEqual(await session.claimReporting(["noop"], 10), { jobs: [], aloneDue: false });
    assert.equal(await session.claimAlone(["noop"]), null);
  });
});
