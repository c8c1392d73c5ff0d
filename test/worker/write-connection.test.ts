/**
 * A lock session's two connections (docs/architecture.md, "Two connections per lock session"): the
 * lock connection claims and holds every advisory lock; the write connection writes outcomes and
 * holds none. A job's lock is released only once its outcome has committed, and losing either
 * connection loses the whole session.
 */
import assert from "node:assert/strict";
import { after, before, describe, it } from "node:test";
import pg from "pg";
import { createTestDb, DATABASE_URL, type TestDb } from "../helpers/db.js";
import { waitForEvent } from "../helpers/events.js";
import { until } from "../helpers/process.js";
import { startWorker } from "../helpers/worker.js";

let db: TestDb;
before(async () => {
  db = await createTestDb();
});
after(async () => {
  await db.drop();
});

/** The backend pid of one of a worker's connections, by its application name. */
async function connectionPid(workerId: string, role: "lock session" | "writes"): Promise<number> {
  const rows = await db.sql<{ pid: number }>(
    "SELECT pid FROM pg_stat_activity WHERE application_name = 'taskqueue ' || $1 || ' ' || $2",
    [role, workerId],
  );
  assert.equal(rows.length, 1, `one ${role} connection of ${workerId}`);
  return (rows[0] as { pid: number }).pid;
}

/** A handler that runs until the test lets it finish. */
function gate() {
  let open: () => void = () => undefined;
  const opened = new Promise<void>((resolve) => {
    open = resolve;
  });
  return { open, handler: async () => opened.then(() => ({ ok: true })) };
}

describe("a lock session's two connections", () => {
  it("every advisory lock of a held job is on the lock connection; the write connection holds none", async () => {
    const held = gate();
    const worker = await startWorker(db, { handlers: { held: held.handler } });
    try {
      const claimed = waitForEvent<[{ jobs: { id: number }[] }]>(worker, "job:claimed");
      const jobs = await db.ledger.addJobs([{ type: "held" }, { type: "held" }]);
      await claimed;
      await until(async () => (await db.ledger.heldJobLocks()).length === 2, 20_000, "both jobs claimed");
      const lockPid = await connectionPid(worker.id, "lock session");
      const writesPid = await connectionPid(worker.id, "writes");
      const locks = await db.ledger.heldJobLocks();
      assert.deepEqual(
        locks.map((l) => l.jobKey).sort((a, b) => a - b),
        jobs.map((j) => j.id).sort((a, b) => a - b),
      );
      assert.ok(
        locks.every((l) => l.pid === lockPid && l.pid !== writesPid),
        "held by the lock connection",
      );
      held.open();
      await until(async () => (await db.ledger.heldJobLocks()).length === 0, 20_000, "locks released");
    } finally {
      held.open();
      await worker.stop();
    }
  });

  it("a job whose claim was lost while it ran keeps its lock until its handler returns, then releases it unwritten", async () => {
    const held = gate();
    const worker = await startWorker(db, { handlers: { held: held.handler } });
    try {
      const job = await db.ledger.addJob({ type: "held" });
      await until(
        async () => (await db.ledger.getJob(job.id))?.status === "running",
        20_000,
        "the job marked running",
      );
      // Someone else's write takes the claim away (an operator's UPDATE, say).
      await db.sql("UPDATE jobs SET worker_id = 'someone-else' WHERE id = $1", [job.id]);
      // Two heartbeats later, the worker has seen that its heartbeat no longer reaches the job.
      const beat = async () =>
        (
          await db.sql<{ at: string }>("SELECT heartbeat_at::text AS at FROM workers WHERE id = $1", [
            worker.id,
          ])
        )[0]?.at;
      for (let i = 0; i < 2; i++) {
        const before = await beat();
        await until(async () => (await beat()) !== before, 20_000, "a heartbeat");
      }
      assert.deepEqual(
        (await db.ledger.heldJobLocks()).map((l) => l.jobKey),
        [job.id],
        "the lock still keeps anyone else from running the job",
      );
      const fenced = waitForEvent<[{ id: number; write: string; reason: string }]>(
        worker,
        "job:fenced",
        (e) => e.id === job.id,
      );
      held.open();
      assert.equal((await fenced)[0].reason, "claim_lost");
      await until(async () => (await db.ledger.heldJobLocks()).length === 0, 20_000, "the lock released");
      const row = await db.ledger.getJob(job.id);
      assert.deepEqual([row?.status, row?.workerId], ["running", "someone-else"], "nothing written");
    } finally {
      held.open();
      await worker.stop();
    }
  });

  it("a job's advisory lock stays held until its outcome has committed", async () => {
    const held = gate();
    const worker = await startWorker(db, { handlers: { held: held.handler } });
    const blocker = new pg.Client({ connectionString: DATABASE_URL });
    await blocker.connect();
    try {
      const claimed = waitForEvent<[{ jobs: { id: number }[] }]>(worker, "job:claimed");
      const job = await db.ledger.addJob({ type: "held" });
      await claimed;
      await until(
        async () => (await db.ledger.getJob(job.id))?.status === "running",
        20_000,
        "the job marked running",
      );
      // Hold off every write to jobs, then let the handler finish: its completion must wait.
      await blocker.query("BEGIN");
      await blocker.query(`LOCK TABLE "${db.schema}".jobs IN SHARE MODE`);
      const completed = waitForEvent<[{ id: number }]>(worker, "job:completed", (e) => e.id === job.id);
      held.open();
      const writesPid = await connectionPid(worker.id, "writes");
      await until(
        async () =>
          (
            await db.sql<{ waiting: boolean }>(
              "SELECT wait_event_type = 'Lock' AS waiting FROM pg_stat_activity WHERE pid = $1",
              [writesPid],
            )
          )[0]?.waiting === true,
        20_000,
        "the completion waiting on the table lock",
      );
      assert.equal((await db.ledger.getJob(job.id))?.status, "running", "the outcome has not committed");
      assert.deepEqual(
        (await db.ledger.heldJobLocks()).map((l) => l.jobKey),
        [job.id],
        "so the job's lock is still held",
      );
      await blocker.query("COMMIT");
      await completed;
      assert.equal((await db.ledger.getJob(job.id))?.status, "done");
      assert.deepEqual(await db.ledger.heldJobLocks(), [], "released once the outcome committed");
    } finally {
      held.open();
      await blocker.query("ROLLBACK").catch(() => undefined);
      await blocker.end();
      await worker.stop();
    }
  });
});
