/**
 * Rows in unusual but reachable states (an operator's manual fix, an old version's data) are
 * handled like any other, and never break a statement for the other rows of its batch
 * (shared/cases 20): the attempt count cannot overflow, the backoff is capped before it is
 * computed, and the reaper still reclaims an ordinary orphan beside them.
 */
import assert from "node:assert/strict";
import { after, before, beforeEach, describe, it } from "node:test";
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
  await db.sql("DELETE FROM dead_letter_jobs");
});

const INT4_MAX = 2147483647;
const policy = { backoffBaseSeconds: 1, backoffMaxSeconds: 3600, backoffJitter: false };

/** Puts job `id` in the state a worker that died while running it leaves behind. */
async function orphan(id: number, attempt: number): Promise<void> {
  // Run alone (DESIGN.md §6), so that its loss counts an attempt although its worker held others.
  await db.sql(
    `UPDATE jobs SET status = 'running', attempt = $2, worker_id = 'gone-worker', run_alone = true,
       claimed_at = now() - interval '1 hour', started_at = now() - interval '1 hour',
       heartbeat_at = now() - interval '1 hour'
     WHERE id = $1`,
    [id, attempt],
  );
}

describe("unusual rows", () => {
  it("the reaper reclaims rows with huge attempt counts and, beside them, an ordinary orphan", async () => {
    const huge = await db.ledger.addJob({ type: "noop", maxRetries: 10 });
    const over = await db.ledger.addJob({ type: "noop", maxRetries: 10 });
    const maxed = await db.ledger.addJob({ type: "noop", maxRetries: 10 });
    await orphan(huge.id, 1024);
    await orphan(over.id, 40);
    await orphan(maxed.id, INT4_MAX);
    // The ordinary orphan: claimed by a worker whose session then died.
    const ordinary = await db.ledger.addJob({ type: "noop", maxRetries: 10 });
    const session = await db.openLockSession("killed-worker");
    assert.deepEqual(
      (await session.claim(["noop"], 1)).map((j) => j.id),
      [ordinary.id],
    );
    await db.closeLockSessions();
    await db.sql("UPDATE jobs SET heartbeat_at = now() - interval '1 hour' WHERE id = $1", [ordinary.id]);

    const reaped = await db.ledger.reapStale({ ...policy, staleThresholdSeconds: 1 });
    assert.deepEqual(
      reaped.map((j) => [j.id, j.status, j.attempt]).sort((a, b) => Number(a[0]) - Number(b[0])),
      [
        [huge.id, "dead", 1025],
        [over.id, "dead", 41],
        [maxed.id, "dead", INT4_MAX],
        [ordinary.id, "pending", 1],
      ],
    );
    for (const id of [huge.id, over.id, maxed.id]) {
      const letter = await db.ledger.getDeadLetter(id);
      assert.match(letter?.error ?? "", /worker gone-worker lost the job/);
    }
    const [due] = await db.sql<{ s: number }>(
      "SELECT extract(epoch FROM run_at - now())::float8 AS s FROM jobs WHERE id = $1",
      [ordinary.id],
    );
    assert.ok(
      (due?.s ?? -1) > 0.5 && (due?.s ?? 99) <= 1,
      `ordinary orphan due in ${due?.s} s (backoff 1 s)`,
    );
  });

  it("a failed attempt of a job claimed with the largest attempt count goes dead instead of failing the write", async () => {
    const job = await db.ledger.addJob({ type: "noop", maxRetries: 10 });
    await db.sql("UPDATE jobs SET attempt = $2 WHERE id = $1", [job.id, INT4_MAX]);
    const neighbour = await db.ledger.addJob({ type: "noop", maxRetries: 10 });
    const session = await db.openLockSession("w1");
    const claimed = await session.claim(["noop"], 2);
    assert.deepEqual(claimed.map((j) => j.id).sort(), [job.id, neighbour.id].sort());
    const outcomes = await session.fail(
      claimed.map((j) => ({ id: j.id, attempt: j.attempt, error: "boom", runMs: 1 })),
      policy,
    );
    const byId = new Map(outcomes.map((o) => [o.id, o]));
    assert.deepEqual([byId.get(job.id)?.applied, byId.get(job.id)?.status], [true, "dead"]);
    assert.deepEqual([byId.get(neighbour.id)?.applied, byId.get(neighbour.id)?.status], [true, "pending"]);
    assert.equal((await db.ledger.getJob(job.id))?.attempt, INT4_MAX);
  });

  it("the backoff of a long-failing job is capped before it is computed (no overflow, never in the past)", async () => {
    const job = await db.ledger.addJob({ type: "noop", maxRetries: 10 });
    // A row whose attempt was lowered by hand below max_retries, with a history far beyond it.
    await db.sql("UPDATE jobs SET attempt = 9 WHERE id = $1", [job.id]);
    const session = await db.openLockSession("w1");
    const [claimed] = await session.claim(["noop"], 1);
    assert.equal(claimed?.attempt, 9);
    const [outcome] = await session.fail([{ id: job.id, attempt: 9, error: "boom", runMs: 1 }], {
      backoffBaseSeconds: 86_400,
      backoffMaxSeconds: 31_536_000,
      backoffJitter: false,
    });
    assert.equal(outcome?.status, "pending");
    assert.ok(
      (outcome?.retry_in_seconds ?? 0) > 31_000_000,
      `retry in ${outcome?.retry_in_seconds} s: the cap`,
    );
  });
});
