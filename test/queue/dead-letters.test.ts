/**
 * Dead letters (issue 14, item 1) and retry now (item 2), through the library on real PostgreSQL:
 * list with filters and pages; replay of one (idempotent, also under concurrent calls) and of a
 * filter in bounded batches; discard; retry of a pending or dead job; each wakes the workers of its
 * type, and the counters stay exact.
 */
import assert from "node:assert/strict";
import { after, before, describe, it } from "node:test";
import type pg from "pg";
import {
  DeadLetterNotFoundError,
  JobNotFoundError,
  JobStateConflictError,
  JobValidationError,
} from "../../src/errors.js";
import { createTestDb, type TestDb, type TestLockSession } from "../helpers/db.js";
import { assertCountersExact, killJobs } from "../helpers/dead.js";
import { waitForEvent } from "../helpers/events.js";
import { startWorker } from "../helpers/worker.js";

let db: TestDb;
let session: TestLockSession;
before(async () => {
  db = await createTestDb();
  session = await db.openLockSession("dead-letter-tester");
});
after(async () => {
  await db.drop();
});

/**
 * Listens on the schema's channel; `next()` resolves with the next notification's payload, or
 * rejects after 10 s.
 */
async function listen(): Promise<{ next(): Promise<string | undefined>; close(): Promise<void> }> {
  const client: pg.PoolClient = await db.pool.connect();
  await client.query(`LISTEN "${db.config.notifyChannel}"`);
  return {
    next: () =>
      new Promise((resolve, reject) => {
        const timer = setTimeout(() => reject(new Error("no notification within 10 s")), 10_000);
        client.once("notification", (m) => {
          clearTimeout(timer);
          resolve(m.payload);
        });
      }),
    close: async () => {
      await client.query("UNLISTEN *");
      client.release();
    },
  };
}

describe("listing dead letters", () => {
  it("filters by type, died_after, died_before and replayed, newest death first, paged", async () => {
    const first = await killJobs(db, session, [{ type: "list_a" }, { type: "list_a" }]);
    await db.sql("UPDATE dead_letter_jobs SET died_at = now() - interval '2 hours' WHERE job_id = ANY($1)", [
      first,
    ]);
    const second = await killJobs(db, session, [{ type: "list_a" }, { type: "list_b" }]);
    const ids = (entries: { jobId: number }[]) => entries.map((e) => e.jobId);

    assert.deepEqual(ids(await db.ledger.listDeadLetters({ type: "list_a" })), [
      second[0],
      first[1],
      first[0],
    ]);
    const hourAgo = new Date(Date.now() - 3_600_000);
    assert.deepEqual(ids(await db.ledger.listDeadLetters({ type: "list_a", diedAfter: hourAgo })), [
      second[0],
    ]);
    assert.deepEqual(ids(await db.ledger.listDeadLetters({ type: "list_a", diedBefore: hourAgo })), [
      first[1],
      first[0],
    ]);
    assert.deepEqual(ids(await db.ledger.listDeadLetters({ type: "list_a", limit: 1, offset: 1 })), [
      first[1],
    ]);
    await db.ledger.replayDeadLetter(first[0] as number);
    assert.deepEqual(ids(await db.ledger.listDeadLetters({ type: "list_a", replayed: true })), [first[0]]);
    assert.deepEqual(ids(await db.ledger.listDeadLetters({ type: "list_a", replayed: false })), [
      second[0],
      first[1],
    ]);
    const [entry] = await db.ledger.listDeadLetters({ type: "list_b" });
    assert.equal(entry?.error, "boom");
    assert.equal(entry?.attempts, 1);
    assert.equal(entry?.replayedAt, null);
    assert.equal(entry?.replays, 0);
    assert.equal(entry?.payloadOmitted, false);
  });

  it("leaves payloads over 64 KiB out of a list (the entry itself has it)", async () => {
    const [id] = await killJobs(db, session, [{ type: "list_big", payload: { text: "x".repeat(70_000) } }]);
    const [listed] = await db.ledger.listDeadLetters({ type: "list_big" });
    assert.equal(listed?.payload, null);
    assert.equal(listed?.payloadOmitted, true);
    const whole = await db.ledger.getDeadLetter(id as number);
    assert.equal((whole?.payload as { text?: string } | undefined)?.text?.length, 70_000);
  });

  it("refuses a bad filter naming the field", async () => {
    await assert.rejects(
      db.ledger.listDeadLetters({ limit: 0, diedAfter: new Date(Number.NaN) }, "snake"),
      (error: unknown) =>
        error instanceof JobValidationError &&
        error.problems
          .map((p) => p.field)
          .sort()
          .join() === "died_after,limit",
    );
  });
});

