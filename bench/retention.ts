#!/usr/bin/env node
/**
 * `npm run bench:retention -- [flags]`: does pruning a large history slow the queue down? (issue
 * 14, item 9). Two runs of the same work, each on a fresh schema with its own worker processes
 * (`taskqueue worker`, which prune as they run the reaper):
 *
 * - baseline: an empty table, nothing to prune;
 * - pruning: `--history` finished jobs (1,000,000) completed 8 days ago, so due for deletion
 *   under the default `RETAIN_DONE_SECONDS` (7 days); the workers start pruning them.
 *
 * In each, once the workers run (and, in the second, once a pruning pass holds its lock), `--jobs`
 * delayed noop jobs are made due at once and drained (drain = jobs / (last completed_at − first
 * claimed_at), database clock), then one job every `--pickup-interval` ms measures pickup latency
 * (claimed_at − created_at). The report compares the two and says how many history rows the
 * pruning pass deleted meanwhile (it must still be running at the end for the figure to mean
 * anything). Figures, not a test: the machine may be shared.
 */
import { setTimeout as sleep } from "node:timers/promises";
import { Command, Option } from "commander";
import { positiveInteger, positiveNumber } from "../src/cli/flags.js";
import { lockClassFor } from "../src/queue/lock-class.js";
import { exitWith, runBenchProgram, SYSTEM_HELP } from "./shared/cli.js";
import { runPool } from "./shared/concurrency.js";
import { startProgress } from "./shared/progress.js";
import { makeDelayedJobsDue, readJobTimings } from "./shared/reads.js";
import { historyLeft, insertHistory, pruningLockHeld } from "./shared/statements.js";
import { extent, fixed, type LatencySummaryMs, summarizeMs } from "./shared/stats.js";
import { type BenchSystem, withBenchSystem } from "./shared/system.js";
import { renderTable } from "./shared/table.js";
import { waitForFinalJobs } from "./shared/wait.js";

interface RetentionFlags {
  history: number;
  jobs: number;
  workers: number;
  concurrency: number;
  pickupSamples: number;
  pickupInterval: number;
  settle: number;
  progress: boolean;
}

/** One run's figures. */
interface RunFigures {
  drainJobsPerSecond: number;
  drainSeconds: number;
  pickup: LatencySummaryMs;
  /** History rows deleted between the moment the jobs were made due and the last pickup sample. */
  prunedDuring: number;
  /** History rows left at the end. */
  historyLeft: number;
  /** Whether a pruning pass held its lock when the measurement ended. */
  pruningAtEnd: boolean;
}

/** History rows are inserted this many per statement. */
const HISTORY_CHUNK = 100_000;
const DAY_SECONDS = 86_400;

async function left(system: BenchSystem): Promise<number> {
  const { rows } = await system.queue.pool.query<{ left: number }>(historyLeft(system.schema));
  return rows[0]?.left ?? 0;
}

async function pruning(system: BenchSystem): Promise<boolean> {
  const { rows } = await system.queue.pool.query<{ pruning: boolean }>({
    ...pruningLockHeld(system.schema),
    values: [lockClassFor(system.schema)],
  });
  return rows[0]?.pruning ?? false;
}

/** Runs the drain and the pickup samples on `system`, with `history` rows due for pruning first. */
async function measure(system: BenchSystem, flags: RetentionFlags, history: number): Promise<RunFigures> {
  const seeding = startProgress("history", history, flags.progress);
  for (let done = 0; done < history; done += HISTORY_CHUNK) {
    const n = Math.min(HISTORY_CHUNK, history - done);
    await system.queue.pool.query({
      ...insertHistory(system.schema),
      values: [n, 9 * DAY_SECONDS, 8 * DAY_SECONDS],
    });
    seeding.increment(n);
  }
  seeding.stop();
  const runAt = new Date(Date.now() + 3_600_000);
  const ids: number[] = [];
  for (let done = 0; done < flags.jobs; done += 1000) {
    const size = Math.min(1000, flags.jobs - done);
    ids.push(
      ...(await system.queue.addJobIds(Array.from({ length: size }, () => ({ type: "noop", runAt })))),
    );
  }
  const workers = await system.startWorkers({
    count: flags.workers,
    concurrency: flags.concurrency,
    // Every worker process prunes (one at a time): the first pass starts within a second.
    env: { PRUNE_INTERVAL_SECONDS: "1", RETAIN_DONE_SECONDS: String(7 * DAY_SECONDS) },
  });
  try {
    if (history > 0) {
      const deadline = Date.now() + 30_000;
      while (!(await pruning(system))) {
        if (Date.now() > deadline) throw new Error("no pruning pass started within 30 s");
        await sleep(100);
      }
    }
    await sleep(flags.settle * 1000);
    const leftBefore = history > 0 ? await left(system) : 0;
    const draining = startProgress("draining", flags.jobs, flags.progress);
    await makeDelayedJobsDue(system.queue.pool, system.schema, ids, system.notifyChannel);
    await waitForFinalJobs(system.queue, history + flags.jobs, 600_000, draining);
    draining.stop();
    const timings = (await readJobTimings(system.queue.pool, system.schema, ids)).filter(
      (j) => j.status === "done",
    );
    const first = extent(timings.map((j) => j.claimedUs ?? Number.POSITIVE_INFINITY)).min;
    const last = extent(timings.map((j) => j.completedUs ?? Number.NEGATIVE_INFINITY)).max;
    const drainSeconds = (last - first) / 1e6;

    const started = performance.now();
    const pickupIds = await runPool(flags.pickupSamples, flags.pickupSamples, async (i) => {
      const wait = started + i * flags.pickupInterval - performance.now();
      if (wait > 0) await sleep(wait);
      return (await system.queue.addJob({ type: "noop" })).id;
    });
    await waitForFinalJobs(
      system.queue,
      history + flags.jobs + flags.pickupSamples,
      60_000,
      startProgress("pickup", flags.pickupSamples, false),
    );
    const pickupJobs = await readJobTimings(system.queue.pool, system.schema, pickupIds);
    const pruningAtEnd = history > 0 && (await pruning(system));
    const leftAfter = history > 0 ? await left(system) : 0;
    return {
      drainJobsPerSecond: timings.length / drainSeconds,
      drainSeconds,
      pickup: summarizeMs(
        pickupJobs
          .filter((j) => j.claimedUs !== null)
          .map((j) => ((j.claimedUs as number) - j.createdUs) / 1000),
      ),
      prunedDuring: leftBefore - leftAfter,
      historyLeft: leftAfter,
      pruningAtEnd,
    };
  } finally {
    await workers.stop();
  }
}

