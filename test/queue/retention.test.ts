/**
 * Retention (issue 14, item 9): a pruning pass deletes done and cancelled jobs past
 * `retainDoneSeconds` and dead ones (with their dead-letter entries) past `retainDeadSeconds`, and
 * nothing else; in bounded batches, stopping at the jobs too young to be due; one process at a
 * time (an advisory lock); counters and history metrics keep their values; a worker that runs the
 * reaper prunes by itself.
 */
import assert from "node:assert/strict";
import { afterEach, beforeEach, describe, it } from "node:test";
import type { PruneReport } from "../../src/queue/retention.js";
import { createTestDb, type TestDb } from "../helpers/db.js";
import { waitForEvent } from "../helpers/events.js";
import { startWorker } from "../helpers/worker.js";

const DAY = 86_400;
const POLICY = { retainDoneSeconds: 7 * DAY, retainDeadSeconds: 30 * DAY, pauseFactor: 0 };

/**
 * The schema of the test running now: each test has its own, because a pass walks the jobs in id
 * order and stops at the first one too young to be due (ids follow creation), so one test's young
 * jobs would hide the next test's old ones.
 */
let db: TestDb;
beforeEach(async () => {
  db = await createTestDb();
});
afterEach(async () => {
  await db.drop();
});

/**
 * Inserts `n` jobs of `type` with `status`, created `createdDaysAgo` and finished `finishedDaysAgo`
 * days ago (dead ones with a dead-letter entry dying then). Returns their ids.
 */
async function arrange(
  type: string,
  status: "done" | "cancelled" | "dead" | "pending",
  n: number,
  createdDaysAgo: number,
  finishedDaysAgo: number | null,
): Promise<number[]> {
  const rows = await db.sql<{ id: number }>(
    `INSERT INTO jobs (type, status, created_at, run_at, completed_at, attempt, max_retries)
     SELECT $1, $2, now() - make_interval(days => $3), now() + interval '1 day',
            CASE WHEN $4::int IS NULL THEN NULL ELSE now() - make_interval(days => $4::int) END,
            CASE WHEN $2 = 'dead' THEN 1 ELSE 0 END, 0
     FROM generate_series(1, $5) RETURNING id::int`,
    [type, status, createdDaysAgo, finishedDaysAgo, n],
  );
  const ids = rows.map((r) => r.id);
  if (status === "dead")
    await db.sql(
      `INSERT INTO dead_letter_jobs (job_id, type, payload, priority, max_retries, error, attempts, errors, created_at, died_at)
       SELECT id, type, payload, priority, max_retries, 'boom', 1, '[]', created_at, completed_at FROM jobs WHERE id = ANY($1)`,
      [ids],
    );
  return ids.sort((a, b) => a - b);
}

async function existing(ids: number[]): Promise<number[]> {
  const rows = await db.sql<{ id: number }>("SELECT id::int FROM jobs WHERE id = ANY($1) ORDER BY id", [ids]);
  return rows.map((r) => r.id);
}

async function letters(ids: number[]): Promise<number[]> {
  const rows = await db.sql<{ id: number }>(
    "SELECT job_id::int AS id FROM dead_letter_jobs WHERE job_id = ANY($1) ORDER BY job_id",
    [ids],
  );
  return rows.map((r) => r.id);
}

