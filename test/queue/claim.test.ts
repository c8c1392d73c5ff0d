/**
 * The claim protocol (DESIGN.md §4–5): claim order, scheduling, type filtering, and the two locks
 * that make a claim exclusive.
 */
import assert from "node:assert/strict";
import { after, before, beforeEach, describe, it } from "node:test";
import type { ClaimedJob } from "../../src/queue/lock-session.js";
import { createTestDb, type TestDb } from "../helpers/db.js";

let db: TestDb;

before(async () => {
  db = await createTestDb();
});
after(async () => {
  await db.drop();
});
beforeEach(async () => {
  await db.closeLockSessions();
  await db.sql("DELETE FROM jobs");
});

describe("claim order", () => {
  it("claims the highest priority first", async () => {
    const low = await db.ledger.addJob({ type: "noop", priority: 1 });
    const high = await db.ledger.addJob({ type: "noop", priority: 10 });
    const mid = await db.ledger.addJob({ type: "noop", priority: 5 });
    const session = await db.openLockSession("w1");
    const claimed = await session.claim(["noop"], 10);
    assert.deepEqual(
      claimed.map((j) => j.id),
      [high.id, mid.id, low.id],
    );
  });

  it("a single-job claim returns the most urgent job", async () => {
    await db.ledger.addJob({ type: "noop", priority: 3 });
    const urgent = await db.ledger.addJob({ type: "noop", priority: 9 });
    const session = await db.openLockSession("w1");
    const [claimed] = await session.claim(["noop"], 1);
    assert.equal(claimed?.id, urgent.id);
  });

  it("breaks priority ties by earliest run_at, then lowest id", async () => {
    const later = await db.ledger.addJob({ type: "noop", priority: 5 });
    const earlier = await db.ledger.addJob({ type: "noop", priority: 5 });
    const sameTimeA = await db.ledger.addJob({ type: "noop", priority: 5 });
    const sameTimeB = await db.ledger.addJob({ type: "noop", priority: 5 });
    await db.sql("UPDATE jobs SET run_at = now() - interval '1 minute' WHERE id = $1", [later.id]);
    await db.sql("UPDATE jobs SET run_at = now() - interval '2 minutes' WHERE id = $1", [earlier.id]);
    await db.sql("UPDATE jobs SET run_at = now() - interval '30 seconds' WHERE id = ANY($1)", [
      [sameTimeA.id, sameTimeB.id],
    ]);
    const session = await db.openLockSession("w1");
    const claimed = await session.claim(["noop"], 10);
    assert.deepEqual(
      claimed.map((j) => j.id),
      [earlier.id, later.id, sameTimeA.id, sameTimeB.id],
    );
  });

  it("never claims a job whose run_at is in the future", async () => {
    const future = await db.ledger.addJob({ type: "noop", runAt: new Date(Date.now() + 60_000) });
    const session = await db.openLockSession("w1");
    assert.deepEqual(await session.claim(["noop"], 10), []);
    const [row] = await db.sql<{ status: string }>("SELECT status FROM jobs WHERE id = $1", [future.id]);
    assert.equal(row?.status, "pending");
  });

  it("a run_at in the past means now", async () => {
    const job = await db.ledger.addJob({ type: "noop", runAt: "2001-01-01T00:00:00Z" });
    assert.ok(job.runAt.getTime() > Date.parse("2020-01-01T00:00:00Z"));
  });

  it("claims only the types asked for; other types stay pending", async () => {
    const mine = await db.ledger.addJob({ type: "echo" });
    const other = await db.ledger.addJob({ type: "unhandled_type" });
    const session = await db.openLockSession("w1");
    const claimed = await session.claim(["echo", "noop"], 10);
    assert.deepEqual(
      claimed.map((j) => j.id),
      [mine.id],
    );
    assert.equal((await db.ledger.getJob(other.id))?.status, "pending");
  });

  it("a type whose hash another type shares gets only its own jobs, in claim order (schema version 14)", async () => {
    // jobs_claim_idx is led by hashtext(type): these two types land on the same index entries.
    const [mine, theirs] = ["type_128365", "type_224166"];
    const [hashes] = await db.sql<{ same: boolean }>("SELECT hashtext($1) = hashtext($2) AS same", [
      mine,
      theirs,
    ]);
    assert.equal(hashes?.same, true, "the two types share a hash");
    const before = await db.ledger.addJobs([
      { type: theirs, priority: 9 },
      { type: theirs, priority: 9 },
    ]);
    const own = await db.ledger.addJobs([
      { type: mine, priority: 2 },
      { type: mine, priority: 7 },
    ]);
    for (const types of [[mine], [mine, "noop"]]) {
      // One type (the single-type claim) and two (a walk of the index per type).
      const session = await db.openLockSession("w1");
      const claimed = await session.claim(types, 10);
      assert.deepEqual(
        claimed.map((j) => [j.id, j.type]),
        [
          [own[1]?.id, mine],
          [own[0]?.id, mine],
        ],
        `claim of ${types.join(", ")}`,
      );
      await db.sql(
        "UPDATE jobs SET status = 'pending', worker_id = NULL, claimed_at = NULL, heartbeat_at = NULL WHERE type = $1",
        [mine],
      );
      await db.closeLockSessions();
    }
    for (const job of before) assert.equal((await db.ledger.getJob(job.id))?.status, "pending");
  });
});

