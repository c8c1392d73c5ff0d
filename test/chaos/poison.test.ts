/**
 * Chaos: poison handlers — one that calls `process.exit(1)`, one that throws from a timer, one that
 * leaves a rejection unhandled — each beside 6 innocent 1 s jobs of the same worker process.
 * - sandboxed (CHAOS_SANDBOX: the poison types run in child processes of the worker): only the
 *   child dies; the innocent jobs end done with attempt 0, on their first and only execution; the
 *   poison ends dead after max_retries + 1 executions; the worker process itself lives on.
 * - in-process (no sandbox; a restart policy starts the dead worker again, as the harness does):
 *   the poison kills its worker each time, yet the jobs that only shared the process with it do
 *   not lose retries (a job lost with neighbours goes back uncounted, due at once, and runs
 *   alone; a job lost while running alone is the culprit, and that loss counts): each innocent job
 *   ends done with attempt 0 after at most 2 executions; the poison ends dead after max_retries + 1
 *   counted executions (plus at most the one it shared).
 */
import assert from "node:assert/strict";
import { after, before, describe, it } from "node:test";
import { auditLedger } from "./helpers/audit.js";
import { type ChaosCluster, startChaosCluster } from "./helpers/cluster.js";
import { statuses } from "./helpers/probe.js";
import { type ChaosSystem, SCHEMA, startSystem } from "./helpers/system.js";

const POISONS = ["chaos_exit", "chaos_timer_throw", "chaos_rejection"] as const;
const MAX_RETRIES = 2;
let cluster: ChaosCluster;
before(async () => {
  cluster = await startChaosCluster("poison");
});
after(async () => {
  await cluster.destroy();
});

/** Inserts one poison job and 6 innocent ones in one statement (one claim batch of 7). */
async function arrange(system: ChaosSystem, poison: string): Promise<{ poison: number; innocent: number[] }> {
  const { rows } = await system.db.query<{ id: string; type: string }>(
    `INSERT INTO "${SCHEMA}".jobs (type, payload, max_retries)
     SELECT CASE WHEN i = 1 THEN $1 ELSE 'chaos_work' END,
            CASE WHEN i = 1 THEN '{}'::jsonb ELSE '{"ms": 1000}'::jsonb END, $2
     FROM generate_series(1, 7) AS i RETURNING id, type`,
    [poison, MAX_RETRIES],
  );
  return {
    poison: Number(rows.find((row) => row.type === poison)?.id),
    innocent: rows.filter((row) => row.type === "chaos_work").map((row) => Number(row.id)),
  };
}

async function executionCounts(system: ChaosSystem, ids: number[]): Promise<Map<number, number>> {
  const { rows } = await system.db.query<{ job_id: string; n: number }>(
    `SELECT job_id, count(*)::int AS n FROM "${SCHEMA}".executions WHERE job_id = ANY($1::bigint[]) GROUP BY job_id`,
    [ids],
  );
  return new Map(rows.map((row) => [Number(row.job_id), row.n]));
}

for (const mode of ["sandboxed", "in-process"] as const) {
  describe(`poison handlers, ${mode}`, () => {
    let system: ChaosSystem | undefined;
    after(async () => {
      await system?.stop();
      system = undefined;
    });

    for (const poisonType of POISONS) {
      it(`${poisonType}: the innocent neighbours end done, the poison ends dead`, async () => {
        system ??= await startSystem({
          cluster,
          workers: 1,
          api: false,
          workerEnv: {
            // One process, room for the whole batch: the poison shares it with all 6.
            WORKER_COUNT: "7",
            ...(mode === "sandboxed" ? { CHAOS_SANDBOX: POISONS.join(",") } : {}),
          },
        });
        const sys = system;
        const firstPid = sys.workers[0]?.process.child.pid;
        await sys.db.query(`TRUNCATE "${SCHEMA}".jobs, "${SCHEMA}".executions`);
        const { poison, innocent } = await arrange(sys, poisonType);
        const report = await auditLedger(sys.db, SCHEMA, {
          title: `poison ${poisonType} (${mode})`,
          acknowledged: [poison, ...innocent],
          boundMs: 90_000,
          // A worker killed by in-process poison loses its session: its jobs may run again.
          allowOverlap: mode === "in-process",
          processEnds: sys.processEnds,
        });
        assert.deepEqual(report.failures, []);
        const final = await statuses(sys.db, [poison, ...innocent]);
        const runs = await executionCounts(sys, [poison, ...innocent]);
        assert.equal(final.get(poison)?.status, "dead", "the poison ends dead");
        const poisonRuns = runs.get(poison) ?? 0;
        if (mode === "sandboxed")
          assert.equal(poisonRuns, MAX_RETRIES + 1, "the poison ran max_retries + 1 times");
        else
          assert.ok(
            poisonRuns === MAX_RETRIES + 1 || poisonRuns === MAX_RETRIES + 2,
            `the poison ran ${poisonRuns} times (max_retries + 1 counted, plus at most one shared)`,
          );
        for (const id of innocent) {
          assert.equal(final.get(id)?.status, "done", `innocent job ${id} ends done`);
          assert.equal(final.get(id)?.attempt, 0, `innocent job ${id} lost no attempt`);
          if (mode === "sandboxed") assert.equal(runs.get(id), 1, `innocent job ${id} ran once`);
          else assert.ok((runs.get(id) ?? 0) <= 2, `innocent job ${id} ran ${runs.get(id)} times`);
        }
        if (mode === "sandboxed")
          assert.equal(sys.workers[0]?.process.child.pid, firstPid, "the worker process itself lived on");
      });
    }
  });
}