describe("a pruning pass", () => {
  it("deletes only finished jobs past their retention, dead ones with their entries; counters and rates unchanged", async () => {
    const oldDone = await arrange("r_done", "done", 5, 9, 8);
    const oldCancelled = await arrange("r_cancelled", "cancelled", 2, 9, 8);
    const oldDead = await arrange("r_dead", "dead", 3, 40, 31);
    const keptDead = await arrange("r_dead_recent", "dead", 2, 25, 20);
    const keptDone = await arrange("r_done_recent", "done", 2, 9, 1);
    const keptPending = await arrange("r_pending", "pending", 2, 60, null);
    // Some history in the stats tables, through the real statements (young jobs: after the old ones).
    const session = await db.openLockSession("retention-tester");
    const live = await db.ledger.addJobs([{ type: "stats" }, { type: "stats" }]);
    const claimed = await session.claim(["stats"], 2);
    await session.complete(claimed.map((j) => ({ id: j.id, attempt: 0, resultJson: "null", runMs: 250 })));
    await db.closeLockSessions();
    const before = await db.ledger.metrics(30);

    const report = await db.ledger.pruneHistory({ ...POLICY, batchRows: 3 });
    assert.equal(report.ran, true);
    assert.deepEqual(report.deletedJobs, { done: 5, cancelled: 2, dead: 3 });
    assert.equal(report.deletedDeadLetters, 3);
    assert.ok(report.batches > 3, `bounded batches of 3 rows (${report.batches})`);

    assert.deepEqual(await existing([...oldDone, ...oldCancelled, ...oldDead]), []);
    assert.deepEqual(await letters(oldDead), []);
    assert.deepEqual(await existing(keptDead), keptDead);
    assert.deepEqual(await letters(keptDead), keptDead);
    assert.deepEqual(await existing([...keptDone, ...keptPending]), [...keptDone, ...keptPending]);
    assert.deepEqual(
      await existing(live.map((j) => j.id)),
      live.map((j) => j.id),
    );

    const afterMetrics = await db.ledger.metrics(30);
    assert.deepEqual(afterMetrics.depth, before.depth, "queue_depth still counts the pruned jobs");
    assert.equal(afterMetrics.jobsPerSecond, before.jobsPerSecond);
    assert.equal(afterMetrics.errorRate, before.errorRate);
    assert.deepEqual(afterMetrics.executionSecondsQuantiles, before.executionSecondsQuantiles);
    assert.equal(
      afterMetrics.deadLetterCount,
      before.deadLetterCount - 3,
      "the waiting dead letters are current state",
    );

    const again = await db.ledger.pruneHistory(POLICY);
    assert.deepEqual(again.deletedJobs, {}, "a second pass finds nothing");
  });

  it("a retention of 0 keeps its jobs for ever", async () => {
    const done = await arrange("r_keep_done", "done", 2, 400, 399);
    const dead = await arrange("r_keep_dead", "dead", 2, 400, 399);
    const keepDone = await db.ledger.pruneHistory({ ...POLICY, retainDoneSeconds: 0 });
    assert.deepEqual(keepDone.deletedJobs, { dead: 2 });
    assert.deepEqual(await existing(done), done);
    const none = await db.ledger.pruneHistory({ ...POLICY, retainDoneSeconds: 0, retainDeadSeconds: 0 });
    assert.equal(none.ran, false, "nothing to prune: no pass at all");
    assert.deepEqual(await existing(dead), []);
  });

  it("stops at the jobs too young to be due instead of reading the whole history", async () => {
    await db.sql(
      `INSERT INTO jobs (type, status, created_at, completed_at)
       SELECT 'old', 'done', now() - interval '9 days', now() - interval '8 days' FROM generate_series(1, 50)`,
    );
    await db.sql(
      "INSERT INTO jobs (type, status, completed_at) SELECT 'new', 'done', now() FROM generate_series(1, 5000)",
    );
    const report = await db.ledger.pruneHistory({ ...POLICY, batchRows: 100 });
    assert.deepEqual(report.deletedJobs, { done: 50 });
    assert.equal(report.batches, 2, "one batch reaches the young jobs, one more for the dead letters");
  });

  it("one process at a time: a pass finds the lock taken and does nothing", async () => {
    const ids = await arrange("r_locked", "done", 3, 9, 8);
    const holder = await db.pool.connect();
    try {
      await holder.query("SELECT pg_advisory_lock($1::int4, -2)", [db.ledger.lockClass]);
      const report = await db.ledger.pruneHistory(POLICY);
      assert.equal(report.ran, false);
      assert.deepEqual(await existing(ids), ids);
      await holder.query("SELECT pg_advisory_unlock($1::int4, -2)", [db.ledger.lockClass]);
    } finally {
      holder.release();
    }
    const reports = await Promise.all([db.ledger.pruneHistory(POLICY), db.ledger.pruneHistory(POLICY)]);
    const deleted = reports.reduce((sum, r) => sum + (r.deletedJobs.done ?? 0), 0);
    assert.equal(deleted, 3, "two passes at once delete each job once");
    assert.deepEqual(await existing(ids), []);
    const [held] = await db.sql<{ n: number }>(
      "SELECT count(*)::int AS n FROM pg_locks WHERE locktype = 'advisory' AND classid = ($1::int4::bigint & 4294967295)::oid AND objid = 4294967294",
      [db.ledger.lockClass],
    );
    assert.equal(held?.n, 0, "the pruning lock is released");
  });

  it("an abort ends the pass after the batch in flight", async () => {
    const ids = await arrange("r_abort", "done", 30, 9, 8);
    const controller = new AbortController();
    const started = Date.now();
    // A pause of 100,000 × the batch's time (minutes): the abort ends it.
    const pass = db.ledger.pruneHistory({
      ...POLICY,
      batchRows: 10,
      pauseFactor: 100_000,
      signal: controller.signal,
    });
    setTimeout(() => controller.abort(), 200);
    const report = await pass;
    assert.ok(Date.now() - started < 10_000, "it did not sit out the pause");
    assert.equal(report.batches, 1);
    assert.ok((await existing(ids)).length > 0, "the rest waits for the next pass");
    await db.ledger.pruneHistory(POLICY);
    assert.deepEqual(await existing(ids), []);
  });

  it("a pruned job's idempotency key is free again", async () => {
    const job = await db.ledger.addJob({ type: "r_key", idempotencyKey: "pruned-key" });
    await db.sql(
      "UPDATE jobs SET status = 'done', completed_at = now() - interval '8 days', created_at = now() - interval '9 days' WHERE id = $1",
      [job.id],
    );
    await db.ledger.pruneHistory({ ...POLICY, retainDeadSeconds: 0 });
    const again = await db.ledger.addJobReporting({ type: "r_key", idempotencyKey: "pruned-key" });
    assert.equal(again.created, true);
  });
});

describe("a worker's pruning", () => {
  it("a worker that runs the reaper prunes by itself every pruneIntervalSeconds", async () => {
    const ids = await arrange("r_worker", "done", 4, 3, 2);
    const worker = await startWorker(db, {
      builtins: false,
      handlers: { r_worker_noop: () => null },
      runReaper: true,
      config: { retainDoneSeconds: DAY, pruneIntervalSeconds: 0.2 },
    });
    try {
      const [report] = await waitForEvent<[PruneReport]>(
        worker,
        "history:pruned",
        (r) => (r.deletedJobs.done ?? 0) > 0,
        15_000,
      );
      assert.ok((report.deletedJobs.done ?? 0) >= 4);
      assert.deepEqual(await existing(ids), []);
    } finally {
      await worker.stop();
    }
  });
});