describe("replaying a dead letter", () => {
  it("sends the job back to pending, attempts reset and history kept; the entry is marked; a worker is woken", async () => {
    const [id] = (await killJobs(db, session, [{ type: "replay_one", payload: { n: 1 } }], "it broke")) as [
      number,
    ];
    const listener = await listen();
    try {
      const woken = listener.next();
      const { replayed, job } = await db.ledger.replayDeadLetter(id);
      assert.equal(await woken, "replay_one");
      assert.equal(replayed, true);
      assert.equal(job?.status, "pending");
      assert.equal(job?.attempt, 0);
      assert.equal(job?.completedAt, null);
      assert.ok(job && Math.abs(job.runAt.getTime() - Date.now()) < 5000, "due now");
      assert.equal(job?.error, "it broke", "the last error is kept");
      assert.deepEqual(
        job?.errors.map((e) => [e.attempt, e.error]),
        [[0, "it broke"]],
        "the history is kept",
      );
    } finally {
      await listener.close();
    }
    const entry = await db.ledger.getDeadLetter(id);
    assert.ok(entry?.replayedAt instanceof Date);
    assert.equal(entry?.replays, 1);
    await assertCountersExact(db);
  });

  it("is idempotent: twice, or ten times at once, gives one pending job", async () => {
    const [id] = (await killJobs(db, session, [{ type: "replay_twice" }])) as [number];
    const outcomes = await Promise.all(Array.from({ length: 10 }, () => db.ledger.replayDeadLetter(id)));
    assert.equal(outcomes.filter((o) => o.replayed).length, 1, "one call replayed it");
    const again = await db.ledger.replayDeadLetter(id);
    assert.equal(again.replayed, false);
    assert.equal(again.job?.status, "pending");
    const rows = await db.sql<{ status: string; n: number }>(
      "SELECT status, count(*)::int AS n FROM jobs WHERE type = 'replay_twice' GROUP BY status",
    );
    assert.deepEqual(rows, [{ status: "pending", n: 1 }]);
    assert.equal((await db.ledger.getDeadLetter(id))?.replays, 1);
    await assertCountersExact(db);
  });

  it("a replayed job that dies again refreshes its entry, which waits again", async () => {
    const [id] = (await killJobs(db, session, [{ type: "replay_again" }], "first death")) as [number];
    await db.ledger.replayDeadLetter(id);
    const waitingBefore = (await db.ledger.metrics(30)).deadLetterCount;
    const [claimed] = await session.claim(["replay_again"], 1);
    assert.equal(claimed?.id, id);
    await session.fail([{ id, attempt: 0, error: "second death", runMs: 1 }], {
      backoffBaseSeconds: 1,
      backoffMaxSeconds: 1,
      backoffJitter: false,
    });
    const entry = await db.ledger.getDeadLetter(id);
    assert.equal(entry?.error, "second death");
    assert.equal(entry?.replayedAt, null);
    assert.equal(entry?.replays, 1, "the count of replays is kept");
    assert.deepEqual(
      entry?.errors.map((e) => e.error),
      ["first death", "second death"],
    );
    assert.equal((await db.ledger.metrics(30)).deadLetterCount, waitingBefore + 1, "it is counted again");
    await assertCountersExact(db);
  });

  it("a job with no dead-letter entry is a DeadLetterNotFoundError", async () => {
    const job = await db.ledger.addJob({ type: "never_dead" });
    await assert.rejects(db.ledger.replayDeadLetter(job.id), DeadLetterNotFoundError);
    await assert.rejects(db.ledger.replayDeadLetter(987_654_321), DeadLetterNotFoundError);
  });

  it("the dead-letter count counts the entries still waiting", async () => {
    const before = (await db.ledger.metrics(30)).deadLetterCount;
    const ids = await killJobs(db, session, [{ type: "count_me" }, { type: "count_me" }]);
    assert.equal((await db.ledger.metrics(30)).deadLetterCount, before + 2);
    await db.ledger.replayDeadLetter(ids[0] as number);
    assert.equal((await db.ledger.metrics(30)).deadLetterCount, before + 1);
  });
});

