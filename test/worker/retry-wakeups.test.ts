/**
 * A lane wakes at every retry due time it wrote, not only at the first: jobs failing together with
 * jittered backoffs are each claimed again on time, not at the next poll.
 */
import assert from "node:assert/strict";
import { after, before, describe, it } from "node:test";
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

describe("retry wake-ups", () => {
  it("ten jobs failing together are all retried within their backoff, with the poll 60 s away", async () => {
    const worker = await startWorker(db, {
      config: { pollIntervalSeconds: 60, backoffBaseSeconds: 0.4, backoffJitter: true, workerCount: 10 },
    });
    try {
      // Two failed attempts per job: the first, then its retry, due within 0.2–0.4 s.
      const failed = waitForEvents(worker, "job:failed", 20, () => true, 15_000);
      const started = performance.now();
      const jobs = await db.ledger.addJobs(
        Array.from({ length: 10 }, () => ({ type: "always_fail", maxRetries: 1 })),
      );
      await failed;
      const elapsedSeconds = (performance.now() - started) / 1000;
      assert.ok(elapsedSeconds < 5, `every retry ran within ${elapsedSeconds.toFixed(2)} s`);
      for (const job of jobs) {
        const row = await db.ledger.getJob(job.id);
        assert.deepEqual([row?.status, row?.attempt], ["dead", 2]);
      }
    } finally {
      await worker.stop();
    }
  });
});
