#!/usr/bin/env node
/**
 * `npm run bench:claim-filter -- [flags]`: does another type's backlog slow a worker's claims down?
 * (issue 14, item 10). One in-process worker (one lane, one job at a time) picks up `a` jobs
 * enqueued one at a time, `--interval` ms apart (the worker idles between them, so each pickup is
 * a NOTIFY, then a claim); pickup latency = claimed_at − created_at (database clock). Scenarios,
 * each on a fresh schema:
 *
 * - `empty`: nothing else pending; the worker claims `a`;
 * - `backlog b`: `--backlog` (1,000,000) pending `b` jobs ahead of every `a` in claim order
 *   (priority 9, due an hour ago); the worker claims `a`;
 * - `backlog b, 10 types`: the same backlog; the worker claims `a` and nine other types without jobs;
 * - `backlog b paused`: the same backlog; the worker claims `a` and `b`, and `b` is paused.
 *
 * Prints pickup p50/p90/p99 per scenario. Uses DATABASE_URL (default
 * postgres://postgres@127.0.0.1:5432/test) and throw-away schemas. Figures, not a test: the
 * machine may be shared.
 */
import { setTimeout as sleep } from "node:timers/promises";
import { Command, Option } from "commander";
import { positiveInteger } from "../src/cli/flags.js";
import { TaskQueue, type Worker } from "../src/index.js";
import { exitWith, runBenchProgram } from "./shared/cli.js";
import { startProgress } from "./shared/progress.js";
import { dropBenchSchema, readJobTimings } from "./shared/reads.js";
import { analyzeJobs, insertBacklog } from "./shared/statements.js";
import { fixed, type LatencySummaryMs, summarizeMs } from "./shared/stats.js";
import { renderTable } from "./shared/table.js";

interface Flags {
  backlog: number;
  samples: number;
  interval: number;
  progress: boolean;
}

interface Scenario {
  name: string;
  backlog: boolean;
  types: string[];
  paused: string[];
}

const SCENARIOS: Scenario[] = [
  { name: "empty", backlog: false, types: ["a"], paused: [] },
  { name: "backlog b", backlog: true, types: ["a"], paused: [] },
  {
    name: "backlog b, 10 types",
    backlog: true,
    types: ["a", ...Array.from({ length: 9 }, (_, i) => `t${i + 1}`)],
    paused: [],
  },
  { name: "backlog b paused", backlog: true, types: ["a", "b"], paused: ["b"] },
];
const BACKLOG_CHUNK = 100_000;
/** Longest wait for one pickup. */
const PICKUP_TIMEOUT_MS = 10_000;

async function run(scenario: Scenario, flags: Flags): Promise<LatencySummaryMs> {
  const schema = `bench_claimfilter_${process.pid}_${Date.now().toString(36)}`;
  const queue = new TaskQueue({
    databaseUrl: process.env.DATABASE_URL ?? "postgres://postgres@127.0.0.1:5432/test",
    schema,
    notifyChannel: `${schema}_jobs`,
    workerCount: 1,
    logLevel: "warn",
  });
  let started: (() => void) | null = null;
  let worker: Worker | null = null;
  for (const type of new Set([...scenario.types, "b"])) queue.register(type, async () => started?.());
  try {
    await queue.migrate();
    if (scenario.backlog) {
      const bar = startProgress(`${scenario.name}: backlog`, flags.backlog, flags.progress);
      for (let done = 0; done < flags.backlog; done += BACKLOG_CHUNK) {
        const n = Math.min(BACKLOG_CHUNK, flags.backlog - done);
        await queue.pool.query({ ...insertBacklog(schema), values: ["b", 9, n] });
        bar.increment(n);
      }
      bar.stop();
      await queue.pool.query(analyzeJobs(schema));
    }
    for (const type of scenario.paused) await queue.pauseType(type);
    worker = await queue.startWorker({ types: scenario.types, runReaper: false, runScheduler: false });
    const ids: number[] = [];
    const bar = startProgress(`${scenario.name}: pickups`, flags.samples, flags.progress);
    for (let i = 0; i < flags.samples; i++) {
      await sleep(flags.interval);
      const picked = new Promise<void>((resolve, reject) => {
        const timer = setTimeout(() => reject(new Error("no pickup within 10 s")), PICKUP_TIMEOUT_MS);
        started = () => {
          clearTimeout(timer);
          resolve();
        };
      });
      const job = await queue.addJob({ type: "a" });
      await picked;
      ids.push(job.id);
      bar.increment();
    }
    bar.stop();
    const timings = await readJobTimings(queue.pool, schema, ids);
    return summarizeMs(
      timings.map((t) => ((t.claimedUs ?? Number.NaN) - t.createdUs) / 1000).filter((v) => !Number.isNaN(v)),
    );
  } finally {
    await worker?.stop();
    await dropBenchSchema(queue.pool, schema).catch(() => undefined);
    await queue.close();
  }
}

const program = new Command("bench:claim-filter")
  .description(
    "Pickup latency of a worker of type `a` with another type's backlog pending, vs an empty table.",
  )
  .addOption(
    new Option("--backlog <n>", "pending jobs of type b")
      .default(1_000_000)
      .argParser(positiveInteger("--backlog")),
  )
  .addOption(
    new Option("--samples <n>", "pickups per scenario").default(100).argParser(positiveInteger("--samples")),
  )
  .addOption(
    new Option("--interval <ms>", "idle time before each enqueue, ms")
      .default(20)
      .argParser(positiveInteger("--interval")),
  )
  .option("--no-progress", "no progress bars")
  .exitOverride()
  .action((flags: Flags) =>
    exitWith(async () => {
      const rows: [string, string][] = [];
      for (const scenario of SCENARIOS) {
        const s = await run(scenario, flags);
        rows.push([
          scenario.name,
          `p50 ${fixed(s.p50Ms, 2).padStart(7)} ms  p90 ${fixed(s.p90Ms, 2).padStart(7)} ms  p99 ${fixed(s.p99Ms, 2).padStart(7)} ms  (${s.count})`,
        ]);
      }
      console.log(
        renderTable({
          title: `claim-filter: pickup of type a (claimed_at - created_at); backlog: ${flags.backlog} pending b`,
          sections: [rows],
        }),
      );
      return 0;
    }),
  );
runBenchProgram(program);