describe("replaying the dead letters of a filter", () => {
  it("goes in batches of `limit`, oldest death first, until none is left; other types stay dead", async () => {
    const ids = await killJobs(
      db,
      session,
      Array.from({ length: 25 }, () => ({ type: "bulk_a" })),
    );
    const others = await killJobs(db, session, [{ type: "bulk_b" }, { type: "bulk_b" }]);
    const replayed: number[] = [];
    const batches: boolean[] = [];
    for (;;) {
      const batch = await db.ledger.replayDeadLetters({ type: "bulk_a" }, { limit: 10 });
      assert.ok(batch.ids.length <= 10);
      replayed.push(...batch.ids);
      batches.push(batch.more);
      if (!batch.more) break;
    }
    assert.deepEqual(batches, [true, true, false]);
    assert.deepEqual(
      replayed.sort((a, b) => a - b),
      ids,
    );
    const again = await db.ledger.replayDeadLetters({ type: "bulk_a" }, { limit: 10 });
    assert.deepEqual(again, { ids: [], more: false }, "replaying again finds nothing");
    for (const id of others) assert.equal((await db.ledger.getJob(id))?.status, "dead");
    await assertCountersExact(db);
  });

  it("two concurrent bulk replays share the work: every job once", async () => {
    const ids = await killJobs(
      db,
      session,
      Array.from({ length: 40 }, () => ({ type: "bulk_race" })),
    );
    const drain = async () => {
      const got: number[] = [];
      for (;;) {
        const batch = await db.ledger.replayDeadLetters({ type: "bulk_race" }, { limit: 7 });
        got.push(...batch.ids);
        if (!batch.more) return got;
      }
    };
    const [a, b] = await Promise.all([drain(), drain()]);
    assert.deepEqual(
      [...a, ...b].sort((x, y) => x - y),
      ids,
    );
    await assertCountersExact(db);
  });

  it("an empty filter is refused unless all is true; a replay takes no replayed filter", async () => {
    await assert.rejects(
      db.ledger.replayDeadLetters({}),
      (error: unknown) => error instanceof JobValidationError && error.problems[0]?.field === "all",
    );
    await assert.rejects(
      db.ledger.replayDeadLetters({ type: "x" }, { limit: 10_001 }),
      (error: unknown) => error instanceof JobValidationError && error.problems[0]?.field === "limit",
    );
    await killJobs(db, session, [{ type: "bulk_all" }]);
    const all = await db.ledger.replayDeadLetters({ all: true }, { limit: 10_000 });
    assert.ok(all.ids.length >= 1);
    assert.equal(all.more, false);
    const [dead] = await db.sql<{ n: number }>("SELECT count(*)::int AS n FROM jobs WHERE status = 'dead'");
    assert.equal(dead?.n, 0, "all: true replays every dead job");
  });
});

