/**
 * Memory under a long drain (issue: "a worker draining 1,000,000 jobs keeps a flat RSS"):
 * enqueues `--jobs` noop jobs (default 1,000,000), then drains them with one in-process worker
 * and prints RSS and heap at the start, every 10 %, and at the end.
 *
 *   npm run build && node dist/bench/memory.js [--jobs 1000000] [--concurrency 100] [--prefetch 1000]
 *
 * Uses DATABASE_URL (default postgres://postgres@127.0.0.1:5432/test) and a throw-away schema.
 * At every 10 % it runs `VACUUM (ANALYZE)` on the jobs table, as autovacuum would: the CI server of
 * this project runs with autovacuum off, and without vacuum the claim index fills with dead
 * entries that every claim must step over.
 */
import { parseArgs } from "node:util";
import { TaskQueue } from "../src/index.js";

const { values } = parseArgs({
  options: {
    jobs: { type: "string", default: "1000000" },
    concurrency: { type: "string", default: "100" },
    prefetch: { type: "string", default: "1000" },
  },
});
const jobs = Number(values.jobs);
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
  const enqueueStarted = performance.now();
  for (let i = 0; i < jobs; i += 10_000) {
    await queue.addJobs(Array.from({ length: Math.min(10_000, jobs - i) }, () => ({ type: "noop" })));
  }
  console.log(`enqueued ${jobs} jobs in ${((performance.now() - enqueueStarted) / 1000).toFixed(1)} s`);
  report("start", 0);
  let done = 0;
  const step = Math.max(1, Math.floor(jobs / 10));
  const drainStarted = performance.now();
  const worker = await queue.startWorker({
    workerCount: Number(values.concurrency),
    prefetch: Number(values.prefetch),
    runReaper: false,
  });
  await new Promise<void>((resolve) => {
    worker.on("job:completed", () => {
      done++;
      if (done % step === 0 && done < jobs) {
        report(`${Math.round((done / jobs) * 100)} %`, done);
        void queue.pool.query(`VACUUM (ANALYZE) "${schema}".jobs`).catch(() => undefined);
      }
      if (done === jobs) resolve();
    });
  });
  const seconds = (performance.now() - drainStarted) / 1000;
  report("end", done);
  console.log(`drained ${jobs} jobs in ${seconds.toFixed(1)} s = ${Math.round(jobs / seconds)} jobs/s`);
} finally {
  await queue.close();
  const { default: pg } = await import("pg");
  const client = new pg.Client({ connectionString: queue.config.databaseUrl });
  await client.connect();
  await client.query(`DROP SCHEMA IF EXISTS "${schema}" CASCADE`);
  await client.end();
}
