/**
 * A notification is only a wake-up: its size limit (PostgreSQL refuses a NOTIFY payload of 8,000
 * bytes or more) never refuses a valid insert or give-back (shared/cases 18). A payload that would
 * not fit, counted in bytes, is sent as `*`, which wakes every worker.
 */
import assert from "node:assert/strict";
import { after, before, describe, it } from "node:test";
import type pg from "pg";
import { createTestDb, type TestDb } from "../helpers/db.js";

let db: TestDb;
let listener: pg.PoolClient;
const notifications: string[] = [];
before(async () => {
  db = await createTestDb();
  listener = await db.pool.connect();
  listener.on("notification", (m) => notifications.push(m.payload ?? ""));
  await listener.query(`LISTEN "${db.config.notifyChannel}"`);
});
after(async () => {
  await listener.query("UNLISTEN *");
  listener.release();
  await db.drop();
});

/** 25 distinct types of 200 "é": each valid (200 characters), 400 bytes of UTF-8, 10,000 in all. */
const wideTypes = Array.from({ length: 25 }, (_, i) => `${"é".repeat(199)}${String.fromCharCode(97 + i)}`);

/** Resolves with the next notification on the test's channel. */
function nextNotification(): Promise<string> {
  const seen = notifications.length;
  return new Promise((resolve, reject) => {
    const timer = setTimeout(() => reject(new Error("no notification within 5 s")), 5000);
    const check = () => {
      if (notifications.length > seen) {
        clearTimeout(timer);
        listener.off("notification", check);
        resolve(notifications[seen] as string);
      }
    };
    listener.on("notification", check);
  });
}

describe("NOTIFY payload size", () => {
  it("a batch whose distinct types pass 8,000 bytes is inserted whole and wakes every worker", async () => {
    assert.ok(wideTypes.every((t) => t.length === 200));
    const woken = nextNotification();
    const jobs = await db.ledger.addJobs(wideTypes.map((type) => ({ type })));
    assert.equal(jobs.length, 25);
    assert.equal(await woken, "*");
    const [row] = await db.sql<{ n: number }>("SELECT count(*)::int AS n FROM jobs WHERE type = ANY($1)", [
      wideTypes,
    ]);
    assert.equal(row?.n, 25);
  });

  it("giving such jobs back wakes every worker too, and the release is written", async () => {
    const session = await db.openLockSession("w1");
    const claimed = await session.claim(wideTypes, 100);
    assert.equal(claimed.length, 25);
    const woken = nextNotification();
    assert.deepEqual(await session.release(claimed.map((j) => ({ id: j.id, attempt: j.attempt }))), []);
    assert.equal(await woken, "*");
    const [row] = await db.sql<{ n: number }>(
      "SELECT count(*)::int AS n FROM jobs WHERE type = ANY($1) AND status = 'pending'",
      [wideTypes],
    );
    assert.equal(row?.n, 25);
    await db.closeLockSessions();
  });
});
