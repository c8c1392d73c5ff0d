/**
 * The ledger audit (test/chaos/helpers/audit.ts) can fail: on a private cluster, each breach it
 * exists to catch is arranged by hand (no worker runs) and must show in its report — an
 * acknowledged job missing, a job never finished, an outcome written twice, a result naming no
 * execution, an overlap (refused when no overlap is allowed, and always when the overlapped
 * execution's result was stored), and an advisory lock of the schema's class left behind.
 */
import assert from "node:assert/strict";
import { after, before, it } from "node:test";
import pg from "pg";
import { lockClassFor } from "../../src/queue/lock-class.js";
import { auditLedger } from "./helpers/audit.js";
import { type ChaosCluster, startChaosCluster } from "./helpers/cluster.js";
import { type ChaosSystem, SCHEMA, startSystem } from "./helpers/system.js";

let cluster: ChaosCluster;
let system: ChaosSystem;
before(async () => {
  cluster = await startChaosCluster("audit");
  system = await startSystem({ cluster, workers: 0, api: false });
});
after(async () => {
  await system?.stop();
  await cluster.destroy();
});

/** A job finished by hand: done, with an execution of its own named by its result. */
async function finishedJob(
  startedAgo: string,
  endedAgo: string | null,
): Promise<{ job: number; execution: number }> {
  const [job] = await system.insertJobs("chaos_work", {}, 1);
  const { rows } = await system.db.query<{ id: string }>(
    `INSERT INTO "${SCHEMA}".executions (job_id, attempt, pid, started_at, finished_at)
     VALUES ($1, 0, 1, now() - $2::interval, now() - $3::interval) RETURNING id`,
    [job, startedAgo, endedAgo],
  );
  const execution = Number(rows[0]?.id);
  await system.db.query(
    `UPDATE "${SCHEMA}".jobs SET status = 'done', result = $2, completed_at = now() WHERE id = $1`,
    [job, JSON.stringify({ execution })],
  );
  return { job: Number(job), execution };
}

it("a clean ledger passes", async () => {
  const { job } = await finishedJob("2 s", "1 s");
  const report = await auditLedger(system.db, SCHEMA, {
    acknowledged: [job],
    boundMs: 1000,
    allowOverlap: false,
  });
  assert.deepEqual(report.failures, []);
});

it("reports a lost job, an unfinished one, a second write, a result naming no execution", async () => {
  const { job: twice } = await finishedJob("2 s", "1 s");
  await system.db.query(`UPDATE "${SCHEMA}".jobs SET result = '{"execution": 0}' WHERE id = $1`, [twice]);
  const [pending] = await system.insertJobs("chaos_work", {}, 1);
  const report = await auditLedger(system.db, SCHEMA, {
    acknowledged: [twice, Number(pending), 999_999_999],
    boundMs: 500,
    allowOverlap: true,
  });
  assert.deepEqual(report.lost, [999_999_999]);
  assert.deepEqual(report.unfinished, [Number(pending)]);
  assert.deepEqual(report.writtenTwice, [twice]);
  assert.deepEqual(report.resultWithoutExecution, [twice]);
  assert.equal(report.failures.length, 4);
});

it("reports overlaps: any where none is allowed, and a stored result of an overlapped execution", async () => {
  // The stored execution ran 10 s ago to 5 s ago; a second one started 8 s ago (while it ran).
  const { job } = await finishedJob("10 s", "5 s");
  await system.db.query(
    `INSERT INTO "${SCHEMA}".executions (job_id, attempt, pid, started_at, finished_at)
     VALUES ($1, 1, 2, now() - interval '8 s', now() - interval '7 s')`,
    [job],
  );
  const strict = await auditLedger(system.db, SCHEMA, {
    acknowledged: [job],
    boundMs: 500,
    allowOverlap: false,
  });
  assert.equal(strict.overlaps.length, 1);
  assert.equal(strict.badOverlaps.length, 1, "the overlapped (earlier) execution's result was stored");
  const lenient = await auditLedger(system.db, SCHEMA, {
    acknowledged: [job],
    boundMs: 500,
    allowOverlap: true,
  });
  assert.equal(
    lenient.failures.length,
    1,
    "a stored overlapped result fails even where overlaps are allowed",
  );
});

it("reports an advisory lock of the schema's class left behind", async () => {
  const client = new pg.Client({ connectionString: cluster.url });
  await client.connect();
  try {
    await client.query("SELECT pg_advisory_lock($1, 12345)", [lockClassFor(SCHEMA)]);
    const report = await auditLedger(system.db, SCHEMA, {
      acknowledged: [],
      boundMs: 500,
      allowOverlap: true,
    });
    assert.equal(report.locksLeft, 1);
  } finally {
    await client.end();
  }
});
