/**
 * Idempotency keys (issue 14, item 7) through the library: an enqueue naming a key a job holds
 * creates nothing and answers that job, in any state, also under 50 concurrent identical calls;
 * another body under the key is refused and writes nothing; the window frees old keys; batches
 * fold repeated keys; enqueues without a key add nothing to the key index.
 */
import assert from "node:assert/strict";
import { after, before, describe, it } from "node:test";
import { IdempotencyConflictError, JobValidationError } from "../../src/errors.js";
import { Ledger } from "../../src/queue/ledger.js";
import { createTestDb, type TestDb } from "../helpers/db.js";

let db: TestDb;
before(async () => {
  db = await createTestDb();
});
after(async () => {
  await db.drop();
});

const count = async (where: string, values: unknown[] = []) =>
  (await db.sql<{ n: number }>(`SELECT count(*)::int AS n FROM jobs WHERE ${where}`, values))[0]?.n;

describe("one key, one job", () => {
  it("a second enqueue with the key answers the first job and creates nothing", async () => {
    const first = await db.ledger.addJobReporting({ type: "idem", payload: { a: 1 }, idempotencyKey: "k-1" });
    const second = await db.ledger.addJobReporting({
      type: "idem",
      payload: { a: 1 },
      idempotencyKey: "k-1",
    });
    assert.equal(first.created, true);
    assert.equal(second.created, false);
    assert.equal(second.job.id, first.job.id);
    assert.equal(second.job.idempotencyKey, "k-1");
    assert.equal(
      (await db.ledger.addJob({ type: "idem", payload: { a: 1 }, idempotencyKey: "k-1" })).id,
      first.job.id,
    );
    assert.equal(await count("idempotency_key = 'k-1'"), 1);
    assert.equal((await db.ledger.getJob(first.job.id))?.idempotencyKey, "k-1");
  });

  it("holds in any state: a done job still answers its key", async () => {
    const session = await db.openLockSession("idem-worker");
    const job = await db.ledger.addJob({ type: "idem_done", idempotencyKey: "k-done" });
    const [claimed] = await session.claim(["idem_done"], 1);
    await session.complete([{ id: job.id, attempt: claimed?.attempt ?? 0, resultJson: '"ok"', runMs: 1 }]);
    const again = await db.ledger.addJobReporting({ type: "idem_done", idempotencyKey: "k-done" });
    assert.deepEqual(
      [again.created, again.job.id, again.job.status, again.job.result],
      [false, job.id, "done", "ok"],
    );
    await db.closeLockSessions();
  });

  it("the same body means the same JSON value: key order and spacing do not matter", async () => {
    const first = await db.ledger.addJob({
      type: "idem_order",
      payload: { a: 1, b: [1, 2] },
      idempotencyKey: "k-order",
    });
    const again = await db.ledger.addJobReporting({
      type: "idem_order",
      payload: { b: [1, 2], a: 1 },
      idempotencyKey: "k-order",
    });
    assert.deepEqual([again.created, again.job.id], [false, first.id]);
  });

  it("another body under the key is an IdempotencyConflictError naming the job; nothing is written", async () => {
    const first = await db.ledger.addJob({
      type: "idem_conflict",
      payload: { a: 1 },
      idempotencyKey: "k-conflict",
    });
    const before = await count("true");
    for (const spec of [
      { type: "idem_conflict", payload: { a: 2 } },
      { type: "idem_other", payload: { a: 1 } },
      { type: "idem_conflict", payload: { a: 1 }, priority: 9 },
      { type: "idem_conflict", payload: { a: 1 }, maxRetries: 0 },
      { type: "idem_conflict", payload: { a: 1 }, runAt: "2999-01-01T00:00:00Z" },
    ])
      await assert.rejects(
        db.ledger.addJob({ ...spec, idempotencyKey: "k-conflict" }),
        (error: unknown) =>
          error instanceof IdempotencyConflictError &&
          error.jobId === first.id &&
          error.key === "k-conflict" &&
          error.field === "idempotencyKey",
        JSON.stringify(spec),
      );
    assert.equal(await count("true"), before);
  });

  it("50 concurrent identical enqueues create one job; the other 49 answer it", async () => {
    const spec = { type: "idem_race", payload: { n: 7 }, idempotencyKey: "k-race" };
    const outcomes = await Promise.all(Array.from({ length: 50 }, () => db.ledger.addJobReporting(spec)));
    assert.equal(outcomes.filter((o) => o.created).length, 1);
    assert.equal(new Set(outcomes.map((o) => o.job.id)).size, 1);
    assert.equal(await count("type = 'idem_race'"), 1);
    // Through addJob too (the batcher is not used for keyed jobs).
    const jobs = await Promise.all(
      Array.from({ length: 50 }, () => db.ledger.addJob({ ...spec, idempotencyKey: "k-race-2" })),
    );
    assert.equal(new Set(jobs.map((j) => j.id)).size, 1);
    assert.equal(await count("idempotency_key = 'k-race-2'"), 1);
  });

  it("50 concurrent enqueues in callers' own transactions: one commits the job, the rest see it", async () => {
    const spec = { type: "idem_tx", idempotencyKey: "k-tx" };
    const outcomes = await Promise.all(
      Array.from({ length: 50 }, async () => {
        const client = await db.pool.connect();
        try {
          await client.query("BEGIN");
          const job = await db.ledger.addJob(spec, { client });
          await client.query("COMMIT");
          return job.id;
        } catch (error) {
          await client.query("ROLLBACK");
          throw error;
        } finally {
          client.release();
        }
      }),
    );
    assert.equal(new Set(outcomes).size, 1);
    assert.equal(await count("idempotency_key = 'k-tx'"), 1);
  });

  it("a key enqueued in a transaction that rolls back stays free", async () => {
    const client = await db.pool.connect();
    try {
      await client.query("BEGIN");
      await db.ledger.addJob({ type: "idem_rollback", idempotencyKey: "k-rollback" }, { client });
      await client.query("ROLLBACK");
    } finally {
      client.release();
    }
    const job = await db.ledger.addJobReporting({ type: "idem_rollback", idempotencyKey: "k-rollback" });
    assert.equal(job.created, true);
  });

  it("refuses a bad key naming the field", async () => {
    for (const key of ["", "k".repeat(256), "nul\u0000", 7 as unknown as string])
      await assert.rejects(
        db.ledger.addJob({ type: "idem", idempotencyKey: key }),
        (error: unknown) =>
          error instanceof JobValidationError && error.problems[0]?.field === "idempotencyKey",
      );
  });
});

