/**
 * Dispatch (DESIGN.md §6): NOTIFY wakes an idle worker at once; the poll covers lost notifications;
 * a killed LISTEN connection comes back; a worker claims only the types it handles.
 */
import assert from "node:assert/strict";
import { after, before, describe, it } from "node:test";
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

/** Kills every LISTEN session of this test's channel from the server side. */
async function killListeners(): Promise<number> {
  const rows = await db.sql<{ killed: boolean }>(
    `SELECT pg_terminate_backend(pid) AS killed FROM pg_stat_activity
     WHERE application_name = 'taskqueue listener' AND query = 'LISTEN "' || $1 || '"'`,
    [db.config.notifyChannel],
  );
  return rows.filter((r) => r.killed).length;
}

describe("dispatch", () => {
  it("NOTIFY wakes an idle worker well before the poll interval", async () => {
    const worker = await startWorker(db, { config: { pollIntervalSeconds: 30 } });
    try {
      await waitForEvent(worker, "claim:returned"); // the start-up claim found nothing
      const started = performance.now();
      // Matched by type, not by the id, which is not known before addJob returns: the worker may
      // run the job before that (the only noop job of this test).
      const done = waitForEvent<[{ id: number; type: string }]>(
        worker,
        "job:completed",
        (e) => e.type === "noop",
      );
      const job = await db.ledger.addJob({ type: "noop" });
      assert.equal((await done)[0].id, job.id);
      const elapsedMs = performance.now() - started;
      assert.ok(elapsedMs < 1000, `picked up in ${elapsedMs.toFixed(1)} ms; the poll is 30 s`);
    } finally {
      await worker.stop();
    }
  });

  it("with the LISTEN connection killed, the poll still picks jobs up and LISTEN comes back", async () => {
    const worker = await startWorker(db, { config: { pollIntervalSeconds: 0.3 } });
    try {
      const reconnected = waitForEvent(worker, "listener:reconnected");
      assert.ok((await killListeners()) >= 1, "a LISTEN session was terminated");
      // Enqueue before LISTEN is back: a notification sent now may be lost.
      const done = waitForEvent<[{ id: number; type: string }]>(
        worker,
        "job:completed",
        (e) => e.type === "noop",
      );
      const job = await db.ledger.addJob({ type: "noop" });
      assert.equal((await done)[0].id, job.id);
      await reconnected;
      // LISTEN is back: the next job is picked up by NOTIFY, so the poll can be slow again.
      const [row] = await db.sql<{ n: number }>(
        "SELECT count(*)::int AS n FROM pg_stat_activity WHERE application_name = 'taskqueue listener' AND query ILIKE 'LISTEN%' || $1 || '%'",
        [db.config.notifyChannel],
      );
      assert.equal(row?.n, 1);
    } finally {
      await worker.stop();
    }
  });

  it("a worker claims only the types it has handlers for", async () => {
    const worker = await startWorker(db, { builtins: false, handlers: { mine: () => "ok" } });
    try {
      const done = waitForEvent<[{ id: number }]>(worker, "job:completed", (e) => e.id === mine?.id);
      const other = await db.ledger.addJob({ type: "not_mine" });
      const mine = await db.ledger.addJob({ type: "mine" });
      await done;
      // A claim after both inserts ran and did not take the other job.
      await waitForEvent(worker, "claim:returned");
      assert.equal((await db.ledger.getJob(other.id))?.status, "pending");
      assert.equal((await db.ledger.getJob(mine.id))?.status, "done");
    } finally {
      await worker.stop();
    }
  });

  it("a worker restricted to some types leaves the rest to others", async () => {
    const worker = await startWorker(db, { types: ["echo"] });
    try {
      const done = waitForEvent<[{ id: number }]>(worker, "job:completed", (e) => e.id === echo?.id);
      const noop = await db.ledger.addJob({ type: "noop" });
      const echo = await db.ledger.addJob({ type: "echo", payload: 1 });
      await done;
      await waitForEvent(worker, "claim:returned");
      assert.equal((await db.ledger.getJob(noop.id))?.status, "pending");
    } finally {
      await worker.stop();
    }
    await db.sql("DELETE FROM jobs");
  });

  it("a stop while a lost lock session is being reopened waits for it, and leaves no session and no worker row", async () => {
    const worker = await startWorker(db);
    const sessionsOf = async () =>
      (
        await db.sql<{ pid: number }>(
          "SELECT pid FROM pg_stat_activity WHERE application_name = 'taskqueue lock session ' || $1",
          [worker.id],
        )
      ).map((r) => r.pid);
    const [first] = await sessionsOf();
    const lost = waitForEvent(worker, "session:lost");
    await db.sql("SELECT pg_terminate_backend($1, 10000)", [first]);
    await lost;
    // The reconnect (after 100 ms) opens a new lock connection: stop as soon as it shows.
    for (let i = 0; i < 500; i++) {
      const pids = await sessionsOf();
      if (pids.some((pid) => pid !== first)) break;
      await new Promise((resolve) => setTimeout(resolve, 5));
    }
    let restoredAfterStop = false;
    const stopped = worker.stop(0).then(() => {
      worker.once("session:restored", () => {
        restoredAfterStop = true;
      });
    });
    await stopped;
    assert.deepEqual(await sessionsOf(), [], "no lock connection outlives stop()");
    assert.deepEqual(await db.sql("SELECT id FROM workers WHERE id = $1", [worker.id]), []);
    assert.equal(restoredAfterStop, false);
  });

  for (const connection of ["lock session", "writes"] as const)
    it(`a lost lock session (its ${connection} connection killed) stops results from being written, and the worker carries on`, async () => {
      const worker = await startWorker(db, { runReaper: true, config: { staleThresholdSeconds: 0.5 } });
      try {
        // Matched by type (the test's only slow job): the claim may come before addJob returns,
        // when the job's id is not known yet.
        const started = waitForEvent<[{ jobs: { id: number; type: string }[] }]>(worker, "job:claimed", (e) =>
          e.jobs.some((j) => j.type === "slow"),
        );
        const job = await db.ledger.addJob({ type: "slow", payload: { sleep_seconds: 0.5 }, maxRetries: 3 });
        assert.ok((await started)[0].jobs.some((j) => j.id === job.id));
        const lost = waitForEvent(worker, "session:lost");
        const restored = waitForEvent(worker, "session:restored");
        // The first run is aborted and its result refused; the reaper hands the job out again.
        const fenced = waitForEvent<[{ id: number; write: string; reason: string }]>(
          worker,
          "job:fenced",
          (e) => e.id === job.id,
        );
        const done = waitForEvent<[{ id: number }]>(worker, "job:completed", (e) => e.id === job.id, 15_000);
        await db.sql(
          "SELECT pg_terminate_backend(pid) FROM pg_stat_activity WHERE application_name = 'taskqueue ' || $1 || ' ' || $2",
          [connection, worker.id],
        );
        await lost;
        await restored;
        const [refused] = await fenced;
        assert.equal(refused.reason, "session_lost");
        await done;
        const finished = await db.ledger.getJob(job.id);
        assert.equal(finished?.status, "done");
        // The lost run counted as a failed attempt, recorded by the reaper. (On a loaded machine a
        // later run can lose its session too, and count another; never a handler failure.)
        assert.ok((finished?.attempt ?? 0) >= 1, "the lost run counted as a failed attempt");
        assert.equal(finished?.errors.length, finished?.attempt);
        for (const failure of finished?.errors ?? []) assert.match(failure.error, /lost the job/);
      } finally {
        await worker.stop();
      }
    });
});
