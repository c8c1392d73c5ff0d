/**
 * Cost of the pending-jobs caps (src/queue/capacity.ts) on one single-job insert: with `--pending`
 * (50,000) jobs pending, `--inserts` (2,000) `addJob` calls one after another through a ledger
 * with no cap, one with the total cap and one with both caps (set high, so that nothing is
 * refused), in alternating rounds; prints the mean time of one insert for each, and the time of
 * the statement that reads the counts (once a second per process at most).
 *
 *   npm run bench:pending-cap -- [--pending 50000] [--inserts 2000] [--rounds 4]
 *
 * Uses DATABASE_URL (default postgres://postgres@127.0.0.1:5432/test) and a throw-away schema.
 */
import { parseArgs } from "node:util";
import { positiveInteger } from "../src/cli/flags.js";
import { TaskQueue } from "../src/index.js";
import { Ledger } from "../src/queue/ledger.js";
import { pendingCounts } from "../src/queue/sql/capacity.js";

const { values } = parseArgs({
  options: {
    pending: { type: "string", default: "50000" },
    inserts: { type: "string", default: "2000" },
    rounds: { type: "string", default: "4" },
  },
});
function flag(name: "pending" | "inserts" | "rounds"): number {
  try {
    return positiveInteger(`--${name}`)(values[name]);
  } catch (error) {
    console.error(`error: ${(error as Error).message}`);
    process.exit(2);
  }
}
const pending = flag("pending");
const inserts = flag("inserts");
const rounds = flag("rounds");
const schema = `bench_pendcap_${process.pid}`;
const queue = new TaskQueue({
  databaseUrl: process.env.DATABASE_URL ?? "postgres://postgres@127.0.0.1:5432/test",
  schema,
  notifyChannel: `${schema}_jobs`,
  logLevel: "warn",
});
const HIGH = 1_000_000_000;

try {
  await queue.migrate();
  for (let done = 0; done < pending; done += 10_000) {
    const n = Math.min(10_000, pending - done);
    await queue.addJobIds(Array.from({ length: n }, (_, i) => ({ type: `fill_${i % 20}` })));
  }
  const ledgers = {
    "no cap": new Ledger(queue.pool, schema),
    maxPendingJobs: new Ledger(queue.pool, schema, { maxPendingJobs: HIGH, maxPendingJobsPerType: 0 }),
    "both caps": new Ledger(queue.pool, schema, { maxPendingJobs: HIGH, maxPendingJobsPerType: HIGH }),
  };
  const totals = new Map<string, number>();
  for (let round = 0; round < rounds; round++) {
    for (const [name, ledger] of Object.entries(ledgers)) {
      const started = performance.now();
      for (let i = 0; i < inserts; i++) await ledger.addJob({ type: "bench" });
      totals.set(name, (totals.get(name) ?? 0) + performance.now() - started);
      // Back to `pending` jobs, so every round counts the same.
      await queue.pool.query(`DELETE FROM "${schema}".jobs WHERE type = 'bench'`);
    }
  }
  console.log(
    `pending-cap: ${pending} pending jobs (20 types), ${rounds} rounds × ${inserts} addJob one at a time`,
  );
  const base = (totals.get("no cap") ?? 0) / (rounds * inserts);
  for (const [name, total] of totals) {
    const mean = total / (rounds * inserts);
    console.log(
      `  ${name.padEnd(15)} ${(mean * 1000).toFixed(0).padStart(5)} µs per insert  (${mean >= base ? "+" : ""}${(((mean - base) / base) * 100).toFixed(1)} %)`,
    );
  }
  for (const perType of [false, true]) {
    const times: number[] = [];
    for (let i = 0; i < 20; i++) {
      const started = performance.now();
      await queue.pool.query({ ...pendingCounts(schema), values: [perType] });
      times.push(performance.now() - started);
    }
    times.sort((a, b) => a - b);
    console.log(
      `  count statement, ${perType ? "total and per type" : "total only"}: median ${(times[10] ?? 0).toFixed(2)} ms`,
    );
  }
} finally {
  await queue.pool.query(`DROP SCHEMA IF EXISTS "${schema}" CASCADE`).catch(() => undefined);
  await queue.close();
}
