/**
 * The ordering rules of the lock session, seen from outside: (a) a job's lock is released only
 * after its outcome has committed (src/queue/lock-session.ts); (b) workers are woken only after the
 * unlock (src/queue/session/unlock-queue.ts).
 */
import assert from "node:assert/strict";
import { after, before, it } from "node:test";
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

it("a worker woken by a give-back's NOTIFY claims the job at once: its lock was released first", async () => {
  const job = await db.ledger.addJob({ type: "noop" });
  const owner = await db.openLockSession("w1");
  const other = await db.openLockSession("w2");
  assert.equal((await owner.claim(["noop"], 1))[0]?.id, job.id);
  const listener = await db.pool.connect();
  try {
    await listener.query(`LISTEN "${db.config.notifyChannel}"`);
    // The claim is sent from the notification handler itself, before anything else of the owner's
    // unlock is awaited: what it finds is the state the NOTIFY announced.
    const claimedOnWake = new Promise<number[]>((resolve, reject) => {
      const timer = setTimeout(() => reject(new Error("no NOTIFY within 10 s")), 10_000);
      listener.once("notification", () => {
        clearTimeout(timer);
        other.claim(["noop"], 1).then((jobs) => resolve(jobs.map((j) => j.id)), reject);
      });
    });
    const released = await owner.writeReleases([{ id: job.id, attempt: 0 }]);
    assert.deepEqual(await claimedOnWake, [job.id], "the woken worker found the job pending and unlocked");
    await released.unlocked;
    assert.deepEqual(await other.release([{ id: job.id, attempt: 0 }]), [], "given back by the woken worker");
  } finally {
    await listener.query("UNLISTEN *");
    listener.release();
  }
});

it("a job's lock stays held while its completion waits on the job's row, with the lock connection idle", async () => {
  // No poll and no pipelined claim can queue on the lock connection: an unlock asked for before
  // the write committed would go out at once.
  let open: () => void = () => undefined;
  const opened = new Promise<void>((resolve) => {
    open = resolve;
  });
  const worker = await startWorker(db, {
    handlers: { held: () => opened.then(() => null) },
    config: { pollIntervalSeconds: 3600 },
  });
  const blocker = new pg.Client({ connectionString: DATABASE_URL });
  await blocker.connect();
  try {
    const job = await db.ledger.addJob({ type: "held" });
    await until(async () => (await db.ledger.getJob(job.id))?.status === "running", 20_000, "running");
    // Only the job's row is held: the completion waits, claims (SKIP LOCKED) would not.
    await blocker.query("BEGIN");
    await blocker.query(`SELECT 1 FROM "${db.schema}".jobs WHERE id = $1 FOR UPDATE`, [job.id]);
    const completed = waitForEvent<[{ id: number }]>(worker, "job:completed", (e) => e.id === job.id);
    open();
    await until(
      async () =>
        (
          await db.sql<{ n: number }>(
            "SELECT count(*)::int AS n FROM pg_stat_activity WHERE application_name = 'taskqueue writes ' || $1 AND wait_event_type = 'Lock'",
            [worker.id],
          )
        )[0]?.n === 1,
      20_000,
      "the completion waiting on the row lock",
    );
    // The wait above took several round trips: an unlock asked for too early has run by now.
    assert.equal((await db.ledger.getJob(job.id))?.status, "running", "the outcome has not committed");
    assert.deepEqual(
      (await db.ledger.heldJobLocks()).map((l) => l.jobKey),
      [job.id],
      "lock held until commit",
    );
    await blocker.query("COMMIT");
    await completed;
    assert.deepEqual(await db.ledger.heldJobLocks(), [], "released once the outcome committed");
  } finally {
    open();
    await blocker.query("ROLLBACK").catch(() => undefined);
    await blocker.end();
    await worker.stop();
  }
});
