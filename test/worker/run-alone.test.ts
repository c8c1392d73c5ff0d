/**
 * Jobs lost with their worker process (DESIGN.md §6, "Lost jobs"), on real worker processes: a
 * poison job that ends its process costs its neighbours no retry (they come back uncounted and run
 * alone) and is dead-lettered after its own retries; the jobs of a SIGKILLed worker are due again
 * at once, wake a worker, and complete elsewhere within stale threshold + reaper interval + 1 s.
 */
import assert from "node:assert/strict";
import { after, before, beforeEach, it } from "node:test";
import { EXECUTIONS_DDL } from "../fixtures/crash-handlers.js";
import { createTestDb, type TestDb } from "../helpers/db.js";
import { type CliProcess, cliEnv, startCli, until } from "../helpers/process.js";

const HANDLERS = "dist/test/fixtures/crash-handlers.js";
const STALE_SECONDS = 1;
const REAPER_SECONDS = 0.2;

let db: TestDb;
before(async () => {
  db = await createTestDb();
  await db.sql(EXECUTIONS_DDL);
});
after(async () => {
  await db.drop();
});
beforeEach(async () => {
  await db.sql("DELETE FROM jobs");
  await db.sql("DELETE FROM executions");
});

/** A worker process with short intervals; `extra` adds to (or overrides) its environment. */
function startWorkerProcess(extra: Record<string, string> = {}): CliProcess {
  return startCli(
    ["worker", "--concurrency", "8", "--handlers", HANDLERS, "--types", "poison,innocent,sleepy"],
    cliEnv(db, {
      STALE_THRESHOLD_SECONDS: String(STALE_SECONDS),
      REAPER_INTERVAL_SECONDS: String(REAPER_SECONDS),
      HEARTBEAT_INTERVAL_SECONDS: "0.2",
      BACKOFF_BASE_SECONDS: "0.05",
      SHUTDOWN_GRACE_SECONDS: "5",
      ...extra,
    }),
  );
}

/** Stops a worker process that may have died already. */
async function stopProcess(worker: CliProcess): Promise<void> {
  if (worker.child.exitCode === null && worker.child.signalCode === null) worker.child.kill("SIGTERM");
  await worker.exited;
}

it("a poison job that ends its worker process costs its 6 neighbours no retry, and is dead-lettered after its own", async () => {
  const maxRetries = 2;
  const innocents = await db.ledger.addJobs(
    Array.from({ length: 6 }, () => ({ type: "innocent", maxRetries: 1 })),
  );
  const poison = await db.ledger.addJob({ type: "poison", maxRetries });
  const innocentIds = innocents.map((j) => j.id);
  // One worker process claims all seven; the poison ends it 300 ms in, with the six still running.
  // Whenever the worker process dies, the test starts another (restarting is not the worker's job).
  let current = startWorkerProcess();
  let deaths = 0;
  const finished = async () => {
    const [lost] = await db.sql<{ id: number; attempt: number }>(
      "SELECT id, attempt FROM jobs WHERE id = ANY($1) AND attempt > 0 LIMIT 1",
      [innocentIds],
    );
    assert.equal(lost, undefined, `innocent job ${lost?.id} lost ${lost?.attempt} attempt(s)`);
    const [row] = await db.sql<{ n: number }>(
      "SELECT count(*)::int AS n FROM jobs WHERE (id = ANY($1) AND status = 'done') OR (id = $2 AND status = 'dead')",
      [innocentIds, poison.id],
    );
    return row?.n === innocentIds.length + 1;
  };
  try {
    await until(
      async () => {
        if (current.child.exitCode !== null) {
          deaths++;
          assert.ok(deaths <= maxRetries + 2, `the worker process died ${deaths} times`);
          current = startWorkerProcess();
        }
        return finished();
      },
      120_000,
      "every innocent job done and the poison job dead",
    );
  } finally {
    await stopProcess(current);
  }
  const rows = await db.sql<{ id: number; status: string; attempt: number; errors: unknown[] }>(
    "SELECT id, status, attempt, errors FROM jobs WHERE id = ANY($1) ORDER BY id",
    [innocentIds],
  );
  assert.deepEqual(
    rows.map((r) => [r.status, r.attempt, r.errors.length]),
    innocentIds.map(() => ["done", 0, 0]),
    "every innocent job done, no attempt lost",
  );
  // Each innocent job's one completed run; the runs after the first loss were run alone: no two
  // runs in one process overlap.
  const runs = await db.sql<{ job_id: number; pid: number; started: number; ended: number }>(
    `SELECT job_id, pid, extract(epoch FROM started_at)::float8 AS started, extract(epoch FROM finished_at)::float8 AS ended
     FROM executions ORDER BY pid, started_at`,
  );
  assert.deepEqual(
    runs.map((r) => Number(r.job_id)).sort((a, b) => a - b),
    innocentIds,
  );
  for (let i = 1; i < runs.length; i++) {
    const [before, run] = [runs[i - 1], runs[i]];
    if (before && run && before.pid === run.pid)
      assert.ok(run.started >= before.ended, `job ${run.job_id} ran alone, not beside job ${before.job_id}`);
  }
  // The poison job: lost with its neighbours once (uncounted), then alone each time (counted).
  assert.equal(
    deaths,
    maxRetries + 2,
    "the poison job ended its process once beside its neighbours, then once per attempt",
  );
  const dead = await db.ledger.getDeadLetter(poison.id);
  assert.equal(dead?.attempts, maxRetries + 1);
  assert.match(dead?.error ?? "", /worker \S+ lost the job: no heartbeat since .* \(it ran alone\)/);
  assert.deepEqual(await db.ledger.heldJobLocks(), []);
});

