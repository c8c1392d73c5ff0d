/** Worker.stop() in-process (DESIGN.md §6): what it gives back is what its report says. */
import assert from "node:assert/strict";
import { after, before, it } from "node:test";
import { createTestDb, type TestDb } from "../helpers/db.js";
import { waitForEvent } from "../helpers/events.js";
import { startWorker } from "../helpers/worker.js";

let db: TestDb;
before(async () => {
  db = await createTestDb();
});
after(async () => {
  await db.drop();
});

it("jobs claimed by a claim still in flight when stop() begins are given back and reported", async () => {
  const worker = await startWorker(db, { config: { workerCount: 2, prefetch: 10 } });
  await waitForEvent(worker, "claim:returned"); // the start-up claim found nothing
  // Jobs due in an hour: their insert's notification wakes the worker, whose claim finds nothing.
  const insertNoticed = waitForEvent(worker, "claim:returned");
  const jobs = await db.ledger.addJobs(
    Array.from({ length: 5 }, () => ({ type: "noop", runAt: new Date(Date.now() + 3_600_000) })),
  );
  await insertNoticed;
  // Now due, and no notification announces it (an UPDATE sends none), so no claim is running.
  await db.sql("UPDATE jobs SET run_at = now()");
  const released: number[] = [];
  worker.on("job:released", ({ id }) => released.push(id));
  worker.wake(); // the claim is sent now …
  const report = await worker.stop(5); // … and stop() begins before it returns
  const ids = jobs.map((j) => j.id).sort((a, b) => a - b);
  assert.deepEqual(
    [...report.releasedJobIds].sort((a, b) => a - b),
    ids,
  );
  assert.deepEqual(
    released.sort((a, b) => a - b),
    ids,
  );
  const rows = await db.sql<{ n: number }>("SELECT count(*)::int AS n FROM jobs WHERE status = 'pending'");
  assert.equal(rows[0]?.n, 5);
  assert.deepEqual(await db.ledger.heldJobLocks(), []);
});