describe("discarding dead letters", () => {
  it("deletes the entry and leaves the job dead; a second discard is not found", async () => {
    const [id] = (await killJobs(db, session, [{ type: "discard_one" }])) as [number];
    const entry = await db.ledger.discardDeadLetter(id);
    assert.equal(entry.jobId, id);
    assert.equal(await db.ledger.getDeadLetter(id), null);
    assert.equal((await db.ledger.getJob(id))?.status, "dead");
    await assert.rejects(db.ledger.discardDeadLetter(id), DeadLetterNotFoundError);
    await assert.rejects(db.ledger.replayDeadLetter(id), DeadLetterNotFoundError);
  });

  it("discards by filter in batches, replayed ones only when asked", async () => {
    const ids = await killJobs(
      db,
      session,
      Array.from({ length: 5 }, () => ({ type: "discard_bulk" })),
    );
    await db.ledger.replayDeadLetter(ids[0] as number);
    const replayedOnly = await db.ledger.discardDeadLetters({ type: "discard_bulk", replayed: true });
    assert.deepEqual(replayedOnly, { ids: [ids[0]], more: false });
    const first = await db.ledger.discardDeadLetters({ type: "discard_bulk" }, { limit: 3 });
    assert.deepEqual(first, { ids: ids.slice(1, 4), more: true });
    const rest = await db.ledger.discardDeadLetters({ type: "discard_bulk" }, { limit: 3 });
    assert.deepEqual(rest, { ids: ids.slice(4), more: false });
    assert.deepEqual(await db.ledger.listDeadLetters({ type: "discard_bulk" }), []);
    await assert.rejects(db.ledger.discardDeadLetters({ all: false }), JobValidationError);
  });
});

describe("retry now", () => {
  it("a pending job waiting for its backoff becomes due at once and wakes a worker", async () => {
    const job = await db.ledger.addJob({ type: "retry_now", runAt: new Date(Date.now() + 3_600_000) });
    const listener = await listen();
    try {
      const woken = listener.next();
      const { changed, job: after } = await db.ledger.retryJob(job.id);
      assert.equal(await woken, "retry_now");
      assert.equal(changed, true);
      assert.equal(after.status, "pending");
      assert.ok(after.runAt.getTime() <= Date.now() + 1000, "due now");
    } finally {
      await listener.close();
    }
    const again = await db.ledger.retryJob(job.id);
    assert.equal(again.changed, false, "already due");
  });

  it("a dead job is replayed; a done job is a conflict; an unknown one not found", async () => {
    const [id] = (await killJobs(db, session, [{ type: "retry_dead" }])) as [number];
    const { changed, job } = await db.ledger.retryJob(id);
    assert.equal(changed, true);
    assert.equal(job.status, "pending");
    assert.equal(job.attempt, 0);
    assert.equal((await db.ledger.getDeadLetter(id))?.replays, 1);
    const [claimed] = await session.claim(["retry_dead"], 1);
    await session.complete([{ id, attempt: claimed?.attempt ?? 0, resultJson: "1", runMs: 1 }]);
    await assert.rejects(
      db.ledger.retryJob(id),
      (error: unknown) => error instanceof JobStateConflictError && error.status === "done",
    );
    await assert.rejects(db.ledger.retryJob(987_654_321), JobNotFoundError);
    await assertCountersExact(db);
  });

  it("a worker runs the retried job at once, woken without waiting for its poll", async () => {
    let runs = 0;
    const worker = await startWorker(db, {
      builtins: false,
      handlers: {
        retried_by_hand: () => {
          runs++;
          if (runs === 1) throw new Error("first run fails");
          return "ok";
        },
      },
      // Backoff an hour, poll a minute: only the retry's NOTIFY can bring the job back in time.
      config: { backoffBaseSeconds: 3600, backoffMaxSeconds: 3600, pollIntervalSeconds: 60 },
    });
    try {
      const job = await db.ledger.addJob({ type: "retried_by_hand", maxRetries: 1 });
      await waitForEvent(worker, "job:failed", (e: { id: number }) => e.id === job.id);
      const done = waitForEvent(worker, "job:completed", (e: { id: number }) => e.id === job.id, 10_000);
      await db.ledger.retryJob(job.id);
      await done;
      assert.equal(runs, 2);
    } finally {
      await worker.stop();
    }
  });
});