describe("the window", () => {
  it("after idempotencyWindowSeconds the key goes to a new job, and the old one keeps none", async () => {
    const ledger = new Ledger(db.pool, db.schema, {
      maxPendingJobs: 0,
      maxPendingJobsPerType: 0,
      idempotencyWindowSeconds: 3600,
    });
    const old = await ledger.addJob({ type: "idem_window", idempotencyKey: "k-window" });
    assert.equal(
      (await ledger.addJobReporting({ type: "idem_window", idempotencyKey: "k-window" })).created,
      false,
    );
    await db.sql("UPDATE jobs SET created_at = now() - interval '2 hours' WHERE id = $1", [old.id]);
    const fresh = await ledger.addJobReporting({ type: "idem_window", idempotencyKey: "k-window" });
    assert.equal(fresh.created, true);
    assert.notEqual(fresh.job.id, old.id);
    assert.equal((await ledger.getJob(old.id))?.idempotencyKey, null);
    // Another body is no conflict once the window has passed.
    await db.sql("UPDATE jobs SET created_at = now() - interval '2 hours' WHERE id = $1", [fresh.job.id]);
    const other = await ledger.addJobReporting({
      type: "idem_window",
      payload: { x: 1 },
      idempotencyKey: "k-window",
    });
    assert.equal(other.created, true);
  });

  it("a window of 0 keeps the key for as long as the job exists", async () => {
    const ledger = new Ledger(db.pool, db.schema, {
      maxPendingJobs: 0,
      maxPendingJobsPerType: 0,
      idempotencyWindowSeconds: 0,
    });
    const old = await ledger.addJob({ type: "idem_forever", idempotencyKey: "k-forever" });
    await db.sql("UPDATE jobs SET created_at = now() - interval '400 days' WHERE id = $1", [old.id]);
    const again = await ledger.addJobReporting({ type: "idem_forever", idempotencyKey: "k-forever" });
    assert.deepEqual([again.created, again.job.id], [false, old.id]);
  });
});

