/**
 * Chaos: SIGKILL of a worker process mid-job (docs/guarantees.md, "at least once after a lost
 * session"). The API and a worker process on a private cluster, short intervals (stale threshold
 * 2 s, reaper 0.5 s); the worker holds 4 jobs when a second, idle worker starts and the first is
 * SIGKILLed: its jobs run again on the second, within stale threshold + reaper interval +
 * execution + slack (an idle worker: queue order does not stand between the reaper and it), jobs
 * posted meanwhile run too, and the ledger holds.
 */
import assert from "node:assert/strict";
import { after, before, it } from "node:test";
import { auditLedger } from "./helpers/audit.js";
import { type ChaosCluster, startChaosCluster } from "./helpers/cluster.js";
import { finalCount, runningIn, timeUntil } from "./helpers/probe.js";
import { type ChaosSystem, SCHEMA, startSystem } from "./helpers/system.js";

let cluster: ChaosCluster;
let system: ChaosSystem | undefined;
before(async () => {
  cluster = await startChaosCluster("sigkill");
});
after(async () => {
  await system?.stop();
  await cluster.destroy();
});

it("a worker SIGKILLed mid-job: its jobs complete on the other worker within stale + reaper + 2 s of slack", async () => {
  system = await startSystem({ cluster, workers: 1, workerEnv: { WORKER_COUNT: "4" } });
  for (let i = 0; i < 4; i++) {
    const { status } = await system.post({ type: "chaos_work", payload: { ms: 15_000, firstOnly: true } });
    assert.equal(status, 201);
  }
  const victim = system.workers[0]?.process.child.pid ?? 0;
  await timeUntil(
    async () => (await runningIn(system!.db, victim)).length === 4,
    30_000,
    "the victim running 4 jobs",
  );
  await system.startWorker(1);
  await system.killWorker(0);
  const orphans = await runningIn(system.db, victim);
  assert.equal(orphans.length, 4, "the victim held its 4 jobs when it died");
  for (let i = 0; i < 20; i++)
    assert.equal((await system.post({ type: "chaos_work", payload: { ms: 10 } })).status, 201);
  // Stale threshold 2 s + reaper 0.5 s (the re-run does not sleep); 2 s of slack for a loaded machine.
  const boundMs = (2 + 0.5 + 2) * 1000;
  const tookMs = await timeUntil(
    async () => (await finalCount(system!.db, orphans)) === orphans.length,
    60_000,
    "the killed worker's jobs to complete",
  );
  console.log(
    `# SIGKILL recovery (short intervals): ${orphans.length} orphaned jobs done ${(tookMs / 1000).toFixed(2)} s after the kill (bound ${boundMs / 1000} s)`,
  );
  const report = await auditLedger(system.db, SCHEMA, {
    title: "SIGKILL of a worker mid-job",
    acknowledged: system.acknowledged,
    boundMs: 60_000,
    allowOverlap: true,
    processEnds: system.processEnds,
  });
  assert.deepEqual(report.failures, []);
  assert.equal(report.done, 24);
  const { rows } = await system.db.query<{ n: number }>(
    `SELECT count(*)::int AS n FROM "${SCHEMA}".executions WHERE job_id = ANY($1::bigint[]) AND pid <> $2 AND outcome = 'done'`,
    [orphans, victim],
  );
  assert.equal(rows[0]?.n, orphans.length, "each orphan ran to its end on another process");
  assert.ok(tookMs <= boundMs, `orphans done in ${tookMs} ms, bound ${boundMs} ms`);
});
