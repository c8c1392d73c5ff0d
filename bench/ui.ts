#!/usr/bin/env node
/**
 * `npm run bench:ui -- [flags]`: does the dashboard stay responsive with a large history? (issue
 * 12, item 2). On a fresh schema: `--history` finished jobs (1,000,000: 94 % done, 5 % dead with
 * their dead-letter entries, 1 % cancelled, 20 types, finished over the last hour), an hour of
 * per-second stats in every slot, `--pending` pending jobs of those types and one worker process
 * running `slow` jobs. Then each route the overview polls (and the first pages of the job and
 * dead-letter lists) is called `--samples` times in a row over HTTP, and one overview round (the
 * five calls the page makes every 2 s, at once) as many times. The report gives p50, p95 and max
 * per route. Figures, not a test: the machine may be shared.
 */
import { Command, Option } from "commander";
import { positiveInteger } from "../src/cli/flags.js";
import { exitWith, runBenchProgram, SYSTEM_HELP } from "./shared/cli.js";
import { startProgress } from "./shared/progress.js";
import { analyzeJobs, fillUiStats, insertUiHistory } from "./shared/statements.js";
import { fixed, summarizeMs } from "./shared/stats.js";
import { type BenchSystem, withBenchSystem } from "./shared/system.js";
import { renderTable } from "./shared/table.js";

interface UiFlags {
  history: number;
  pending: number;
  samples: number;
  progress: boolean;
}

/** History rows inserted per statement. */
const HISTORY_CHUNK = 100_000;

/** The routes the overview polls every 2 s (ui/src/overview.ts). */
const OVERVIEW = ["/metrics", "/stats/types", "/stats/throughput?minutes=60", "/workers"];
/** The first pages of the lists. */
const LISTS = [
  "/jobs?limit=50",
  "/jobs?status=dead&limit=50",
  "/jobs?type=type_7&limit=50",
  "/dead-letters?limit=50",
];

/** Calls `path` once; resolves with the milliseconds it took. @throws on a non-2xx answer. */
async function timed(system: BenchSystem, path: string): Promise<number> {
  const started = performance.now();
  const res = await fetch(`${system.apiUrl}${path}`);
  await res.arrayBuffer();
  if (!res.ok) throw new Error(`GET ${path}: HTTP ${res.status}`);
  return performance.now() - started;
}

async function seed(system: BenchSystem, flags: UiFlags): Promise<void> {
  const pool = system.queue.pool;
  const bar = startProgress("history", flags.history, flags.progress);
  for (let done = 0; done < flags.history; done += HISTORY_CHUNK) {
    const n = Math.min(HISTORY_CHUNK, flags.history - done);
    await pool.query({ ...insertUiHistory(system.schema), values: [n, 3600] });
    bar.increment(n);
  }
  bar.stop();
  await pool.query({ ...fillUiStats(system.schema), values: [3600, 3, 0] });
  const pending = Array.from({ length: flags.pending }, (_, i) => ({
    type: `type_${i % 20}`,
    runAt: new Date(Date.now() + (i % 2) * 3600_000).toISOString(),
  }));
  for (let i = 0; i < pending.length; i += 5000) await system.queue.addJobs(pending.slice(i, i + 5000));
  await system.queue.addJobs(
    Array.from({ length: 4 }, () => ({ type: "slow", payload: { sleep_seconds: 600 } })),
  );
  await pool.query(analyzeJobs(system.schema));
}

async function run(flags: UiFlags): Promise<number> {
  return withBenchSystem("ui", async (system) => {
    await seed(system, flags);
    await system.startWorkers({ count: 1, concurrency: 4 });
    const rows: [string, string][] = [];
    for (const path of [...OVERVIEW, ...LISTS]) {
      await timed(system, path); // first call: prepares the statement
      const samples: number[] = [];
      for (let i = 0; i < flags.samples; i++) samples.push(await timed(system, path));
      const s = summarizeMs(samples);
      rows.push([
        `GET ${path}`,
        `p50 ${fixed(s.p50Ms, 1)}  p95 ${fixed(s.p95Ms, 1)}  max ${fixed(s.maxMs, 1)} ms`,
      ]);
    }
    const rounds: number[] = [];
    for (let i = 0; i < flags.samples; i++) {
      const started = performance.now();
      await Promise.all(OVERVIEW.map((path) => timed(system, path)));
      rounds.push(performance.now() - started);
    }
    const r = summarizeMs(rounds);
    console.log(
      renderTable({
        title: `dashboard reads, ${flags.history.toLocaleString("en-US")} finished jobs, ${flags.pending.toLocaleString("en-US")} pending`,
        sections: [
          rows,
          [
            [
              "overview round (4 calls at once)",
              `p50 ${fixed(r.p50Ms, 1)}  p95 ${fixed(r.p95Ms, 1)}  max ${fixed(r.maxMs, 1)} ms`,
            ],
          ],
          [`${flags.samples} calls each, one after another, over HTTP on this machine`],
        ],
      }),
    );
    return 0;
  });
}

const program = new Command("bench:ui")
  .description("Times the dashboard's reads with a large history of finished jobs.")
  .addOption(
    new Option("--history <n>", "finished jobs").default(1_000_000).argParser(positiveInteger("--history")),
  )
  .addOption(
    new Option("--pending <n>", "pending jobs").default(10_000).argParser(positiveInteger("--pending")),
  )
  .addOption(
    new Option("--samples <n>", "calls per route").default(30).argParser(positiveInteger("--samples")),
  )
  .option("--no-progress", "no progress bars")
  .addHelpText("after", SYSTEM_HELP)
  .exitOverride()
  .action((flags: UiFlags) => exitWith(() => run(flags)));
runBenchProgram(program);
