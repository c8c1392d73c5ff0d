/** The library refuses what the API refuses, before anything is written (DESIGN.md §8). */
import assert from "node:assert/strict";
import { after, before, describe, it } from "node:test";
import { JobValidationError } from "../../src/errors.js";
import type { JsonValue } from "../../src/queue/types.js";
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
    await rejectsWith(db.ledger.addJob({ type: "noop", maxRetries: -1 }), "maxRetries");
    await rejectsWith(db.ledger.addJob({ type: "noop", runAt: "2030-01-01T12:00:00" }), "runAt");
    await rejectsWith(db.ledger.addJob({ type: "noop", runAt: "2030-02-30T12:00:00Z" }), "runAt");
    await rejectsWith(db.ledger.addJob({ type: "noop", maxRetries: -1 }, { naming: "snake" }), "max_retries");
    await rejectsWith(db.ledger.addJob({ type: "noop", payload: { a: ["x", "y\u0000"] } }), "payload/a/1");
    await rejectsWith(db.ledger.addJob({ type: "noop", payload: { lone: "\ud800" } }), "payload/lone");
    await rejectsWith(db.ledger.addJob({ type: "noop", payload: { n: Number.NaN } }), "payload");
    // NaN and ±Infinity anywhere, beside real nulls or behind toJSON, would silently become null.
    const hidden = { a: null, b: [1, { c: Number.NEGATIVE_INFINITY }] };
    await rejectsWith(db.ledger.addJob({ type: "noop", payload: hidden }), "payload");
    const viaToJson = { at: { toJSON: () => Number.POSITIVE_INFINITY } } as unknown as JsonValue;
    await rejectsWith(db.ledger.addJob({ type: "noop", payload: viaToJson }), "payload");
    // What JSON.stringify stores is what counts: a toJSON that yields a NUL, even behind a cycle.
    const viaToJsonNul = { a: { toJSON: () => "x\u0000" } } as unknown as JsonValue;
    await rejectsWith(db.ledger.addJob({ type: "noop", payload: viaToJsonNul }), "payload/a");
    const cyclic: Record<string, unknown> = { toJSON: () => "x\u0000" };
    cyclic.self = cyclic;
    await rejectsWith(db.ledger.addJob({ type: "noop", payload: cyclic as unknown as JsonValue }), "payload");
    // The first bad string in document order is named.
    await rejectsWith(
      db.ledger.addJob({ type: "noop", payload: { a: "\u0000", "b\u0000": 1 } }),
      "payload/a",
    );
    const fine = await db.ledger.addJob({ type: "noop", payload: { a: null, when: new Date(0) as never } });
    assert.deepEqual(fine.payload, { a: null, when: "1970-01-01T00:00:00.000Z" });
  });

  it("refuses a payload nested deeper than 1,000 levels, and takes one 1,000 deep", async () => {
    const nested = (depth: number, leaf: JsonValue): JsonValue => {
      let value = leaf;
      for (let i = 0; i < depth; i++) value = i % 2 === 0 ? [value] : { k: value };
      return value;
    };
    for (const leaf of [null, 1, "s"])
      await rejectsWith(db.ledger.addJob({ type: "noop", payload: nested(5000, leaf) }), "payload");
    await rejectsWith(db.ledger.addJob({ type: "noop", payload: nested(1001, null) }), "payload");
    const deepest = await db.ledger.addJob({ type: "noop", payload: nested(1000, null) });
    assert.deepEqual(deepest.payload, nested(1000, null));
    assert.deepEqual((await db.ledger.getJob(deepest.id))?.payload, nested(1000, null));
    // A string full of brackets is not nesting.
    const text = await db.ledger.addJob({ type: "noop", payload: { s: "[".repeat(5000) } });
    assert.equal((text.payload as { s: string }).s.length, 5000);
  });

  it("refuses unknown fields, such as the HTTP spelling or a typo", async () => {
    await rejectsWith(db.ledger.addJob({ type: "noop", max_retries: 7 } as never), "max_retries");
    await rejectsWith(db.ledger.addJob({ type: "noop", prority: 9 } as never), "prority");
  });

  it("refuses a payload over 1 MiB of JSON, and takes one just under", async () => {
    const big = "x".repeat(1024 * 1024);
    await rejectsWith(db.ledger.addJob({ type: "noop", payload: big }), "payload");
    const fits = await db.ledger.addJob({ type: "noop", payload: big.slice(0, 1024 * 1024 - 2) });
    assert.equal((fits.payload as string).length, 1024 * 1024 - 2);
  });

  it("lists leave out payloads over 64 KiB and say so; the job itself has it", async () => {
    const job = await db.ledger.addJob({ type: "noop", payload: { blob: "y".repeat(200_000) } });
    const [listed] = await db.ledger.listJobs({ limit: 1 });
    assert.equal(listed?.id, job.id);
    assert.equal(listed?.payload, null);
    assert.equal(listed?.payloadOmitted, true);
    assert.deepEqual((await db.ledger.getJob(job.id))?.payload, { blob: "y".repeat(200_000) });
    await db.sql("DELETE FROM jobs");
  });

  it("refuses an id that is not a positive integer", async () => {
    await rejectsWith(db.ledger.getJob(1.5), "id");
    await rejectsWith(db.ledger.cancelJob(0), "id");
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