describe("exactly-once claiming", () => {
  it("one job claimed by many concurrent sessions goes to exactly one", async () => {
    const job = await db.ledger.addJob({ type: "noop" });
    const racers = await Promise.all(Array.from({ length: 8 }, (_, i) => db.openLockSession(`w${i}`)));
    const results = await Promise.all(racers.map((s) => s.claim(["noop"], 1)));
    const winners = results.filter((r) => r.length === 1);
    assert.equal(winners.length, 1);
    assert.equal(winners[0]?.[0]?.id, job.id);
  });

  it("many jobs claimed concurrently: every job exactly once", async () => {
    const jobs = await db.ledger.addJobs(Array.from({ length: 500 }, () => ({ type: "noop" })));
    const racers = await Promise.all(Array.from({ length: 6 }, (_, i) => db.openLockSession(`w${i}`)));
    const claimedIds: number[] = [];
    await Promise.all(
      racers.map(async (session) => {
        for (;;) {
          const batch = await session.claim(["noop"], 7);
          if (batch.length === 0) return;
          claimedIds.push(...batch.map((j) => j.id));
        }
      }),
    );
    assert.equal(claimedIds.length, jobs.length);
    assert.equal(new Set(claimedIds).size, jobs.length);
    const [row] = await db.sql<{ n: number }>("SELECT count(*)::int AS n FROM jobs WHERE status = 'claimed'");
    assert.equal(row?.n, jobs.length);
  });

  it("the advisory lock stops a second claim of a job reset to pending while its owner runs it", async () => {
    const job = await db.ledger.addJob({ type: "noop" });
    const owner = await db.openLockSession("owner");
    const thief = await db.openLockSession("thief");
    assert.equal((await owner.claim(["noop"], 1))[0]?.id, job.id);
    // An over-eager reset puts the row back to pending while the owner still holds the lock.
    await db.sql("UPDATE jobs SET status = 'pending', worker_id = NULL, heartbeat_at = NULL WHERE id = $1", [
      job.id,
    ]);
    assert.deepEqual(await thief.claim(["noop"], 1), [], "the row is pending but its advisory lock is held");
    const held = await db.ledger.heldJobLocks();
    assert.deepEqual(
      held.map((h) => h.jobKey),
      [job.id],
    );
    await owner.close();
    const reclaimed = await thief.claim(["noop"], 1);
    assert.equal(reclaimed[0]?.id, job.id, "once the owner's session ends, the lock is free");
  });

  it("a claim holds one advisory lock per claimed job on the claiming session", async () => {
    await db.ledger.addJobs(Array.from({ length: 5 }, () => ({ type: "noop" })));
    const session = await db.openLockSession("w1");
    const claimed = await session.claim(["noop"], 3);
    const pid = await session.backendPid();
    const held = await db.ledger.heldJobLocks();
    assert.deepEqual(
      held.map((h) => h.jobKey).sort((a, b) => a - b),
      claimed.map((j) => j.id).sort((a, b) => a - b),
    );
    assert.ok(held.every((h) => h.pid === pid));
  });
});

