/**
 * Failed attempts (DESIGN.md §4): backoff, attempt counting, the full retry cycle, and the
 * dead-letter move once retries are exhausted.
 */
import assert from "node:assert/strict";
import { after, before, describe, it } from "node:test";
import { writeFailures } from "../../src/queue/sql/finish.js";
import type { TestLockSession as LockSession } from "../helpers/db.js";
import { createTestDb, type TestDb } from "../helpers/db.js";
import { waitForEvent, waitForEvents } from "../helpers/events.js";
import { startWorker } from "../helpers/worker.js";

let db: TestDb;
let session: LockSession;
const policy = { backoffBaseSeconds: 2, backoffMaxSeconds: 30, backoffJitter: false };

before(async () => {
  db = await createTestDb();
  session = await db.openLockSession("tester");
});
after(async () => {
  await db.drop();
});

/** Claims job `id` (making it due first) and fails it once with `error`. */
async function failOnce(id: number, error = "boom", p = policy) {
  await db.sql("UPDATE jobs SET run_at = now() WHERE id = $1 AND status = 'pending'", [id]);
  const claimed = await session.claim(["retry_test"], 100);
  const job = claimed.find((j) => j.id === id);
  assert.ok(job, `job ${id} should be claimable`);
  for (const other of claimed.filter((j) => j.id !== id)) await session.release([other]);
  const [outcome] = await session.fail([{ id, attempt: job.attempt, error, runMs: 1 }], p);
  return outcome;
}

/**
 * The backoff the last failure set: run_at minus that failure's failed_at (both the failing
 * transaction's now()), so the figure is exact however long the test takes to read it.
 */
async function secondsUntilRun(id: number): Promise<number> {
  const [row] = await db.sql<{ s: number }>(
    `SELECT extract(epoch FROM run_at - (errors -> -1 ->> 'failed_at')::timestamptz)::float8 AS s
       FROM jobs WHERE id = $1`,
    [id],
  );
  return row?.s ?? Number.NaN;
}

describe("retry", () => {
  it("a failed attempt goes back to pending with run_at pushed forward", async () => {
    const job = await db.ledger.addJob({ type: "retry_test", maxRetries: 3 });
    const outcome = await failOnce(job.id);
    assert.equal(outcome?.applied, true);
    assert.equal(outcome?.status, "pending");
    const after = await db.ledger.getJob(job.id);
    assert.equal(after?.status, "pending");
    assert.ok(after && after.runAt.getTime() > job.runAt.getTime());
    const wait = await secondsUntilRun(job.id);
    assert.equal(wait, 2, `first retry waits base * 2^0 = 2 s, got ${wait}`);
  });

  it("a retry due at once (no backoff) wakes the workers on the channel", async () => {
    const job = await db.ledger.addJob({ type: "retry_test" });
    const listener = await db.pool.connect();
    try {
      await listener.query(`LISTEN "${db.config.notifyChannel}"`);
      const woken = new Promise<string | undefined>((resolve) =>
        listener.once("notification", (m) => resolve(m.payload)),
      );
      const outcome = await failOnce(job.id, "boom", { ...policy, backoffBaseSeconds: 0 });
      assert.equal(outcome?.status, "pending");
      assert.equal(await woken, "retry_test");
    } finally {
      await listener.query("UNLISTEN *");
      listener.release();
    }
  });

  it("attempt increments on each failure and the history records each one", async () => {
    const job = await db.ledger.addJob({ type: "retry_test", maxRetries: 5 });
    for (let i = 0; i < 3; i++) await failOnce(job.id, `failure ${i}`);
    const after = await db.ledger.getJob(job.id);
    assert.equal(after?.attempt, 3);
    assert.deepEqual(
      after?.errors.map((e) => [e.attempt, e.error, e.worker_id]),
      [
        [0, "failure 0", "tester"],
        [1, "failure 1", "tester"],
        [2, "failure 2", "tester"],
      ],
    );
    assert.equal(after?.error, "failure 2");
  });

  it("backoff after failed attempt a is min(base * 2^a, max) seconds", async () => {
    const job = await db.ledger.addJob({ type: "retry_test", maxRetries: 10 });
    const expected = [2, 4, 8, 16, 30, 30];
    for (const seconds of expected) {
      await failOnce(job.id);
      const wait = await secondsUntilRun(job.id);
      assert.equal(wait, seconds, `expected ${seconds} s, got ${wait}`);
    }
  });

  it("jitter keeps each delay within [0.5, 1] of the formula", async () => {
    const jittered = { ...policy, backoffJitter: true };
    const jobs = await db.ledger.addJobs(Array.from({ length: 20 }, () => ({ type: "retry_test" })));
    const waits: number[] = [];
    for (const job of jobs) {
      await failOnce(job.id, "x", jittered);
      waits.push(await secondsUntilRun(job.id));
    }
    assert.ok(
      waits.every((w) => w >= 1 && w <= 2),
      `each delay within [1, 2] s: ${waits}`,
    );
    assert.ok(new Set(waits.map((w) => w.toFixed(3))).size > 1, "delays differ");
  });

  it("a flaky job fails twice, then succeeds on attempt 2 through a real worker", async () => {
    const worker = await startWorker(db);
    try {
      const done = waitForEvent<[{ id: number }]>(worker, "job:completed", (e) => e.id === job.id);
      const job = await db.ledger.addJob({ type: "flaky", maxRetries: 3 });
      await done;
      const after = await db.ledger.getJob(job.id);
      assert.equal(after?.status, "done");
      assert.equal(after?.attempt, 2);
      assert.deepEqual(after?.result, { succeeded_on_attempt: 2 });
      assert.equal(after?.errors.length, 2);
    } finally {
      await worker.stop();
    }
  });
});

