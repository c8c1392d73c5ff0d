/**
 * Graceful shutdown of a real worker process (DESIGN.md §6): SIGTERM lets the running job finish,
 * claims nothing new, exits 0; a job still running at the grace deadline goes back to pending.
 */
import assert from "node:assert/strict";
import { after, before, describe, it } from "node:test";
import { createTestDb, type TestDb } from "../helpers/db.js";
import { cliEnv, startCli, until } from "../helpers/process.js";

let db: TestDb;
before(async () => {
  db = await createTestDb();
});
after(async () => {
  await db.drop();
});

const status = async (id: number) => (await db.ledger.getJob(id))?.status;

describe("SIGTERM", () => {
  it("lets the running slow job finish, claims nothing new, and exits 0", async () => {
    const worker = startCli(["worker", "--concurrency", "1"], cliEnv(db, { SHUTDOWN_GRACE_SECONDS: "20" }));
    await worker.waitForLog((l) => l.msg === "worker started");
    const slow = await db.ledger.addJob({ type: "slow", payload: { sleep_seconds: 1 } });
    await until(async () => (await status(slow.id)) === "running", 10_000, "slow job running");
    worker.child.kill("SIGTERM");
    await worker.waitForLog((l) => l.msg === "shutting down gracefully");
    const later = await db.ledger.addJob({ type: "noop" });
    const code = await worker.exited;
    assert.equal(code, 0);
    const finished = await db.ledger.getJob(slow.id);
    assert.equal(finished?.status, "done");
    assert.deepEqual(finished?.result, { slept_seconds: 1 });
    assert.equal(await status(later.id), "pending", "nothing new was claimed after SIGTERM");
    assert.deepEqual(await db.ledger.heldJobLocks(), []);
    assert.deepEqual(await db.sql("SELECT id FROM workers"), []);
    await db.sql("DELETE FROM jobs");
  });

  it("keeps heartbeating the running job and the worker row while it drains (shared/cases 09)", async () => {
    // Heartbeat 0.2 s, stale threshold 1 s, reaper 0.2 s; a second worker reaps all along.
    const env = cliEnv(db, {
      SHUTDOWN_GRACE_SECONDS: "60",
      HEARTBEAT_INTERVAL_SECONDS: "0.2",
      STALE_THRESHOLD_SECONDS: "1",
      REAPER_INTERVAL_SECONDS: "0.2",
    });
    const draining = startCli(["worker", "--concurrency", "1", "--types", "slow"], env);
    await draining.waitForLog((l) => l.msg === "worker started");
    const reaper = startCli(["worker", "--concurrency", "1", "--types", "noop"], env);
    await reaper.waitForLog((l) => l.msg === "worker started");
    try {
      const job = await db.ledger.addJob({ type: "slow", payload: { sleep_seconds: 3 } });
      await until(async () => (await status(job.id)) === "running", 10_000, "slow job running");
      draining.child.kill("SIGTERM");
      await draining.waitForLog((l) => l.msg === "shutting down gracefully");
      // Through the drain (3 s, three stale thresholds), the job's heartbeat and the worker row
      // stay younger than the stale threshold.
      let oldestSeconds = 0;
      let samples = 0;
      const deadline = Date.now() + 20_000;
      while ((await status(job.id)) === "running" && Date.now() < deadline) {
        const [row] = await db.sql<{ job_age: number | null; worker_age: number | null }>(
          `SELECT extract(epoch FROM now() - j.heartbeat_at)::float8 AS job_age,
                  (SELECT extract(epoch FROM now() - max(w.heartbeat_at))::float8 FROM workers w
                   WHERE w.id = j.worker_id) AS worker_age
           FROM jobs j WHERE j.id = $1`,
          [job.id],
        );
        if (row?.job_age != null) {
          samples++;
          oldestSeconds = Math.max(oldestSeconds, row.job_age, row.worker_age ?? Number.POSITIVE_INFINITY);
        }
        await new Promise((resolve) => setTimeout(resolve, 50));
      }
      assert.ok(samples > 10, `sampled the drain ${samples} times`);
      assert.ok(
        oldestSeconds < 1,
        `heartbeat or worker row ${oldestSeconds.toFixed(2)} s old during the drain`,
      );
      assert.equal(await draining.exited, 0);
      const finished = await db.ledger.getJob(job.id);
      assert.deepEqual([finished?.status, finished?.attempt], ["done", 0], "run once, never reaped");
      assert.deepEqual(await db.sql("SELECT id FROM workers WHERE id = $1", [finished?.workerId]), []);
    } finally {
      draining.child.kill("SIGKILL");
      reaper.child.kill("SIGTERM");
      await reaper.exited;
      await db.sql("DELETE FROM jobs");
    }
  });

  it("gives a job still running at the grace deadline back to pending and exits 0", async () => {
    const worker = startCli(["worker", "--concurrency", "2"], cliEnv(db, { SHUTDOWN_GRACE_SECONDS: "0.5" }));
    await worker.waitForLog((l) => l.msg === "worker started");
    const stuck = await db.ledger.addJob({ type: "slow", payload: { sleep_seconds: 120 } });
    await until(async () => (await status(stuck.id)) === "running", 10_000, "slow job running");
    const signalledAt = Date.now();
    worker.child.kill("SIGTERM");
    const code = await worker.exited;
    assert.equal(code, 0);
    assert.ok(Date.now() - signalledAt < 10_000, "exited soon after the grace period");
    const after = await db.ledger.getJob(stuck.id);
    assert.equal(after?.status, "pending");
    assert.equal(after?.attempt, 0, "an interrupted run is not a failed attempt");
    assert.equal(after?.workerId, worker.logs.find((l) => l.msg === "worker started")?.workerId);
    const stopped = worker.logs.find((l) => l.msg === "worker stopped");
    assert.deepEqual(stopped?.abandonedJobIds, [stuck.id]);
    assert.deepEqual(await db.ledger.heldJobLocks(), []);
  });
});

describe("crash", () => {
  it("a worker killed with SIGKILL mid-job: the lock goes with its session, the job runs again elsewhere", async () => {
    await db.sql("DELETE FROM jobs");
    const doomed = startCli(["worker", "--concurrency", "1"], cliEnv(db, { STALE_THRESHOLD_SECONDS: "0.5" }));
    await doomed.waitForLog((l) => l.msg === "worker started");
    const job = await db.ledger.addJob({ type: "slow", payload: { sleep_seconds: 60 }, maxRetries: 2 });
    await until(async () => (await status(job.id)) === "running", 10_000, "slow job running");
    assert.equal((await db.ledger.heldJobLocks()).length, 1);
    doomed.child.kill("SIGKILL");
    await doomed.exited;
    await until(
      async () => (await db.ledger.heldJobLocks()).length === 0,
      10_000,
      "the dead session's lock released",
    );
    // A second worker's reaper reclaims the job as a failed attempt and runs it again.
    await db.sql("UPDATE jobs SET payload = '{\"sleep_seconds\": 0}' WHERE id = $1", [job.id]);
    const rescuer = startCli(
      ["worker"],
      cliEnv(db, { STALE_THRESHOLD_SECONDS: "0.5", REAPER_INTERVAL_SECONDS: "0.2" }),
    );
    try {
      await until(async () => (await status(job.id)) === "done", 20_000, "job done by the rescuer");
      const finished = await db.ledger.getJob(job.id);
      assert.equal(finished?.attempt, 1);
      assert.match(finished?.errors[0]?.error ?? "", /lost the job/);
    } finally {
      rescuer.child.kill("SIGTERM");
      assert.equal(await rescuer.exited, 0);
    }
  });
});