it("a SIGKILLed worker's jobs are due at once, wake a worker, and complete elsewhere within stale threshold + reaper interval + 1 s", async () => {
  // No poll to speak of: only the reaper's wake-up can bring the rescuer to the reclaimed jobs.
  const slowPoll = { POLL_INTERVAL_SECONDS: "60" };
  const victim = startWorkerProcess({ ...slowPoll, FIXTURE_HANG: "1" });
  let rescuer: CliProcess | null = null;
  try {
    await victim.waitForLog((l) => l.msg === "worker started");
    // Two jobs lost together: each runs alone, one after the other, on the rescuer.
    const jobs = await db.ledger.addJobs(Array.from({ length: 2 }, () => ({ type: "sleepy" })));
    const ids = jobs.map((j) => j.id);
    await until(
      async () =>
        (await db.sql("SELECT id FROM jobs WHERE id = ANY($1) AND status = 'running'", [ids])).length ===
        ids.length,
      15_000,
      "the victim runs both jobs",
    );
    rescuer = startWorkerProcess(slowPoll);
    // The rescuer's first claim (at its start) finds nothing: from then on only a wake-up helps.
    await rescuer.waitForLog((l) => l.msg === "worker started");
    victim.child.kill("SIGKILL");
    const killedAt = performance.now();
    await victim.exited;
    await until(
      async () =>
        (await db.sql("SELECT id FROM jobs WHERE id = ANY($1) AND status = 'done'", [ids])).length ===
        ids.length,
      30_000,
      "the rescuer completes both jobs",
    );
    const elapsedMs = performance.now() - killedAt;
    const boundMs = (STALE_SECONDS + REAPER_SECONDS + 1) * 1000;
    console.log(
      `# reclaim after SIGKILL: ${ids.length} jobs done elsewhere ${Math.round(elapsedMs)} ms after the kill (bound ${boundMs} ms: stale threshold ${STALE_SECONDS} s + reaper interval ${REAPER_SECONDS} s + 1 s)`,
    );
    assert.ok(elapsedMs <= boundMs, `done ${Math.round(elapsedMs)} ms after the kill, bound ${boundMs} ms`);
    const rows = await db.sql<{ attempt: number }>("SELECT attempt FROM jobs WHERE id = ANY($1)", [ids]);
    assert.ok(
      rows.every((r) => r.attempt === 0),
      "lost together, each job came back without a failed attempt",
    );
  } finally {
    await stopProcess(victim);
    if (rescuer) await stopProcess(rescuer);
  }
});