describe("the claim's row lock and fence", () => {
  it("a claim skips a pending job whose row another transaction holds, instead of waiting for it", async () => {
    const busy = await db.ledger.addJob({ type: "noop", priority: 10 });
    const free = await db.ledger.addJob({ type: "noop", priority: 1 });
    const session = await db.openLockSession("w1");
    const pid = await session.backendPid();
    // Another transaction (an operator's UPDATE, a cancel, a reaper) holds the busy job's row.
    const other = await db.pool.connect();
    try {
      await other.query("BEGIN");
      await other.query(`SELECT id FROM "${db.schema}".jobs WHERE id = $1 FOR UPDATE`, [busy.id]);
      // Without FOR UPDATE SKIP LOCKED the claim would pick the busy row, take its advisory lock,
      // and its UPDATE would wait for the other transaction: watch the lock connection for that.
      let settled = false;
      const claim = session.claim(["noop"], 2).finally(() => {
        settled = true;
      });
      const waitedForRowLock = (async () => {
        while (!settled) {
          const { rows } = await db.pool.query<{ waiting: boolean }>(
            "SELECT wait_event_type = 'Lock' AS waiting FROM pg_stat_activity WHERE pid = $1",
            [pid],
          );
          if (rows[0]?.waiting) return true;
        }
        return false;
      })();
      const outcome = waitedForRowLock.then<ClaimedJob[] | "waited">((waited) => (waited ? "waited" : claim));
      const claimed = await Promise.race([claim, outcome]);
      assert.ok(claimed !== "waited", "the claim waited for a row another transaction holds");
      assert.deepEqual(
        claimed.map((j) => j.id),
        [free.id],
        "only the job whose row was free is claimed",
      );
    } finally {
      await other.query("ROLLBACK");
      other.release();
    }
    assert.equal((await db.ledger.getJob(busy.id))?.status, "pending");
    assert.deepEqual(
      (await session.claim(["noop"], 2)).map((j) => j.id),
      [busy.id],
      "once the row is free, the next claim takes it",
    );
  });

  it("the fence refuses a late write for an earlier attempt, even from the worker that holds the job again", async () => {
    const job = await db.ledger.addJob({ type: "noop" });
    const session = await db.openLockSession("w1");
    assert.equal((await session.claim(["noop"], 1))[0]?.attempt, 0);
    // The job is reaped (its lock let go, its heartbeat stale): a failed attempt, due again at once…
    await session.releaseLocks([job.id]);
    await db.sql("UPDATE jobs SET heartbeat_at = now() - interval '1 hour' WHERE id = $1", [job.id]);
    const reaped = await db.ledger.reapStale({
      staleThresholdSeconds: 60,
      backoffBaseSeconds: 0,
      backoffMaxSeconds: 0,
      backoffJitter: false,
    });
    assert.deepEqual(
      reaped.map((j) => [j.id, j.status, j.attempt]),
      [[job.id, "pending", 1]],
    );
    // …and the same worker claims it again: same worker id, next attempt.
    const [again] = await session.claim(["noop"], 1);
    assert.deepEqual([again?.id, again?.attempt], [job.id, 1]);
    // A late completion of attempt 0 (a handler of the first claim returning now) is refused.
    assert.deepEqual(await session.complete([{ id: job.id, attempt: 0, resultJson: '"late"', runMs: 1 }]), [
      job.id,
    ]);
    const held = await db.ledger.getJob(job.id);
    assert.deepEqual([held?.status, held?.attempt, held?.result], ["claimed", 1, null]);
    // The write of the current attempt goes through.
    assert.deepEqual(await session.complete([{ id: job.id, attempt: 1, resultJson: '"ok"', runMs: 1 }]), []);
    const done = await db.ledger.getJob(job.id);
    assert.deepEqual([done?.status, done?.result], ["done", "ok"]);
  });
});

