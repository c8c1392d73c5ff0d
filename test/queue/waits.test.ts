/**
 * Waiting for a job's outcome (issue 13, item 4): `waitForJob` resolves through LISTEN once the job
 * is done, dead or cancelled; one LISTEN connection serves every wait; only watched jobs notify;
 * progress is stored, fenced, and pushed to waiters; worker events carry type, attempt, duration
 * and result or error.
 */
import assert from "node:assert/strict";
import { after, before, describe, it } from "node:test";
import pg from "pg";
import { JobClaimLostError, JobNotFoundError, JobValidationError } from "../../src/errors.js";
import type { JsonValue } from "../../src/queue/types.js";
import { JobWaitTimeoutError, waitChannel } from "../../src/queue/waits.js";
import type { JobCompletedEvent } from "../../src/worker/events.js";
import type { HandlerJob } from "../../src/worker/registry.js";
import type { Worker } from "../../src/worker/worker.js";
import { createTestDb, DATABASE_URL, type TestDb } from "../helpers/db.js";
import { waitForEvent } from "../helpers/events.js";
import { startWorker } from "../helpers/worker.js";

/** A promise with its resolve, to hold a handler until the test lets it go. */
function gate<T = void>(): { promise: Promise<T>; open: (value: T) => void } {
  let open: (value: T) => void = () => undefined;
  const promise = new Promise<T>((resolve) => {
    open = resolve;
  });
  return { promise, open };
}

/** Connections of this database whose application name is `name`. */
async function connectionsNamed(db: TestDb, name: string): Promise<number> {
  const rows = await db.sql<{ n: number }>(
    "SELECT count(*)::int AS n FROM pg_stat_activity WHERE application_name = $1 AND datname = current_database()",
    [name],
  );
  return rows[0]?.n ?? 0;
}

