/**
 * Issue 13, item 3's measurement, on three real worker processes (`taskqueue worker`): a global
 * limit of 5 running on a type whose handler takes 200 ms keeps at most 5 of its jobs held
 * (claimed or running), sampled from the ledger while 100 jobs drain, and reaches 5; a rate limit
 * of 50/s holds within 5 % over 30 s, measured from the jobs' `claimed_at`. Every wait is bounded:
 * a condition in the database re-checked, or a log line.
 */
import assert from "node:assert/strict";
import { after, before, it } from "node:test";
import { setTimeout as sleep } from "node:timers/promises";
import { createTestDb, type TestDb } from "../helpers/db.js";
import { type CliProcess, cliEnv, startCli, until } from "../helpers/process.js";

let db: TestDb;
const workers: CliProcess[] = [];
before(async () => {
  db = await createTestDb();
  const env = cliEnv(db, { LOG_LEVEL: "info" });
  for (let i = 0; i < 3; i++)
    workers.push(startCli(["worker", "--no-migrate", "--concurrency", "4", "--types", "slow,noop"], env));
  await Promise.all(workers.map((w) => w.waitForLog((l) => l.msg === "worker started", 30_000)));
});
after(async () => {
  for (const worker of workers) if (worker.child.exitCode === null) worker.child.kill("SIGTERM");
  await Promise.all(workers.map((w) => w.exited));
  await db.drop();
});

/** Jobs of `type` by status group: held (claimed or running) and finished (done). */
async function counts(type: string): Promise<{ held: number; done: number }> {
  const [row] = await db.sql<{ held: number; done: number }>(
    `SELECT count(*) FILTER (WHERE status IN ('claimed', 'running'))::int AS held,
            count(*) FILTER (WHERE status = 'done')::int AS done
     FROM jobs WHERE type = $1`,
    [type],
  );
  return row ?? { held: -1, done: -1 };
}

it("a global limit of 5 over 3 worker processes (12 handler slots): never more than 5 held, and 5 reached", {
  timeout: 120_000,
}, async () => {
  await db.ledger.setTypeLimit("slow", { maxRunning: 5 });
  const total = 100;
  await db.ledger.addJobs(
    Array.from({ length: total }, () => ({ type: "slow", payload: { sleep_seconds: 0.2 } })),
  );
  // Sampled from the ledger, back to back, until every job is done (the sampling is the
  // measurement, not a wait for an event; the loop ends on the ledger's state).
  const deadline = Date.now() + 90_000;
  let maxHeld = 0;
  let samples = 0;
  for (;;) {
    const { held, done } = await counts("slow");
    samples++;
    maxHeld = Math.max(maxHeld, held);
    if (done === total) break;
    assert.ok(Date.now() < deadline, `only ${done} of ${total} jobs done in 90 s`);
    await sleep(2);
  }
  const [spread] = await db.sql<{ workers: number }>(
    "SELECT count(DISTINCT split_part(worker_id, '/', 1))::int AS workers FROM jobs WHERE type = 'slow'",
  );
  console.log(
    `# limit 5: max held ${maxHeld} over ${samples} samples; ${total} jobs done by ${spread?.workers} processes`,
  );
  assert.ok(maxHeld <= 5, `${maxHeld} jobs held at once, limit 5`);
  assert.equal(maxHeld, 5, "the limit was reached");
});

it("a rate limit of 50/s over 3 worker processes holds within 5 % over 30 s", {
  timeout: 120_000,
}, async () => {
  await db.ledger.setTypeLimit("noop", { ratePerSecond: 50 });
  const total = 1800;
  await db.ledger.addJobs(Array.from({ length: total }, () => ({ type: "noop" })));
  // The window: 30 s from 1 s after the first claim (that first second also spends the full
  // bucket, its burst of 50). Wait until a claim after the window's end exists.
  const firstClaim = async () =>
    (
      await db.sql<{ t: number | null }>(
        "SELECT extract(epoch FROM min(claimed_at))::float8 AS t FROM jobs WHERE type = 'noop'",
      )
    )[0]?.t ?? null;
  await until(async () => (await firstClaim()) !== null, 20_000, "the first claim");
  const t0 = (await firstClaim()) as number;
  await until(
    async () =>
      ((
        await db.sql<{ n: number }>(
          "SELECT count(*)::int AS n FROM jobs WHERE type = 'noop' AND claimed_at >= to_timestamp($1::float8)",
          [t0 + 31.5],
        )
      )[0]?.n ?? 0) > 0,
    60_000,
    "claims past the 30 s window",
  );
  const perSecond = await db.sql<{ second: number; n: number }>(
    `SELECT floor(extract(epoch FROM claimed_at) - $1::float8)::int AS second, count(*)::int AS n
     FROM jobs WHERE type = 'noop' AND claimed_at IS NOT NULL GROUP BY 1 ORDER BY 1`,
    [t0],
  );
  const inWindow = perSecond.filter((s) => s.second >= 1 && s.second < 31);
  const started = inWindow.reduce((sum, s) => sum + s.n, 0);
  const firstThirty = perSecond
    .filter((s) => s.second >= 0 && s.second < 30)
    .reduce((sum, s) => sum + s.n, 0);
  const deviation = (started - 1500) / 1500;
  console.log(
    `# rate 50/s: ${started} claims in the 30 s from 1 s after the first (${(deviation * 100).toFixed(2)} % off 1,500); ` +
      `${firstThirty} in the first 30 s, burst included; per second ${inWindow.map((s) => s.n).join(",")}`,
  );
  assert.equal(inWindow.length, 30, "claims in every second of the window");
  assert.ok(Math.abs(deviation) <= 0.05, `${started} claims in 30 s at 50/s`);
  await db.ledger.removeTypeLimit("noop");
  // Unlimited again (workers are told by NOTIFY): the rest drain at once.
  await until(
    async () => (await counts("noop")).done === total,
    30_000,
    "the rest of the jobs after the limit's removal",
  );
});
