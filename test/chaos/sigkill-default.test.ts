/**
 * Chaos: the SIGKILL recovery bound at DEFAULT settings (stale threshold 30 s, reaper 15 s,
 * heartbeat 10 s, poll 5 s): the jobs a SIGKILLed worker held complete on another, idle worker
 * within stale threshold + reaper interval + 1 s of the kill (issue 10 item 3: reclaimed jobs are
 * due at once and wake a worker). The measured figure is printed.
 */
import assert from "node:assert/strict";
import { after, before, it } from "node:test";
import { auditLedger } from "./helpers/audit.js";
import { type ChaosCluster, startChaosCluster } from "./helpers/cluster.js";
import { finalCount, runningIn, timeUntil } from "./helpers/probe.js";
import { type ChaosSystem, SCHEMA, startSystem } from "./helpers/system.js";

const DEFAULTS = {
  POLL_INTERVAL_SECONDS: "5",
  HEARTBEAT_INTERVAL_SECONDS: "10",
  REAPER_INTERVAL_SECONDS: "15",
  STALE_THRESHOLD_SECONDS: "30",
  BACKOFF_BASE_SECONDS: "1",
  BACKOFF_MAX_SECONDS: "3600",
  BACKOFF_JITTER: "true",
};

let cluster: ChaosCluster;
let system: ChaosSystem | undefined;
before(async () => {
  cluster = await startChaosCluster("sigkill-default");
});
after(async () => {
  await system?.stop();
  await cluster.destroy();
});

it("at default settings, a SIGKILLed worker's jobs complete elsewhere within stale + reaper + 1 s", async () => {
  system = await startSystem({ cluster, workers: 1, env: DEFAULTS, workerEnv: { WORKER_COUNT: "4" } });
  for (let i = 0; i < 4; i++)
    assert.equal(
      (await system.post({ type: "chaos_work", payload: { ms: 120_000, firstOnly: true } })).status,
      201,
    );
  const victim = system.workers[0]?.process.child.pid ?? 0;
  await timeUntil(async () => (await runningIn(system!.db, victim)).length === 4, 30_000, "4 jobs running");
  await system.startWorker(1);
  await system.killWorker(0);
  const orphans = await runningIn(system.db, victim);
  assert.equal(orphans.length, 4);
  const boundMs = (30 + 15 + 1) * 1000;
  const tookMs = await timeUntil(
    async () => (await finalCount(system!.db, orphans)) === orphans.length,
    boundMs + 30_000,
    "the killed worker's jobs to complete",
    100,
  );
  console.log(
    `# SIGKILL recovery at default settings: the killed worker's ${orphans.length} jobs done ${(tookMs / 1000).toFixed(2)} s after the kill (bound: stale 30 s + reaper 15 s + 1 s = ${boundMs / 1000} s)`,
  );
  const report = await auditLedger(system.db, SCHEMA, {
    title: "SIGKILL at default settings",
    acknowledged: system.acknowledged,
    boundMs: 10_000,
    allowOverlap: true,
    processEnds: system.processEnds,
  });
  assert.deepEqual(report.failures, []);
  assert.ok(tookMs <= boundMs, `recovered in ${tookMs} ms, bound ${boundMs} ms`);
});