const ratio = (value: number, base: number) =>
  `${value >= base ? "+" : ""}${fixed(((value - base) / base) * 100, 1)} %`;

async function run(flags: RetentionFlags): Promise<number> {
  const baseline = await withBenchSystem("retention_idle", (system) => measure(system, flags, 0));
  let machine = "";
  const pruned = await withBenchSystem("retention_prune", async (system) => {
    machine = `${system.machine.cpuModel} (${system.machine.cpuCount} CPUs), Node ${system.machine.node}, PostgreSQL ${system.machine.postgresVersion}`;
    return measure(system, flags, flags.history);
  });
  const row = (label: string, f: RunFigures): [string, string] => [
    label,
    `drain ${fixed(f.drainJobsPerSecond, 0)} jobs/s (${fixed(f.drainSeconds, 2)} s); pickup p50 ${fixed(f.pickup.p50Ms, 1)} ms, p90 ${fixed(f.pickup.p90Ms, 1)} ms, p99 ${fixed(f.pickup.p99Ms, 1)} ms`,
  ];
  console.log(
    renderTable({
      title: "Retention Benchmark — drain and pickup while a large history is pruned",
      sections: [
        [
          [
            "History due for pruning",
            `${flags.history} done jobs, completed 8 days ago (RETAIN_DONE_SECONDS 7 days)`,
          ],
          [
            "Jobs drained",
            `${flags.jobs} noop; ${flags.workers} worker processes × concurrency ${flags.concurrency}`,
          ],
          ["Pickup samples", `${flags.pickupSamples}, one every ${flags.pickupInterval} ms`],
        ],
        ["Runs", row("idle table (nothing to prune)", baseline), row("pruning the history", pruned)],
        [
          "Pruning against idle",
          ["drain rate", ratio(pruned.drainJobsPerSecond, baseline.drainJobsPerSecond)],
          ["pickup p50", ratio(pruned.pickup.p50Ms, baseline.pickup.p50Ms)],
          ["pickup p99", ratio(pruned.pickup.p99Ms, baseline.pickup.p99Ms)],
          [
            "history pruned meanwhile",
            `${pruned.prunedDuring} rows (${pruned.historyLeft} left; a pass ${pruned.pruningAtEnd ? "still ran" : "no longer ran"} at the end)`,
          ],
        ],
      ],
    }),
  );
  console.log(`Run on ${machine}.`);
  return pruned.pruningAtEnd ? 0 : 1;
}

const program = new Command()
  .name("npm run bench:retention --")
  .exitOverride()
  .showHelpAfterError()
  .description(
    "drain rate and pickup latency with an idle table, then while a large finished history is pruned",
  )
  .addOption(
    new Option("--history <n>", "finished jobs due for deletion")
      .default(1_000_000)
      .argParser(positiveInteger("--history")),
  )
  .addOption(
    new Option("--jobs <n>", "noop jobs drained").default(20_000).argParser(positiveInteger("--jobs")),
  )
  .addOption(
    new Option("--workers <n>", "worker processes").default(2).argParser(positiveInteger("--workers")),
  )
  .addOption(
    new Option("--concurrency <n>", "handlers per worker process")
      .default(50)
      .argParser(positiveInteger("--concurrency")),
  )
  .addOption(
    new Option("--pickup-samples <n>", "jobs of the pickup-latency phase")
      .default(200)
      .argParser(positiveInteger("--pickup-samples")),
  )
  .addOption(
    new Option("--pickup-interval <ms>", "milliseconds between pickup jobs")
      .default(20)
      .argParser(positiveNumber("--pickup-interval")),
  )
  .addOption(
    new Option("--settle <seconds>", "wait after the workers start (and pruning begins) before measuring")
      .default(3)
      .argParser(positiveNumber("--settle")),
  )
  .option("--no-progress", "no progress bars")
  .addHelpText("after", SYSTEM_HELP)
  .action((flags: RetentionFlags) => exitWith(() => run(flags)));

runBenchProgram(program);
