/** Enqueueing: concurrent single enqueues share statements, yet each caller gets its own outcome. */
import assert from "node:assert/strict";
import { after, before, describe, it } from "node:test";
import { JobValidationError } from "../../src/errors.js";
import { createTestDb, type TestDb } from "../helpers/db.js";

let db: TestDb;
before(async () => {
  db = await createTestDb();
});
after(async () => {
  await db.drop();
});

describe("enqueue", () => {
  it("200 concurrent addJob calls each get their own job, ids in call order", async () => {
    const jobs = await Promise.all(
      Array.from({ length: 200 }, (_, i) => db.ledger.addJob({ type: "noop", payload: { i } })),
    );
    assert.deepEqual(
      jobs.map((j) => j.payload),
      Array.from({ length: 200 }, (_, i) => ({ i })),
    );
    const ids = jobs.map((j) => j.id);
    assert.deepEqual(
      ids,
      [...ids].sort((a, b) => a - b),
    );
    assert.equal(new Set(ids).size, 200);
  });

  it("the job an enqueue returns is the job a read returns", async () => {
    const runAt = new Date(Date.now() + 60_000);
    const jobs = await db.ledger.addJobs([
      { type: "noop", payload: { b: [1, 2.5, "x"], a: { nested: null } }, priority: 9, maxRetries: 0 },
      { type: "other", runAt },
    ]);
    const single = await db.ledger.addJob({ type: "noop", payload: { n: 1 } });
    for (const job of [...jobs, single]) assert.deepEqual(job, await db.ledger.getJob(job.id));
    assert.equal(jobs[1]?.runAt.getTime(), runAt.getTime());
  });

  it("the times an insert returns are the stored times to the millisecond, at every millisecond boundary", async () => {
    // Run times on whole milliseconds (.000, .001, .999) are the edge of the epoch arithmetic;
    // created_at carries the database clock's microseconds.
    const base = Date.now() + 3_600_000;
    const specs = Array.from({ length: 1000 }, (_, i) => ({
      type: "noop",
      runAt: new Date(base - (base % 1000) + i * 1001 + (i % 3 === 0 ? 999 : i % 3)),
    }));
    // Far in the future a float8 epoch in seconds no longer holds microseconds.
    for (const far of ["2245-07-10T18:08:55.324Z", "2999-12-31T23:59:59.999Z", "9999-12-31T23:59:59.001Z"])
      specs.push({ type: "noop", runAt: new Date(far) });
    const jobs = await db.ledger.addJobs(specs);
    const reads = await db.ledger.listJobs({ limit: 1000 });
    reads.push(...(await db.ledger.listJobs({ limit: 1000, offset: 1000 })));
    const byId = new Map(reads.map((job) => [job.id, job]));
    for (const [i, job] of jobs.entries()) {
      assert.equal(job.runAt.getTime(), specs[i]?.runAt.getTime());
      assert.equal(job.runAt.getTime(), byId.get(job.id)?.runAt.getTime());
      assert.equal(job.createdAt.getTime(), byId.get(job.id)?.createdAt.getTime());
    }
  });

  it("addJobIds answers the new ids in the order given, and writes nothing if any spec is bad", async () => {
    const ids = await db.ledger.addJobIds([
      { type: "first", payload: { n: 1 } },
      { type: "second", priority: 9 },
    ]);
    assert.equal(ids.length, 2);
    assert.deepEqual(await Promise.all(ids.map(async (id) => (await db.ledger.getJob(id))?.type)), [
      "first",
      "second",
    ]);
    const [before] = await db.sql<{ n: number }>("SELECT count(*)::int AS n FROM jobs");
    await assert.rejects(
      db.ledger.addJobIds([{ type: "ok" }, { type: "bad", priority: 11 }]),
      (error: unknown) =>
        error instanceof JobValidationError && error.problems.some((p) => p.field === "jobs/1/priority"),
    );
    const [after] = await db.sql<{ n: number }>("SELECT count(*)::int AS n FROM jobs");
    assert.equal(after?.n, before?.n);
    assert.deepEqual(await db.ledger.addJobIds([]), []);
    await assert.rejects(
      db.ledger.addJobIds([{ type: "ok" }, null as unknown as { type: string }]),
      (error: unknown) =>
        error instanceof JobValidationError &&
        error.problems.some((p) => p.field === "jobs/1" && /object/.test(p.message)),
    );
  });

  it("fewer statements than calls: 200 concurrent enqueues fire fewer than 200 notifications", async () => {
    const listener = await db.pool.connect();
    let notifications = 0;
    listener.on("notification", () => {
      notifications++;
    });
    await listener.query(`LISTEN "${db.config.notifyChannel}"`);
    try {
      await Promise.all(Array.from({ length: 200 }, () => db.ledger.addJob({ type: "noop" })));
      await listener.query("SELECT 1"); // notifications of committed statements arrive before this reply
      assert.ok(notifications >= 1 && notifications < 200, `${notifications} notifications`);
    } finally {
      await listener.query("UNLISTEN *");
      listener.release();
    }
  });

  it("a job the database refuses fails alone; the others in its batch are stored", async () => {
    await db.sql("ALTER TABLE jobs ADD CONSTRAINT no_forbidden CHECK (type <> 'forbidden')");
    try {
      const results = await Promise.allSettled(
        ["noop", "forbidden", "noop", "echo"].map((type) => db.ledger.addJob({ type })),
      );
      assert.deepEqual(
        results.map((r) => r.status),
        ["fulfilled", "rejected", "fulfilled", "fulfilled"],
      );
      const rejected = results[1] as PromiseRejectedResult;
      assert.match(String(rejected.reason), /no_forbidden/);
    } finally {
      await db.sql("ALTER TABLE jobs DROP CONSTRAINT no_forbidden");
    }
  });

  it("with a client, the job exists only if the caller's transaction commits", async () => {
    const client = await db.pool.connect();
    try {
      await client.query("BEGIN");
      const job = await db.ledger.addJob({ type: "noop", payload: "tx" }, { client });
      await client.query("ROLLBACK");
      assert.equal(await db.ledger.getJob(job.id), null);
      await client.query("BEGIN");
      const kept = await db.ledger.addJob({ type: "noop", payload: "tx" }, { client });
      await client.query("COMMIT");
      assert.equal((await db.ledger.getJob(kept.id))?.status, "pending");
    } finally {
      client.release();
    }
  });
});

describe("long schema names", () => {
  it("two 60-character schemas sharing a 55-character prefix work side by side on one pool", async () => {
    const { createTestDb: create } = await import("../helpers/db.js");
    const prefix = `tq_${"long_schema_name_".repeat(3)}`.padEnd(55, "x");
    const a = await create({ schema: `${prefix}_aaaa`, notifyChannel: "long_a" });
    const b = await create({ schema: `${prefix}_bbbb`, notifyChannel: "long_b" });
    try {
      // The same pool connection prepares the statement for both schemas.
      const client = await a.pool.connect();
      try {
        const { Ledger } = await import("../../src/queue/ledger.js");
        const viaA = new Ledger(a.pool, a.schema);
        const viaB = new Ledger(a.pool, b.schema);
        const jobA = await viaA.addJob({ type: "noop" }, { client });
        const jobB = await viaB.addJob({ type: "noop" }, { client });
        assert.equal((await viaA.getJob(jobA.id))?.type, "noop");
        assert.equal((await viaB.getJob(jobB.id))?.type, "noop");
      } finally {
        client.release();
      }
    } finally {
      await a.drop();
      await b.drop();
    }
  });
});