describe("event order", () => {
  for (const lockSessions of [1, 2])
    it(`a failed attempt is reported before its retry is claimed, even with no backoff under load (${lockSessions} lock session${lockSessions > 1 ? "s" : ""})`, async () => {
      const order: string[] = [];
      const worker = await startWorker(db, {
        config: { backoffBaseSeconds: 0, backoffMaxSeconds: 0, workerCount: 50, prefetch: 200, lockSessions },
        handlers: {
          "fail-once": async (job) => {
            if (job.attempt === 0) throw new Error("first attempt fails");
            return null;
          },
        },
      });
      worker.on("job:claimed", ({ jobs }) => {
        for (const j of jobs) order.push(`claimed ${j.id}/${j.attempt}`);
      });
      worker.on("job:failed", ({ id }) => order.push(`failed ${id}`));
      try {
        const completed = waitForEvents(worker, "job:completed", 1200);
        const failing = await db.ledger.addJobs(
          Array.from({ length: 200 }, () => ({ type: "fail-once", priority: 10 })),
        );
        await db.ledger.addJobs(Array.from({ length: 1000 }, () => ({ type: "noop" })));
        const ids = new Set(failing.map((j) => j.id));
        await completed;
        for (const id of ids) {
          const failed = order.indexOf(`failed ${id}`);
          const retried = order.indexOf(`claimed ${id}/1`);
          assert.ok(
            failed >= 0 && retried > failed,
            `job ${id}: failure reported at ${failed}, retry claimed at ${retried}`,
          );
        }
      } finally {
        await worker.stop();
      }
    });
});

describe("listeners", () => {
  it("a job:failed listener that throws does not hold up the retry: it runs, and stop() returns", {
    timeout: 30_000,
  }, async () => {
    const worker = await startWorker(db, {
      config: { backoffBaseSeconds: 0, backoffMaxSeconds: 0 },
      handlers: {
        "fail-once": async (job) => {
          if (job.attempt === 0) throw new Error("first attempt fails");
          return null;
        },
      },
    });
    worker.on("job:failed", () => {
      throw new Error("a listener's own bug");
    });
    try {
      const completed = waitForEvent(worker, "job:completed");
      const job = await db.ledger.addJob({ type: "fail-once" });
      await completed;
      const row = await db.ledger.getJob(job.id);
      assert.deepEqual([row?.status, row?.attempt], ["done", 1]);
    } finally {
      await worker.stop();
    }
  });
});

