/**
 * A batch as large as the library takes: more than 256 MiB of payloads, PostgreSQL's cap of one
 * jsonb value. Its file name ends in `.serial.test.ts`, so scripts/run-tests.mjs runs it alone:
 * writing 270 MiB in one transaction keeps the server's disk busy for seconds, which delayed the
 * commits of tests running beside it past their bounds.
 */
import assert from "node:assert/strict";
import { after, before, describe, it } from "node:test";
import { createTestDb, type TestDb } from "../helpers/db.js";

let db: TestDb;
before(async () => {
  db = await createTestDb();
});
after(async () => {
  await db.drop();
});

describe("library validation, the largest batch", () => {
  it("a batch whose payloads add up to more than 256 MiB goes in whole (PostgreSQL's cap of one jsonb)", async () => {
    const big = "z".repeat(1024 * 1024 - 32);
    const jobs = await db.ledger.addJobs(
      Array.from({ length: 270 }, (_, i) => ({ type: "big", payload: { i, big } })),
    );
    assert.equal(jobs.length, 270);
    const [stored] = await db.sql<{ n: number; bytes: string }>(
      "SELECT count(*)::int AS n, sum(length(payload->>'big'))::text AS bytes FROM jobs WHERE type = 'big'",
    );
    assert.equal(stored?.n, 270);
    assert.equal(stored?.bytes, String(270 * big.length));
    await db.sql("DELETE FROM jobs WHERE type = 'big'");
  });
});
