/**
 * Transactional completion (issue 13, item 5): `job.complete(client, result)` inside the handler's
 * own transaction commits or rolls back with the handler's side effects; the worker writes nothing
 * more for the job once its handler returns; a worker that lost the claim cannot complete it.
 */
import assert from "node:assert/strict";
import { after, before, describe, it } from "node:test";
import type pg from "pg";
import { JobClaimLostError } from "../../src/errors.js";
import type { JobCompletedEvent } from "../../src/worker/events.js";
import { UNCOMMITTED_COMPLETION } from "../../src/worker/handler-context.js";
import type { HandlerJob } from "../../src/worker/registry.js";
import type { Worker } from "../../src/worker/worker.js";
import { createTestDb, type TestDb } from "../helpers/db.js";
import { waitForEvent } from "../helpers/events.js";
import { startWorker } from "../helpers/worker.js";

type Step = "commit" | "rollback-throw" | "rollback-return" | "fenced";

describe("job.complete(client, result) in the handler's transaction", () => {
  let db: TestDb;
  let worker: Worker;
  const events: {
    completed: JobCompletedEvent[];
    fenced: number[];
    failed: { id: number; error: string }[];
  } = {
    completed: [],
    fenced: [],
    failed: [],
  };
  /**
   * What the handler does on each attempt, one step per attempt: carried in the job's payload, so
   * that a worker which claims the job before `addJob` has returned still follows it.
   */
  const planOf = (job: HandlerJob): Step[] => (job.payload as { plan?: Step[] } | null)?.plan ?? [];
  const fencedErrors = new Map<number, unknown>();
  /** Job ids by the payload key the test gave them, as the handler saw them. */
  const idsByKey = new Map<number, number>();

  /** The handler: writes a side effect in its transaction, completes the job there, then the plan's step. */
  async function handler(job: HandlerJob): Promise<unknown> {
    const key = (job.payload as { key?: number } | null)?.key;
    if (key !== undefined) idsByKey.set(key, job.id);
    const step = planOf(job)[job.attempt] ?? "commit";
    const client: pg.PoolClient = await db.pool.connect();
    try {
      if (step === "fenced")
        await client.query(`UPDATE "${db.schema}".jobs SET worker_id = 'another-worker' WHERE id = $1`, [
          job.id,
        ]);
      await client.query("BEGIN");
      await client.query(`INSERT INTO "${db.schema}".side_effects (job_id, attempt) VALUES ($1, $2)`, [
        job.id,
        job.attempt,
      ]);
      try {
        await job.complete(client, { attempt: job.attempt });
      } catch (error) {
        fencedErrors.set(job.id, error);
        await client.query("ROLLBACK");
        if (step === "fenced")
          // Hand the job back to this worker so that the test can end it (its lock is still held).
          await client.query(`UPDATE "${db.schema}".jobs SET status = 'cancelled' WHERE id = $1`, [job.id]);
        throw error;
      }
      if (step === "commit") {
        await client.query("COMMIT");
        return "ignored: the transaction completed the job";
      }
      await client.query("ROLLBACK");
      if (step === "rollback-throw") throw new Error("the handler rolled back");
      return "returned after a rollback";
    } finally {
      client.release();
    }
  }

  before(async () => {
    db = await createTestDb();
    await db.sql("CREATE TABLE side_effects (job_id bigint NOT NULL, attempt int NOT NULL)");
    worker = await startWorker(db, { handlers: { tx: handler } });
    worker.on("job:completed", (e) => events.completed.push(e));
    worker.on("job:fenced", ({ id }) => events.fenced.push(id));
    worker.on("job:failed", ({ id, error }) => events.failed.push({ id, error }));
  });
  after(async () => {
    await worker.stop();
    await db.drop();
  });

  const sideEffects = async (id: number) =>
    (
      await db.sql<{ attempt: number }>(
        "SELECT attempt FROM side_effects WHERE job_id = $1 ORDER BY attempt",
        [id],
      )
    ).map((r) => r.attempt);
  const locksHeld = async (id: number) =>
    (
      await db.sql<{ n: number }>(
        `SELECT count(*)::int AS n FROM pg_locks WHERE locktype = 'advisory' AND objsubid = 2 AND objid = $1
           AND classid = ($2::int4::bigint & 4294967295)::oid`,
        [id, db.ledger.lockClass],
      )
    )[0]?.n;

  /**
   * Adds a job of type `tx` with `payload`, having first begun waiting for `eventName` of it: the
   * worker may claim and finish the job before `addJob` returns its id, so the wait matches by a
   * key in the payload, which the event's id is resolved through.
   */
  let nextKey = 0;
  async function addAndAwait(
    eventName: "job:completed" | "job:fenced",
    payload: { plan?: Step[] },
    maxRetries?: number,
  ): Promise<{ job: { id: number }; event: Promise<unknown[]> }> {
    const key = nextKey++;
    let id: number | undefined;
    const event = waitForEvent<[{ id: number }]>(
      worker,
      eventName,
      (e) => e.id === (id ?? idsByKey.get(key)),
    );
    const job = await db.ledger.addJob({
      type: "tx",
      payload: { ...payload, key },
      ...(maxRetries === undefined ? {} : { maxRetries }),
    });
    id = job.id;
    return { job, event };
  }

  it("commit: the job is done with the transaction's result, once, and its lock released", async () => {
    const { job, event } = await addAndAwait("job:completed", {});
    const [completed] = (await event) as [JobCompletedEvent];
    assert.deepEqual(completed.result, { attempt: 0 });
    assert.equal(completed.type, "tx");
    const row = await db.ledger.getJob(job.id);
    assert.equal(row?.status, "done");
    assert.deepEqual(row?.result, { attempt: 0 });
    assert.equal(row?.attempt, 0);
    assert.deepEqual(await sideEffects(job.id), [0]);
    assert.equal(events.completed.filter((e) => e.id === job.id).length, 1);
    assert.equal(events.fenced.includes(job.id), false);
    assert.equal(await locksHeld(job.id), 0);
  });

  it("rollback and throw: the attempt fails and is retried; the retry's commit completes it", async () => {
    const { job, event } = await addAndAwait("job:completed", { plan: ["rollback-throw", "commit"] });
    await event;
    const row = await db.ledger.getJob(job.id);
    assert.equal(row?.status, "done");
    assert.equal(row?.attempt, 1);
    assert.deepEqual(row?.result, { attempt: 1 });
    assert.match(row?.errors[0]?.error ?? "", /the handler rolled back/);
    // The rolled-back attempt left no side effect; the committed one left one.
    assert.deepEqual(await sideEffects(job.id), [1]);
    assert.equal(events.completed.filter((e) => e.id === job.id).length, 1);
  });

  it("rollback and return: the attempt fails (its completion never committed) and is retried", async () => {
    const { job, event } = await addAndAwait("job:completed", { plan: ["rollback-return", "commit"] });
    await event;
    const row = await db.ledger.getJob(job.id);
    assert.equal(row?.attempt, 1);
    assert.equal(row?.errors[0]?.error, UNCOMMITTED_COMPLETION);
    assert.deepEqual(await sideEffects(job.id), [1]);
  });

  it("a worker that lost the claim cannot complete the job: refused, nothing of its transaction kept", async () => {
    const { job, event } = await addAndAwait("job:fenced", { plan: ["fenced"] }, 0);
    await event;
    assert.ok(fencedErrors.get(job.id) instanceof JobClaimLostError);
    const row = await db.ledger.getJob(job.id);
    assert.equal(row?.status, "cancelled");
    assert.equal(row?.result, null);
    assert.deepEqual(await sideEffects(job.id), []);
    assert.equal(
      events.completed.some((e) => e.id === job.id),
      false,
    );
    assert.equal(await locksHeld(job.id), 0);
  });
});
