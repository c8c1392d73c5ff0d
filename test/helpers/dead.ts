/** Dead jobs made through the real claim and failure statements, for the dead-letter tests. */
import assert from "node:assert/strict";
import type { JobSpec } from "../../src/queue/types.js";
import type { TestDb, TestLockSession } from "./db.js";

/** Backoff of the failures written here (they die: no retry is left). */
const POLICY = { backoffBaseSeconds: 60, backoffMaxSeconds: 60, backoffJitter: false };

/**
 * Enqueues `specs` (forced to `maxRetries: 0`), claims them through `session` and fails each once
 * with `error`, so that every one ends `dead` with a dead-letter entry. Returns their ids in order.
 */
export async function killJobs(
  db: TestDb,
  session: TestLockSession,
  specs: readonly JobSpec[],
  error = "boom",
): Promise<number[]> {
  const jobs = await db.ledger.addJobs(specs.map((spec) => ({ ...spec, maxRetries: 0 })));
  const ids = new Set(jobs.map((job) => job.id));
  const types = [...new Set(specs.map((spec) => spec.type))];
  const claimed = (await session.claim(types, 10_000)).filter((job) => ids.has(job.id));
  assert.equal(claimed.length, jobs.length, "every job to kill was claimed");
  const outcomes = await session.fail(
    claimed.map((job) => ({ id: job.id, attempt: job.attempt, error, runMs: 1 })),
    POLICY,
  );
  assert.ok(
    outcomes.every((o) => o.applied && o.status === "dead"),
    "every job died",
  );
  return jobs.map((job) => job.id);
}

/** The counters (metrics depth) agree with a full count of the rows, whatever path they took. */
export async function assertCountersExact(db: TestDb): Promise<void> {
  const metrics = await db.ledger.metrics(30);
  const rows = await db.sql<{ status: string; n: number }>(
    "SELECT status, count(*)::int AS n FROM jobs GROUP BY status",
  );
  const counted = Object.fromEntries(rows.map((r) => [r.status, r.n]));
  for (const [status, n] of Object.entries(metrics.depth))
    assert.equal(n, counted[status] ?? 0, `depth of ${status}`);
}
