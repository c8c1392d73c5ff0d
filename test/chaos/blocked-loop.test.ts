/**
 * Chaos: a handler that is not sandboxed blocks its worker's event loop (a busy loop of 12 s, four times
 * past the stale threshold of 3 s). The hung process sends no heartbeat and no statement, so the
 * server ends its idle lock session (idle_session_timeout, kept at bay by live heartbeats) and
 * its locks with it: the other worker's reaper hands the 3 jobs that only shared the process with
 * the hung handler to the other worker, which finishes them within stale threshold + reaper
 * interval + slack of the block's start, long before the block ends; and once the hung process
 * wakes, its late results are refused by the fence (the audit: no stored result of an overlapped
 * execution, outcomes written once).
 */
import assert from "node:assert/strict";
import { after, before, it } from "node:test";
import { auditLedger } from "./helpers/audit.js";
import { type ChaosCluster, startChaosCluster } from "./helpers/cluster.js";
import { finalCount, timeUntil } from "./helpers/probe.js";
import { type ChaosSystem, SCHEMA, startSystem } from "./helpers/system.js";

const STALE_SECONDS = 3;
const REAPER_SECONDS = 0.5;
const BLOCK_SECONDS = 12;

let cluster: ChaosCluster;
let system: ChaosSystem | undefined;
before(async () => {
  cluster = await startChaosCluster("blocked-loop");
});
after(async () => {
  await system?.stop();
  await cluster.destroy();
});

it("a blocked event loop: the jobs it shares a process with finish elsewhere within stale + reaper + slack", async () => {
  system = await startSystem({
    cluster,
    workers: 0,
    api: false,
    env: { STALE_THRESHOLD_SECONDS: String(STALE_SECONDS), REAPER_INTERVAL_SECONDS: String(REAPER_SECONDS) },
    workerEnv: { WORKER_COUNT: "4" },
  });
  // One statement: the hung worker claims all four in its first batch.
  const { rows } = await system.db.query<{ id: string; type: string }>(
    `INSERT INTO "${SCHEMA}".jobs (type, payload, max_retries, priority)
     VALUES ('chaos_block', $1, 1, 10), ('chaos_work', '{"ms": 500}', 3, 5),
            ('chaos_work', '{"ms": 500}', 3, 5), ('chaos_work', '{"ms": 500}', 3, 5)
     RETURNING id, type`,
    [JSON.stringify({ seconds: BLOCK_SECONDS })],
  );
  const ids = rows.map((row) => Number(row.id));
  const blocker = Number(rows.find((row) => row.type === "chaos_block")?.id);
  const neighbours = rows.filter((row) => row.type === "chaos_work").map((row) => Number(row.id));
  const hung = await system.startWorker(0);
  const hungPid = hung.child.pid ?? 0;
  await timeUntil(
    async () =>
      (
        await system!.db.query(
          `SELECT 1 FROM "${SCHEMA}".executions e JOIN "${SCHEMA}".jobs j ON j.id = e.job_id
           WHERE e.pid = $1 AND j.type = 'chaos_block'`,
          [hungPid],
        )
      ).rowCount === 1,
    30_000,
    "the blocking handler to start",
  );
  const blockedAt = Date.now();
  await system.startWorker(1);
  const boundMs = (STALE_SECONDS + REAPER_SECONDS + 3) * 1000;
  await timeUntil(
    async () => (await finalCount(system!.db, neighbours)) === neighbours.length,
    BLOCK_SECONDS * 1000 + 30_000,
    "the neighbours of the hung handler to finish",
  );
  const sinceBlockMs = Date.now() - blockedAt;
  console.log(
    `# blocked event loop: its 3 neighbours done ${(sinceBlockMs / 1000).toFixed(2)} s after the block began (bound ${boundMs / 1000} s; the block lasts ${BLOCK_SECONDS} s)`,
  );
  // The hung process wakes at the end of the block and hands in its late result: wait for the
  // blocker to record its end there, then for the process's next log line (the write refused, or
  // its lost session reopened), so the audit sees what the late write did.
  await timeUntil(
    async () =>
      (
        await system!.db.query(
          `SELECT 1 FROM "${SCHEMA}".executions WHERE pid = $1 AND job_id = $2 AND finished_at IS NOT NULL`,
          [hungPid, blocker],
        )
      ).rowCount === 1,
    BLOCK_SECONDS * 1000 + 30_000,
    "the hung handler to wake",
  );
  const seen = hung.logs.length;
  await hung.waitForLog(() => hung.logs.length > seen, 10_000).catch(() => undefined);
  const report = await auditLedger(system.db, SCHEMA, {
    title: "blocked event loop",
    acknowledged: ids,
    boundMs: 60_000,
    allowOverlap: true,
    processEnds: system.processEnds,
  });
  assert.deepEqual(report.failures, []);
  const { rows: neighbourRows } = await system.db.query<{ status: string }>(
    `SELECT status FROM "${SCHEMA}".jobs WHERE id = ANY($1::bigint[])`,
    [neighbours],
  );
  assert.deepEqual(
    neighbourRows.map((row) => row.status),
    ["done", "done", "done"],
    "the neighbours end done",
  );
  assert.ok(
    sinceBlockMs <= boundMs,
    `neighbours done ${sinceBlockMs} ms after the block began, bound ${boundMs} ms`,
  );
});
