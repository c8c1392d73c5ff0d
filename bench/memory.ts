/**
 * Memory over a long drain (issue: "a worker draining 1,000,000 jobs keeps a flat RSS"): one
 * in-process worker runs `--jobs` noop jobs (default 1,000,000), fed in ten rounds so the backlog
 * stays at a tenth of the total, and RSS and heap are printed at the start, after every round, and
 * at the end. Between rounds the jobs table is vacuumed, as autovacuum would do: the CI server of
 * this project runs with autovacuum off, and without vacuum the claim index fills with dead
 * entries that every claim must step over.
 *
 *   npm run bench:memory -- [--jobs 1000000] [--concurrency 100] [--prefetch 1000]
 *
 * Uses DATABASE_URL (default postgres://postgres@127.0.0.1:5432/test) and a throw-away schema.
 */
import { parseArgs } from "node:util";
import { positiveInteger } from "../src/cli/flags.js";
import { TaskQueue } from "../src/index.js";

const { values } = parseArgs({
  options: {
    jobs: { type: "string", default: "1000000" },
    concurrency: { type: "string", default: "100" },
    prefetch: { type: "string", default: "1000" },
  },
});
/** The flags, read as the taskqueue command reads its own; a bad one exits 2 naming it. */
function flag(name: "jobs" | "concurrency" | "prefetch"): number {
  try {
    return positiveInteger(`--${name}`)(values[name]);
  } catch (error) {
    console.error(`error: ${(error as Error).message}`);
    process.exit(2);
  }
}
const jobs = flag("jobs");
const schema = `bench_memory_${process.pid}`;
const queue = new TaskQueue({
  databaseUrl: process.env.DATABASE_URL ?? "postgres://postgres@127.0.0.1:5432/test",
  schema,
  notifyChannel: `${schema}_jobs`,
  logLevel: "warn",
});
const mib = (bytes: number) => (bytes / 1024 / 1024).toFixed(1);
const report = (label: string, done: number) => {
  const m = process.memoryUsage();
  console.log(
    `${label.padEnd(8)} done ${String(done).padStart(8)}  rss ${mib(m.rss).padStart(7)} MiB  heap ${mib(m.heapUsed).padStart(6)} MiB`,
  );
};

try {
  await queue.migrate();
  queue.register("noop", () => null);
  const worker = await queue.startWorker({
    workerCount: flag("concurrency"),
    prefetch: flag("prefetch"),
    runReaper: false,
  });
  let done = 0;
  worker.on("job:completed", () => {
    done++;
  });
  const rounds = 10;
  const perRound = Math.ceil(jobs / rounds);
  report("start", 0);
  let drainSeconds = 0;
  for (let round = 1; round <= rounds && done < jobs; round++) {
    const target = Math.min(jobs, round * perRound);
    for (let queued = done; queued < target; queued += 10_000) {
      await queue.addJobs(
        Array.from({ length: Math.min(10_000, target - queued) }, () => ({ type: "noop" })),
      );
    }
    const started = performance.now();
    await new Promise<void>((resolve) => {
      const check = () => (done >= target ? resolve() : setTimeout(check, 20));
      check();
    });
    drainSeconds += (performance.now() - started) / 1000;
    report(round === rounds ? "end" : `${round * 10} %`, done);
    await queue.pool.query(`VACUUM (ANALYZE) "${schema}".jobs`);
  }
  console.log(
    `drained ${done} jobs in ${drainSeconds.toFixed(1)} s of draining = ${Math.round(done / drainSeconds)} jobs/s`,
  );
} finally {
  await queue.close();
  const { default: pg } = await import("pg");
  const client = new pg.Client({ connectionString: queue.config.databaseUrl });
  await client.connect();
  await client.query(`DROP SCHEMA IF EXISTS "${schema}" CASCADE`);
  await client.end();
}
