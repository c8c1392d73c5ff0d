/**
 * Pausing a type (issue 14, item 8) with two worker processes' worth of workers on one schema:
 * from the pause on, no claim of either takes the type's jobs (each worker claims at least once
 * within one poll interval, woken or polled), a job of the type already running finishes, other
 * types keep running, and a resume wakes the workers so that the held-back jobs run at once.
 */
import assert from "node:assert/strict";
import { after, before, it } from "node:test";
import type { Worker } from "../../src/worker/worker.js";
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

/** Resolves once every job of `ids` has completed on any of `workers`; rejects after `timeoutMs`. */
function completedOnAny(workers: Worker[], ids: number[], timeoutMs: number): Promise<void> {
  const left = new Set(ids);
  return new Promise<void>((resolve, reject) => {
    const listener = (e: { id: number }) => {
      left.delete(e.id);
      if (left.size === 0) finish(null);
    };
    const finish = (error: Error | null) => {
      clearTimeout(timer);
      for (const w of workers) w.off("job:completed", listener);
      if (error) reject(error);
      else resolve();
    };
    const timer = setTimeout(
      () => finish(new Error(`jobs ${[...left]} not completed in ${timeoutMs} ms`)),
      timeoutMs,
    );
    for (const w of workers) w.on("job:completed", listener);
  });
}

const status = async (id: number) =>
  (await db.sql<{ status: string }>("SELECT status FROM jobs WHERE id = $1", [id]))[0]?.status;

it("a paused type is not claimed by any worker from its next claim on; running jobs finish; resume runs the rest at once", async () => {
  let release: () => void = () => undefined;
  const gate = new Promise<void>((resolve) => {
    release = resolve;
  });
  const started: number[] = [];
  let onFirst: () => void = () => undefined;
  const firstStarted = new Promise<void>((resolve) => {
    onFirst = resolve;
  });
  const handlers = {
    p: async (job: { id: number }) => {
      started.push(job.id);
      if (started.length === 1) {
        onFirst();
        await gate;
      }
      return null;
    },
    q: async () => null,
  };
  const workers: Worker[] = [
    await startWorker(db, { builtins: false, handlers, types: ["p", "q"] }),
    await startWorker(db, { builtins: false, handlers, types: ["p", "q"] }),
  ];
  try {
    const running = await db.ledger.addJob({ type: "p" });
    await Promise.race([
      firstStarted,
      new Promise((_, reject) =>
        setTimeout(() => reject(new Error("first job not started in 10 s")), 10_000).unref(),
      ),
    ]);
    assert.deepEqual(started, [running.id]);

    const pausedAt = Date.now();
    await db.ledger.pauseType("p");
    // Every worker claims at least once within one poll interval of the pause (polled, or woken
    // by the inserts below); none of those claims takes a `p` job.
    const pollMs = db.config.pollIntervalSeconds * 1000;
    const claimedOnce = workers.map((w) => waitForEvent(w, "claim:returned", () => true, pollMs + 1000));
    const held = await db.ledger.addJobs([{ type: "p" }, { type: "p" }]);
    const other = await db.ledger.addJob({ type: "q" });
    const otherDone = completedOnAny(workers, [other.id], 10_000);
    await Promise.all(claimedOnce);
    assert.ok(Date.now() - pausedAt < pollMs + 1000, "each worker claimed within one poll interval");
    await otherDone;
    assert.deepEqual(started, [running.id], "no `p` job started after the pause");
    for (const job of held) assert.equal(await status(job.id), "pending");

    // The running job of the paused type finishes.
    const finished = completedOnAny(workers, [running.id], 10_000);
    release();
    await finished;
    assert.equal(await status(running.id), "done");
    // Two more claims per worker (a full poll interval at least), still nothing of `p`.
    for (const w of workers) {
      await waitForEvent(w, "claim:returned", () => true, pollMs + 1000);
      await waitForEvent(w, "claim:returned", () => true, pollMs + 1000);
    }
    for (const job of held) assert.equal(await status(job.id), "pending");

    // Resume: the workers are woken (NOTIFY), the held jobs run well within a poll interval.
    const allDone = completedOnAny(
      workers,
      held.map((j) => j.id),
      5000,
    );
    await db.ledger.resumeType("p");
    await allDone;
    for (const job of held) assert.equal(await status(job.id), "done");
  } finally {
    release();
    await Promise.all(workers.map((w) => w.stop()));
  }
});