describe("give-back", () => {
  it("a released job is pending again, unlocked, and wakes other workers on the channel", async () => {
    const job = await db.ledger.addJob({ type: "noop" });
    const session = await db.openLockSession("w1");
    assert.equal((await session.claim(["noop"], 1)).length, 1);
    const listener = await db.pool.connect();
    try {
      await listener.query(`LISTEN "${db.config.notifyChannel}"`);
      const woken = new Promise<string | undefined>((resolve) =>
        listener.once("notification", (m) => resolve(m.payload)),
      );
      assert.deepEqual(await session.release([{ id: job.id, attempt: 0 }]), []);
      assert.equal(await woken, "noop");
    } finally {
      await listener.query("UNLISTEN *");
      listener.release();
    }
    assert.equal((await db.ledger.getJob(job.id))?.status, "pending");
    assert.deepEqual(await db.ledger.heldJobLocks(), []);
    assert.deepEqual(
      (await (await db.openLockSession("w2")).claim(["noop"], 1)).map((j) => j.id),
      [job.id],
    );
  });
});

describe("unlocks carried by claims", () => {
  it("a claim asked for while a written batch waits for its unlock releases that batch, in the same round trip", async () => {
    const jobs = await db.ledger.addJobs(Array.from({ length: 6 }, () => ({ type: "noop" })));
    const session = await db.openLockSession("w1");
    const pid = await session.backendPid();
    const first = await session.claim(["noop"], 3);
    const written = await session.writeCompletions(
      first.map((j) => ({ id: j.id, attempt: j.attempt, resultJson: "null", runMs: 1 })),
    );
    // Asked for in the same turn as the write returned: the claim takes the unlock with it.
    const second = await session.claim(["noop"], 3);
    const held = (await db.ledger.heldJobLocks()).map((h) => h.jobKey).sort((a, b) => a - b);
    assert.deepEqual(
      held,
      second.map((j) => j.id).sort((a, b) => a - b),
      "once the claim has returned, the written batch holds no lock and the claimed one does",
    );
    await written.unlocked;
    assert.deepEqual(
      [...first, ...second].map((j) => j.id).sort((a, b) => a - b),
      jobs.map((j) => j.id),
    );
    const [lockConnection] = await db.sql<{ query: string }>(
      "SELECT query FROM pg_stat_activity WHERE pid = $1",
      [pid],
    );
    assert.match(
      lockConnection?.query ?? "",
      /SKIP LOCKED/,
      "the claim was the lock connection's last statement",
    );
  });

  it("an unlock that wakes workers goes out ahead of the claim, so a failing claim loses neither the unlock nor its NOTIFY", async () => {
    const job = await db.ledger.addJob({ type: "noop" });
    const session = await db.openLockSession("w1");
    assert.equal((await session.claim(["noop"], 1))[0]?.id, job.id);
    const listener = await db.pool.connect();
    try {
      await listener.query(`LISTEN "${db.config.notifyChannel}"`);
      const woken = new Promise<string | undefined>((resolve) =>
        listener.once("notification", (m) => resolve(m.payload)),
      );
      const released = await session.writeReleases([{ id: job.id, attempt: 0 }]);
      // A claim asked for in the same turn, which fails (a negative LIMIT).
      await assert.rejects(session.claim(["noop"], -1));
      assert.equal(session.isLost, true, "a failed claim loses the session");
      await released.unlocked;
      assert.equal(await woken, "noop");
      assert.deepEqual(await db.ledger.heldJobLocks(), []);
    } finally {
      await listener.query("UNLISTEN *");
      listener.release();
    }
  });

  it("a callback that throws does not keep the other unlocks of its statement from settling", async () => {
    const [a, b] = await db.ledger.addJobs([{ type: "noop" }, { type: "noop" }]);
    const session = await db.openLockSession("w1");
    assert.equal((await session.claim(["noop"], 2)).length, 2);
    let secondReported = false;
    const [first, second] = await Promise.all([
      session.writeCompletions([{ id: a?.id ?? 0, attempt: 0, resultJson: "null", runMs: 1 }], () => {
        throw new Error("a callback's own bug");
      }),
      session.writeCompletions([{ id: b?.id ?? 0, attempt: 0, resultJson: "null", runMs: 1 }], () => {
        secondReported = true;
      }),
    ]);
    const settled = await Promise.race([
      Promise.all([first.unlocked, second.unlocked]).then(() => "settled"),
      new Promise((resolve) => setTimeout(resolve, 10_000, "timed out").unref()),
    ]);
    assert.equal(settled, "settled");
    assert.equal(secondReported, true);
    assert.deepEqual(await db.ledger.heldJobLocks(), []);
  });

  it("an unlock that no claim takes goes out by itself", async () => {
    await db.ledger.addJobs([{ type: "noop" }, { type: "noop" }]);
    const session = await db.openLockSession("w1");
    const claimed = await session.claim(["noop"], 2);
    assert.deepEqual(
      await session.complete(
        claimed.map((j) => ({ id: j.id, attempt: j.attempt, resultJson: "null", runMs: 1 })),
      ),
      [],
    );
    assert.deepEqual(await db.ledger.heldJobLocks(), []);
  });

  it("a retry due at once can be claimed again by the claim that carries its unlock, and holds no lock once done", async () => {
    const job = await db.ledger.addJob({ type: "noop" });
    const session = await db.openLockSession("w1");
    const [claimed] = await session.claim(["noop"], 1);
    assert.equal(claimed?.id, job.id);
    const failed = await session.writeFailures([{ id: job.id, attempt: 0, error: "boom", runMs: 1 }], {
      backoffBaseSeconds: 0,
      backoffMaxSeconds: 0,
      backoffJitter: false,
    });
    assert.equal(failed.outcome[0]?.status, "pending");
    const [again] = await session.claim(["noop"], 1);
    assert.equal(again?.id, job.id, "claimed again by the claim that carried its unlock");
    assert.equal(again?.attempt, 1);
    await failed.unlocked;
    await session.complete([{ id: job.id, attempt: 1, resultJson: "null", runMs: 1 }]);
    assert.deepEqual(await db.ledger.heldJobLocks(), []);
    assert.equal((await db.ledger.getJob(job.id))?.status, "done");
  });
});

describe("large batches of results", () => {
  it("a completion whose results add up to more than 16 MiB of JSON stores every one", async () => {
    await db.ledger.addJobs(Array.from({ length: 24 }, () => ({ type: "big_result" })));
    const session = await db.openLockSession("big-results");
    const claimed = await session.claim(["big_result"], 24);
    assert.equal(claimed.length, 24);
    const text = "r".repeat(1024 * 1024 - 64);
    const refused = await session.complete(
      claimed.map((job, i) => ({
        id: job.id,
        attempt: 0,
        resultJson: JSON.stringify({ i, text }),
        runMs: 1,
      })),
    );
    assert.deepEqual(refused, []);
    const rows = await db.sql<{ n: number; bytes: string }>(
      "SELECT count(*)::int AS n, sum(length(result->>'text'))::text AS bytes FROM jobs WHERE type = 'big_result' AND status = 'done'",
    );
    assert.deepEqual(rows[0], { n: 24, bytes: String(24 * text.length) });
    assert.deepEqual(await db.ledger.heldJobLocks(), []);
  });
});