describe("waitForJob", () => {
  let db: TestDb;
  let worker: Worker;
  /** Handlers of type `held` wait here, by job id. */
  const held = new Map<number, ReturnType<typeof gate<JsonValue>>>();
  /** Jobs of type `held` whose handler has started, by id: their `job` object. */
  const started = new Map<number, HandlerJob>();
  const startedWaiters = new Map<number, (job: HandlerJob) => void>();
  const whenStarted = (id: number) =>
    new Promise<HandlerJob>((resolve) => {
      const job = started.get(id);
      if (job) resolve(job);
      else startedWaiters.set(id, resolve);
    });

  before(async () => {
    db = await createTestDb();
    worker = await startWorker(db, {
      handlers: {
        held: async (job) => {
          const g = held.get(job.id) ?? gate<JsonValue>();
          held.set(job.id, g);
          started.set(job.id, job);
          startedWaiters.get(job.id)?.(job);
          return g.promise;
        },
        fails: () => {
          throw new Error("boom");
        },
      },
    });
  });
  after(async () => {
    await worker.stop();
    await db.ledger.closeWaits();
    await db.drop();
  });

  it("resolves with the done job once its handler returns, woken by the notification", async () => {
    const job = await db.ledger.addJob({ type: "held" });
    await whenStarted(job.id);
    const waiting = db.ledger.waitForJob(job.id, { timeoutMs: 10_000 });
    // The wait is in place (LISTEN up, job watched) before the handler returns.
    await waitUntilWatched(db, job.id);
    held.get(job.id)?.open({ answer: 42 });
    const done = await waiting;
    assert.equal(done.status, "done");
    assert.deepEqual(done.result, { answer: 42 });
  });

  it("resolves at once for a job already final, and rejects for a job that does not exist", async () => {
    const job = await db.ledger.addJob({ type: "echo", payload: { x: 1 } });
    await eventually(async () => (await db.ledger.getJob(job.id))?.status === "done");
    const done = await db.ledger.waitForJob(job.id, { timeoutMs: 10_000 });
    assert.equal(done.status, "done");
    await assert.rejects(db.ledger.waitForJob(999_999_999, { timeoutMs: 1000 }), JobNotFoundError);
    assert.throws(() => db.ledger.waitForJob(job.id, { timeoutMs: 0 }), JobValidationError);
    assert.throws(() => db.ledger.waitForJob(0), JobValidationError);
  });

  it("resolves for a dead job and for a cancelled one", async () => {
    const dead = await db.ledger.addJob({ type: "fails", maxRetries: 0, runAt: new Date(Date.now() + 300) });
    const cancelled = await db.ledger.addJob({ type: "nobody_handles_this" });
    const waitDead = db.ledger.waitForJob(dead.id, { timeoutMs: 10_000 });
    const waitCancelled = db.ledger.waitForJob(cancelled.id, { timeoutMs: 10_000 });
    await waitUntilWatched(db, cancelled.id);
    await db.ledger.cancelJob(cancelled.id);
    assert.equal((await waitCancelled).status, "cancelled");
    const died = await waitDead;
    assert.equal(died.status, "dead");
    assert.match(died.error ?? "", /boom/);
  });

  it("times out with a typed error carrying the job as last read", async () => {
    const job = await db.ledger.addJob({ type: "nobody_handles_this" });
    const error = await db.ledger.waitForJob(job.id, { timeoutMs: 200 }).then(
      () => assert.fail("resolved"),
      (e: unknown) => e,
    );
    assert.ok(error instanceof JobWaitTimeoutError);
    assert.equal(error.code, "job_wait_timeout");
    assert.equal(error.job?.status, "pending");
    assert.equal(error.job?.id, job.id);
  });

  it("serves every wait through one shared LISTEN connection, closed when the last wait ends", async () => {
    const jobs = await db.ledger.addJobs(Array.from({ length: 3 }, () => ({ type: "held" })));
    await Promise.all(jobs.map((j) => whenStarted(j.id)));
    const waits = jobs.flatMap((j) => [
      db.ledger.waitForJob(j.id, { timeoutMs: 10_000 }),
      db.ledger.waitForJob(j.id, { timeoutMs: 10_000 }),
    ]);
    for (const j of jobs) await waitUntilWatched(db, j.id);
    assert.equal(await connectionsNamed(db, "taskqueue waits"), 1);
    for (const j of jobs) held.get(j.id)?.open(j.id);
    const finished = await Promise.all(waits);
    assert.deepEqual(
      finished.map((j) => j.result),
      jobs.flatMap((j) => [j.id, j.id]),
    );
    await eventually(async () => (await connectionsNamed(db, "taskqueue waits")) === 0);
  });

  it("survives the loss of its LISTEN connection: opens it again and reads the job again", async () => {
    const job = await db.ledger.addJob({ type: "held" });
    await whenStarted(job.id);
    const waiting = db.ledger.waitForJob(job.id, { timeoutMs: 20_000 });
    await waitUntilWatched(db, job.id);
    const [killed] = await db.sql<{ n: number }>(
      `SELECT count(pg_terminate_backend(pid))::int AS n FROM pg_stat_activity
       WHERE application_name = 'taskqueue waits' AND query = $1`,
      [`LISTEN "${waitChannel(db.schema)}"`],
    );
    assert.equal(killed?.n, 1);
    held.get(job.id)?.open("after the loss");
    const done = await waiting;
    assert.equal(done.status, "done");
    assert.equal(done.result, "after the loss");
  });

  it("sends no notification for jobs nobody waits for", async () => {
    const listener = new pg.Client({ connectionString: DATABASE_URL });
    await listener.connect();
    let notifications = 0;
    listener.on("notification", () => notifications++);
    await listener.query(`LISTEN "${waitChannel(db.schema)}"`);
    try {
      const ids = await db.ledger.addJobIds(Array.from({ length: 50 }, () => ({ type: "echo", payload: 1 })));
      const last = Math.max(...ids);
      await eventually(async () => (await db.ledger.getJob(last))?.status === "done");
      await eventually(async () => {
        const rows = await db.sql<{ n: number }>(
          "SELECT count(*)::int AS n FROM jobs WHERE id = ANY($1) AND status = 'done'",
          [ids],
        );
        return rows[0]?.n === ids.length;
      });
      // A round trip on the listening connection delivers anything already sent.
      await listener.query("SELECT 1");
      assert.equal(notifications, 0);
      // A watched job does notify (the same listener, so the assertion above could fail).
      const job = await db.ledger.addJob({ type: "held" });
      await whenStarted(job.id);
      const waiting = db.ledger.waitForJob(job.id, { timeoutMs: 10_000 });
      await waitUntilWatched(db, job.id);
      held.get(job.id)?.open(null);
      await waiting;
      await eventually(async () => {
        await listener.query("SELECT 1");
        return notifications > 0;
      });
    } finally {
      await listener.end();
    }
  });

  it("stores progress, shows it on the job, and pushes each new value to waiters", async () => {
    const job = await db.ledger.addJob({ type: "held" });
    const handlerJob = await whenStarted(job.id);
    const seen: JsonValue[] = [];
    const second = gate();
    const waiting = db.ledger.waitForJob(job.id, {
      timeoutMs: 10_000,
      onProgress: (value) => {
        seen.push(value);
        if ((value as { done?: number }).done === 2) second.open();
      },
    });
    await waitUntilWatched(db, job.id);
    await handlerJob.progress({ done: 1, of: 2 });
    assert.deepEqual((await db.ledger.getJob(job.id))?.progress, { done: 1, of: 2 });
    await handlerJob.progress({ done: 2, of: 2 });
    await second.promise;
    held.get(job.id)?.open("ok");
    const done = await waiting;
    // Each new value at most once, in the order written (two writes close together may be read
    // as one: the waiter reads the row, and reports what it holds then).
    assert.deepEqual(seen.at(-1), { done: 2, of: 2 });
    assert.ok(seen.length <= 2);
    if (seen.length === 2) assert.deepEqual(seen[0], { done: 1, of: 2 });
    assert.deepEqual(done.progress, { done: 2, of: 2 });
    // After the handler returned, its job's writes are refused.
    await assert.rejects(handlerJob.progress({ late: true }), JobClaimLostError);
    assert.deepEqual((await db.ledger.getJob(job.id))?.progress, { done: 2, of: 2 });
  });

  it("refuses progress whose claim was taken away (the fence), and progress too large", async () => {
    const job = await db.ledger.addJob({ type: "held" });
    const handlerJob = await whenStarted(job.id);
    await assert.rejects(handlerJob.progress("x".repeat(9000)), JobValidationError);
    // Another worker's claim now (as after a reclaim): this attempt may no longer write.
    await db.sql("UPDATE jobs SET worker_id = 'someone-else' WHERE id = $1", [job.id]);
    await assert.rejects(handlerJob.progress({ step: 1 }), JobClaimLostError);
    assert.equal((await db.ledger.getJob(job.id))?.progress, null);
    await db.sql("UPDATE jobs SET status = 'done', worker_id = NULL WHERE id = $1", [job.id]);
    held.get(job.id)?.open(null);
  });

  it("reports type, attempt, duration and result or error in worker events", async () => {
    const completed = waitForEvent<[JobCompletedEvent]>(worker, "job:completed", (e) => e.type === "echo");
    const failed = waitForEvent<
      [{ id: number; type: string; attempt: number; error: string; runMs: number }]
    >(worker, "job:failed", (e) => e.type === "fails");
    const echo = await db.ledger.addJob({ type: "echo", payload: { hello: "world" } });
    const fails = await db.ledger.addJob({ type: "fails", maxRetries: 0 });
    const [c] = await completed;
    assert.equal(c.id, echo.id);
    assert.equal(c.attempt, 0);
    assert.ok(c.runMs >= 0);
    assert.deepEqual(c.result, { hello: "world" });
    const [f] = await failed;
    assert.equal(f.id, fails.id);
    assert.equal(f.attempt, 0);
    assert.match(f.error, /boom/);
    assert.ok(f.runMs >= 0);
  });
});

/** Resolves once job `id` is marked watched (its wait has listened and read it). */
async function waitUntilWatched(db: TestDb, id: number): Promise<void> {
  await eventually(async () => {
    const rows = await db.sql<{ watched: boolean }>("SELECT watched FROM jobs WHERE id = $1", [id]);
    return rows[0]?.watched === true;
  });
}

/** Resolves once `check` holds, checking every 20 ms; fails after 10 s. */
async function eventually(check: () => Promise<boolean>): Promise<void> {
  const deadline = Date.now() + 10_000;
  while (!(await check())) {
    if (Date.now() > deadline) assert.fail("condition not met within 10 s");
    await new Promise((resolve) => setTimeout(resolve, 20));
  }
}
