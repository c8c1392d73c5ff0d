/**
 * Chaos: `pg_ctl restart -m fast` and `-m immediate` with 5,000 jobs in flight over 2 worker
 * processes, while the API takes enqueues from a steady client. Every session is lost at once;
 * workers and API reconnect with capped backoff by themselves; held jobs run again (at least once
 * after a lost session), every acknowledged job (each 201, and the 5,000 committed inserts) ends
 * final, outcomes are written once, and no advisory lock is left behind. The time from the
 * restart's return to the next completion is printed.
 */
import assert from "node:assert/strict";
import { after, before, it } from "node:test";
import { auditLedger } from "./helpers/audit.js";
import { type ChaosCluster, type ShutdownMode, startChaosCluster } from "./helpers/cluster.js";
import { finalCount, timeUntil } from "./helpers/probe.js";
import { type ChaosSystem, SCHEMA, startSystem } from "./helpers/system.js";

const JOBS = 5000;
let cluster: ChaosCluster;
let system: ChaosSystem;
before(async () => {
  cluster = await startChaosCluster("pg-restart");
  system = await startSystem({ cluster, workers: 2, workerEnv: { WORKER_COUNT: "8" } });
});
after(async () => {
  await system?.stop();
  await cluster.destroy();
});

const doneSince = async (since: number) =>
  (
    await system.db.query<{ n: number }>(
      `SELECT count(*)::int AS n FROM "${SCHEMA}".jobs WHERE status = 'done' AND completed_at > to_timestamp($1 / 1000.0)`,
      [since],
    )
  ).rows[0]?.n ?? 0;

for (const mode of ["fast", "immediate"] as ShutdownMode[]) {
  it(`pg_ctl restart -m ${mode} with ${JOBS} jobs in flight: nothing acknowledged is lost`, async () => {
    const before = system.acknowledged.length;
    const inserted = await system.insertJobs("chaos_work", { ms: 20 }, JOBS, 10);
    const poster = system.postSteadily({
      body: () => ({ type: "chaos_work", payload: { ms: 5 }, max_retries: 10 }),
      ratePerSecond: 50,
      concurrency: 2,
    });
    try {
      await timeUntil(
        async () => (await finalCount(system.db, inserted)) >= JOBS / 5,
        60_000,
        "a fifth done",
      );
      await cluster.restart(mode);
      const restartedAt = Date.now();
      const recoveredMs = await timeUntil(
        async () => (await doneSince(restartedAt)) > 0,
        60_000,
        "a completion",
      );
      console.log(
        `# pg_ctl restart -m ${mode}: first completion ${(recoveredMs / 1000).toFixed(2)} s after the restart returned`,
      );
      await timeUntil(
        async () => (await finalCount(system.db, inserted)) >= (JOBS * 3) / 5,
        120_000,
        "three fifths done",
      );
    } finally {
      await poster.stop();
    }
    const posted = system.acknowledged.slice(before);
    assert.ok(posted.length > 0, "the API acknowledged enqueues during the run");
    const report = await auditLedger(system.db, SCHEMA, {
      title: `pg_ctl restart -m ${mode}`,
      acknowledged: [...inserted, ...posted],
      boundMs: 120_000,
      allowOverlap: true,
      processEnds: system.processEnds,
    });
    console.log(`# client answers so far: ${JSON.stringify(system.answers)}`);
    assert.deepEqual(report.failures, []);
    assert.equal(report.dead, 0, "no job ran out of retries");
    assert.ok(
      system.workers.every((slot) => slot.process.child.exitCode === null),
      "the workers lived through the restart",
    );
  });
}
