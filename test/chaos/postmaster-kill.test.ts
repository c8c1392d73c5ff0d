/**
 * Chaos: `kill -9` of the postmaster while a client posts jobs (acknowledged = durable). The API
 * answers errors while the server is down (never a 201 for a job it did not commit); once the
 * cluster is back (crash recovery), the API and the workers carry on by themselves, and every job
 * the client got a 201 for exists and ends final.
 */
import assert from "node:assert/strict";
import { after, before, it } from "node:test";
import { setTimeout as sleep } from "node:timers/promises";
import { auditLedger } from "./helpers/audit.js";
import { type ChaosCluster, startChaosCluster } from "./helpers/cluster.js";
import { timeUntil } from "./helpers/probe.js";
import { type ChaosSystem, SCHEMA, startSystem } from "./helpers/system.js";

let cluster: ChaosCluster;
let system: ChaosSystem | undefined;
before(async () => {
  cluster = await startChaosCluster("postmaster-kill");
});
after(async () => {
  await system?.stop();
  await cluster.destroy();
});

it("kill -9 of the postmaster while a client posts: every 201 exists afterwards and ends final", async () => {
  system = await startSystem({ cluster, workers: 2, workerEnv: { WORKER_COUNT: "4" } });
  const sys = system;
  const poster = sys.postSteadily({
    body: () => ({ type: "chaos_work", payload: { ms: 5 }, max_retries: 10 }),
    ratePerSecond: 200,
    concurrency: 8,
  });
  let killedAt = 0;
  try {
    await timeUntil(async () => sys.acknowledged.length >= 300, 30_000, "300 acknowledged jobs");
    for (let round = 1; round <= 2; round++) {
      const before = sys.acknowledged.length;
      await cluster.killPostmaster();
      killedAt = Date.now();
      // Down for a moment while the client keeps posting.
      await sleep(1000);
      await cluster.start();
      const upAt = Date.now();
      const recoveredMs = await timeUntil(
        async () => sys.acknowledged.length > before + 50,
        60_000,
        "the API to acknowledge jobs again",
      );
      console.log(
        `# kill -9 #${round}: server back ${((upAt - killedAt) / 1000).toFixed(2)} s after the kill; the API acknowledged again ${(recoveredMs / 1000).toFixed(2)} s later`,
      );
    }
  } finally {
    await poster.stop();
  }
  console.log(`# client answers: ${JSON.stringify(sys.answers)}`);
  const report = await auditLedger(sys.db, SCHEMA, {
    title: "kill -9 of the postmaster",
    acknowledged: sys.acknowledged,
    boundMs: 90_000,
    allowOverlap: true,
    processEnds: sys.processEnds,
  });
  assert.deepEqual(report.failures, []);
  assert.ok(
    sys.workers.every((slot) => slot.process.child.exitCode === null) && sys.api?.child.exitCode === null,
    "the workers and the API lived through the crash",
  );
});