describe("batches", () => {
  it("answer held keys with their jobs, in order, beside new jobs with and without keys", async () => {
    const held = await db.ledger.addJob({ type: "idem_batch", payload: 1, idempotencyKey: "b-held" });
    const outcomes = await db.ledger.addJobsReporting([
      { type: "idem_batch", payload: 0 },
      { type: "idem_batch", payload: 1, idempotencyKey: "b-held" },
      { type: "idem_batch", payload: 2, idempotencyKey: "b-new" },
      { type: "idem_batch", payload: 3 },
      { type: "idem_batch", payload: 2, idempotencyKey: "b-new" },
    ]);
    assert.deepEqual(
      outcomes.map((o) => [o.job.payload, o.created, o.job.idempotencyKey]),
      [
        [0, true, null],
        [1, false, "b-held"],
        [2, true, "b-new"],
        [3, true, null],
        [2, false, "b-new"],
      ],
    );
    assert.equal(outcomes[1]?.job.id, held.id);
    assert.equal(outcomes[4]?.job.id, outcomes[2]?.job.id, "a key repeated in the batch is one job");
    assert.ok((outcomes[0]?.job.id ?? 0) < (outcomes[3]?.job.id ?? 0), "new jobs keep the batch's order");
    assert.deepEqual(
      await db.ledger.addJobIds([{ type: "idem_batch", payload: 1, idempotencyKey: "b-held" }]),
      [held.id],
    );
  });

  it("a key repeated with another body in one batch is a 422-style problem naming the later job", async () => {
    await assert.rejects(
      db.ledger.addJobs(
        [
          { type: "idem_batch2", payload: 1, idempotencyKey: "b-twice" },
          { type: "idem_batch2", payload: 2, idempotencyKey: "b-twice" },
        ],
        { naming: "snake" },
      ),
      (error: unknown) =>
        error instanceof JobValidationError && error.problems[0]?.field === "jobs/1/idempotency_key",
    );
    assert.equal(await count("type = 'idem_batch2'"), 0);
  });

  it("a held key with another body refuses the whole batch; nothing is written", async () => {
    const held = await db.ledger.addJob({ type: "idem_batch3", payload: 1, idempotencyKey: "b-conflict" });
    await assert.rejects(
      db.ledger.addJobs(
        [
          { type: "idem_batch3", payload: 5 },
          { type: "idem_batch3", payload: 2, idempotencyKey: "b-conflict" },
        ],
        { naming: "snake" },
      ),
      (error: unknown) =>
        error instanceof IdempotencyConflictError &&
        error.jobId === held.id &&
        error.field === "jobs/1/idempotency_key",
    );
    assert.equal(await count("type = 'idem_batch3'"), 1);
  });
});

describe("the cost for jobs without a key", () => {
  it("an enqueue without a key adds no entry to the key index", async () => {
    const fresh = await createTestDb();
    try {
      const size = async () =>
        (
          await fresh.sql<{ bytes: number }>(
            "SELECT pg_relation_size(format('%I.jobs_idempotency_key_idx', $1::text)::regclass)::int AS bytes",
            [fresh.schema],
          )
        )[0]?.bytes;
      const empty = await size();
      await fresh.ledger.addJobs(Array.from({ length: 5000 }, (_, i) => ({ type: "plain", payload: i })));
      await Promise.all(Array.from({ length: 200 }, () => fresh.ledger.addJob({ type: "plain" })));
      assert.equal(await size(), empty, "the partial index did not grow");
      await fresh.ledger.addJob({ type: "keyed", idempotencyKey: "one" });
      assert.ok(((await size()) ?? 0) > (empty ?? 0), "a keyed job adds an entry (the check sees growth)");
    } finally {
      await fresh.drop();
    }
  });
});
