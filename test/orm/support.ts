/**
 * The shared cases of the ORM adapter tests (issue 13 item 6): each adapter's file supplies a
 * harness over its ORM, and these cases check on real PostgreSQL that jobs enqueued inside the
 * ORM's transaction exist only if it commits, alongside the application's own row.
 */
import assert from "node:assert/strict";
import { after, before, describe, it } from "node:test";
import type { Queryable } from "../../src/db/pool.js";
import type { Job } from "../../src/queue/types.js";
import { createTestDb, type TestDb } from "../helpers/db.js";

/** What a test file provides over its ORM. */
export interface OrmHarness {
  /**
   * Runs `fn` in one of the ORM's transactions (committed when `fn` resolves, rolled back when it
   * throws): `client` is the adapter over that transaction, `insertOrder` inserts a row of the
   * test schema's `orders` table through the ORM itself.
   */
  transaction(
    fn: (client: Queryable, insertOrder: (ref: string) => Promise<void>) => Promise<void>,
  ): Promise<void>;
  /** Ends the ORM's connections. */
  close(): Promise<void>;
}

/** Raised inside a transaction to roll it back. */
class Rollback extends Error {}

/** Registers the adapter cases of one ORM; `open` builds its harness on the test schema. */
export function describeOrmAdapter(name: string, open: (db: TestDb) => Promise<OrmHarness>): void {
  let db: TestDb;
  let orm: OrmHarness;
  before(async () => {
    db = await createTestDb();
    await db.sql("CREATE TABLE orders (ref text PRIMARY KEY)");
    orm = await open(db);
  });
  after(async () => {
    await orm?.close();
    await db?.drop();
  });

  const jobsOfType = (type: string) => db.sql<{ id: number }>("SELECT id FROM jobs WHERE type = $1", [type]);
  const orderCount = async (ref: string) =>
    (await db.sql<{ n: number }>("SELECT count(*)::int AS n FROM orders WHERE ref = $1", [ref]))[0]?.n;

  /** Enqueues one job, a batch of two and a keyed job through `client`; answers them. */
  async function enqueueAll(client: Queryable, type: string): Promise<Job[]> {
    const single = await db.ledger.addJob({ type, payload: { order: "a", n: 1 }, priority: 7 }, { client });
    const batch = await db.ledger.addJobs(
      [
        { type, payload: { i: 1 } },
        { type, payload: { i: 2 }, runAt: new Date(Date.now() + 60_000) },
      ],
      { client },
    );
    const keyed = await db.ledger.addJob(
      { type, payload: { k: true }, idempotencyKey: `${type}-key` },
      { client },
    );
    const again = await db.ledger.addJob(
      { type, payload: { k: true }, idempotencyKey: `${type}-key` },
      { client },
    );
    assert.equal(again.id, keyed.id, "a held idempotency key answers its job inside the transaction too");
    return [single, ...batch, keyed];
  }

  describe(`${name}: enqueue inside the ORM's transaction`, () => {
    it("a committed transaction has its jobs, as addJob answered them, and its own row", async () => {
      let enqueued: Job[] = [];
      await orm.transaction(async (client, insertOrder) => {
        await insertOrder("commit-1");
        enqueued = await enqueueAll(client, `${name}_commit`);
        // Not visible outside the transaction before it commits.
        assert.equal((await jobsOfType(`${name}_commit`)).length, 0);
      });
      assert.equal(enqueued.length, 4);
      assert.equal(await orderCount("commit-1"), 1);
      assert.deepEqual(
        (await jobsOfType(`${name}_commit`)).map((r) => r.id).sort(),
        enqueued.map((j) => j.id).sort(),
      );
      for (const job of enqueued) {
        assert.equal(typeof job.id, "number");
        assert.ok(job.createdAt instanceof Date);
        const stored = await db.ledger.getJob(job.id);
        assert.deepEqual(job, stored);
      }
    });

    it("a rolled-back transaction leaves no job and no row", async () => {
      await assert.rejects(
        orm.transaction(async (client, insertOrder) => {
          await insertOrder("rollback-1");
          const jobs = await enqueueAll(client, `${name}_rollback`);
          assert.equal(jobs.length, 4);
          throw new Rollback("roll back");
        }),
        Rollback,
      );
      assert.equal(await orderCount("rollback-1"), 0);
      assert.deepEqual(await jobsOfType(`${name}_rollback`), []);
    });

    it("a failed enqueue inside the transaction rolls back the application's row too", async () => {
      await assert.rejects(
        orm.transaction(async (client, insertOrder) => {
          await insertOrder("bad-1");
          await db.ledger.addJob({ type: `${name}_bad`, payload: {} }, { client });
          // Same key, another body: the database refuses it, and the transaction with it.
          await db.ledger.addJob({ type: `${name}_bad`, payload: { k: 1 }, idempotencyKey: "k" }, { client });
          await db.ledger.addJob({ type: `${name}_bad`, payload: { k: 2 }, idempotencyKey: "k" }, { client });
        }),
      );
      assert.equal(await orderCount("bad-1"), 0);
      assert.deepEqual(await jobsOfType(`${name}_bad`), []);
    });
  });
}
