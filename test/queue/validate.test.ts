/** The library refuses what the API refuses, before anything is written (DESIGN.md §8). */
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

async function rejectsWith(action: Promise<unknown>, field: string): Promise<void> {
  await assert.rejects(action, (error: unknown) => {
    assert.ok(error instanceof JobValidationError, `expected JobValidationError, got ${String(error)}`);
    assert.ok(
      error.problems.some((p) => p.field === field),
      `expected a problem naming ${field}: ${error.message}`,
    );
    return true;
  });
}

describe("library validation", () => {
  it("names each bad field of a job spec", async () => {
    await rejectsWith(db.ledger.addJob({ type: "" }), "type");
    await rejectsWith(db.ledger.addJob({ type: "noop", priority: 11 }), "priority");
    await rejectsWith(db.ledger.addJob({ type: "noop", maxRetries: -1 }), "max_retries");
    await rejectsWith(db.ledger.addJob({ type: "noop", runAt: "2030-01-01T12:00:00" }), "run_at");
    await rejectsWith(db.ledger.addJob({ type: "noop", runAt: "2030-02-30T12:00:00Z" }), "run_at");
    await rejectsWith(db.ledger.addJob({ type: "noop", payload: { a: ["x", "y\u0000"] } }), "payload/a/1");
    await rejectsWith(db.ledger.addJob({ type: "noop", payload: { lone: "\ud800" } }), "payload/lone");
    await rejectsWith(db.ledger.addJob({ type: "noop", payload: { n: Number.NaN } }), "payload");
  });

  it("a batch with one bad job writes nothing and names jobs/<index>/<field>", async () => {
    await rejectsWith(
      db.ledger.addJobs([{ type: "noop" }, { type: "noop", priority: 0 }, { type: "noop" }]),
      "jobs/1/priority",
    );
    assert.deepEqual(await db.ledger.listJobs(), []);
  });

  it("refuses a bad list query", async () => {
    await rejectsWith(db.ledger.listJobs({ limit: 0 }), "limit");
    await rejectsWith(db.ledger.listJobs({ offset: -1 }), "offset");
    await rejectsWith(db.ledger.listJobs({ status: "lost" as never }), "status");
  });

  it("keeps well-formed text: emoji, accents and a literal backslash-u sequence", async () => {
    const payload = { text: "héllo 👋", escaped: "\\u0000 is not a NUL" };
    const job = await db.ledger.addJob({ type: "noop", payload });
    assert.deepEqual(job.payload, payload);
  });
});