describe("dead-letter", () => {
  it("a job that exhausts max_retries is dead after max_retries + 1 executions", async () => {
    const worker = await startWorker(db);
    let executions = 0;
    worker.on("job:failed", (e) => {
      if (e.id === job.id) executions++;
    });
    const died = waitForEvent<[{ id: number; status: string }]>(
      worker,
      "job:failed",
      (e) => e.id === job.id && e.status === "dead",
    );
    const job = await db.ledger.addJob({ type: "always_fail", maxRetries: 2, payload: { k: "v" } });
    await died;
    await worker.stop();
    assert.equal(executions, 3);
    const after = await db.ledger.getJob(job.id);
    assert.equal(after?.status, "dead");
    assert.equal(after?.attempt, 3);
    assert.ok(after?.completedAt);
  });

  it("the move to dead_letter_jobs happens in the same statement as the status change", async () => {
    await db.sql("DELETE FROM jobs WHERE type = 'retry_test'"); // only this job may be claimable
    const job = await db.ledger.addJob({ type: "retry_test", maxRetries: 0 });
    await db.sql("UPDATE jobs SET run_at = now() WHERE id = $1", [job.id]);
    const [claimed] = await session.claim(["retry_test"], 1);
    assert.equal(claimed?.id, job.id);
    // The worker's failure statement, alone in a transaction: whatever is true right after it, and
    // before COMMIT, that one statement did.
    const writer = await db.pool.connect();
    const observer = await db.pool.connect();
    const read = (client: typeof writer) =>
      client.query(
        `SELECT j.status, d.job_id FROM "${db.schema}".jobs j
         LEFT JOIN "${db.schema}".dead_letter_jobs d ON d.job_id = j.id WHERE j.id = $1`,
        [job.id],
      );
    try {
      await writer.query("BEGIN");
      const { rows: outcome } = await writer.query({
        ...writeFailures(db.schema),
        values: [`{${job.id}}`, "{0}", ["fatal"], "{1}", "tester", 2, 30, false, "{f}"],
      });
      assert.equal(outcome[0]?.status, "dead");
      assert.deepEqual((await read(writer)).rows, [{ status: "dead", job_id: job.id }]);
      // Not visible to anyone else before the commit: status and dead-letter row move together.
      assert.deepEqual((await read(observer)).rows, [{ status: "claimed", job_id: null }]);
      await writer.query("COMMIT");
      assert.deepEqual((await read(observer)).rows, [{ status: "dead", job_id: job.id }]);
    } finally {
      await writer.query("ROLLBACK").catch(() => undefined);
      writer.release();
      observer.release();
    }
    await session.releaseLocks([job.id]);
  });

  it("a failing dead-letter insert rolls back the status change too", async () => {
    await db.sql("DELETE FROM jobs WHERE type = 'retry_test'"); // only this job may be claimable
    const job = await db.ledger.addJob({ type: "retry_test", maxRetries: 0 });
    await db.sql("UPDATE jobs SET run_at = now() WHERE id = $1", [job.id]);
    const [claimed] = await session.claim(["retry_test"], 1);
    assert.equal(claimed?.id, job.id);
    // Make the dead-letter insert fail: a CHECK that rejects this job.
    await db.sql(`ALTER TABLE dead_letter_jobs ADD CONSTRAINT reject_job CHECK (job_id <> ${job.id})`);
    await assert.rejects(session.fail([{ id: job.id, attempt: 0, error: "fatal", runMs: 1 }], policy));
    await db.sql("ALTER TABLE dead_letter_jobs DROP CONSTRAINT reject_job");
    const after = await db.ledger.getJob(job.id);
    assert.equal(
      after?.status,
      "claimed",
      "nothing half-written: the job is not dead without its dead-letter row",
    );
    assert.equal(await db.ledger.getDeadLetter(job.id), null);
    await session.release([{ id: job.id, attempt: 0 }]).catch(() => undefined);
  });

  it("no duplicate dead-letter rows, however often the final failure is written", async () => {
    const job = await db.ledger.addJob({ type: "retry_test", maxRetries: 0 });
    await failOnce(job.id, "first");
    // A repeated write of the same failure is refused by the fence.
    const again = await session.fail([{ id: job.id, attempt: 0, error: "again", runMs: 1 }], policy);
    assert.equal(again[0]?.applied, false);
    const rows = await db.sql("SELECT * FROM dead_letter_jobs WHERE job_id = $1", [job.id]);
    assert.equal(rows.length, 1);
  });

  it("the dead-letter row keeps the payload, final error, attempts and history", async () => {
    const payload = { order: 42, items: ["a", "b"], nested: { ok: true } };
    const job = await db.ledger.addJob({ type: "retry_test", maxRetries: 1, payload, priority: 7 });
    await failOnce(job.id, "first failure");
    await failOnce(job.id, "second failure");
    const dead = await db.ledger.getDeadLetter(job.id);
    assert.ok(dead);
    assert.deepEqual(dead.payload, payload);
    assert.equal(dead.type, "retry_test");
    assert.equal(dead.priority, 7);
    assert.equal(dead.error, "second failure");
    assert.equal(dead.attempts, 2);
    assert.equal(dead.workerId, "tester");
    assert.deepEqual(
      dead.errors.map((e) => e.error),
      ["first failure", "second failure"],
    );
    assert.equal(dead.createdAt.getTime(), job.createdAt.getTime());
  });
});
