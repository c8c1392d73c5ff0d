/**
 * Rule (b) of the lock session (src/queue/session/unlock-queue.ts): workers are woken only after
 * the unlock. A worker that claims the moment the NOTIFY arrives finds the job free.
 */
import assert from "node:assert/strict";
import { after, before, it } from "node:test";
import { createTestDb, type TestDb } from "../helpers/db.js";

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
  } finally {
    await listener.query("UNLISTEN *");
    listener.release();
  }
});
