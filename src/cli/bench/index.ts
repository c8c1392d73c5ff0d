/** `taskqueue bench ...`: benchmarks that print figures (docs/benchmarks.md keeps them). */
import { type Command, Option } from "commander";
import { MAX_WORKER_COUNT } from "../../config.js";
import { nonNegativeInteger, positiveInteger, positiveNumber, writableFile } from "../flags.js";
import { runLoadBench } from "./load.js";
import { runMathBench } from "./math.js";
import { DEFAULT_MATH_SEED, describeMathRanges } from "./payloads.js";

const SYSTEM_HELP = `
System under test: DATABASE_URL if set, else an embedded PostgreSQL with throw-away data in
.taskqueue/bench-pg; a fresh schema bench_<name>_<random> (dropped at the end); the HTTP API in this
process on a free port; worker processes \`taskqueue worker\` (run from dist/src/cli/main.js).
Progress bars go to stderr when it is a terminal; the table goes to stdout.`;

interface MathFlags {
  jobs: number;
  workers: number;
  concurrency: number;
  timeout: number;
  httpInFlight: number;
  seed: number;
  json?: string;
  progress: boolean;
}

interface LoadFlags {
  jobs: number;
  concurrency: number;
  workers: number;
  prefetch?: number;
  httpInFlight: number;
  pickupSamples: number;
  pickupInterval: number;
  timeout: number;
  json?: string;
  progress: boolean;
}

/**
 * Runs a benchmark action and exits with its code once everything is closed. Exiting explicitly
 * keeps a stray keep-alive socket or timer from holding the process open after the report.
 */
async function exitWith(run: () => Promise<number>): Promise<void> {
  const code = await run();
  process.exit(code);
}

/** Adds the `bench` command group (math, load) to the CLI. */
export function registerBenchCommands(program: Command): void {
  const bench = program
    .command("bench")
    .description("benchmarks: math (verified results), load (noop throughput and latency)");

  bench
    .command("math")
    .description(
      "submit is_prime, collatz and sha256_chain jobs over HTTP, re-derive every result with independent " +
        "code, and print throughput and latency; exit code 1 on any incorrect or missing result",
    )
    .addOption(
      new Option("--jobs <n>", "jobs to submit, a third of each type")
        .default(600)
        .argParser(positiveInteger("--jobs")),
    )
    .addOption(
      new Option("--workers <n>", "worker processes").default(4).argParser(positiveInteger("--workers")),
    )
    .addOption(
      new Option("--concurrency <n>", "handlers run at once per worker process")
        .default(4)
        .argParser(positiveInteger("--concurrency", MAX_WORKER_COUNT)),
    )
    .addOption(
      new Option("--timeout <seconds>", "after the last submission, wait this long for every job to finish")
        .default(120)
        .argParser(positiveNumber("--timeout")),
    )
    .addOption(
      new Option("--http-in-flight <n>", "POST /jobs requests in flight while submitting")
        .default(50)
        .argParser(positiveInteger("--http-in-flight")),
    )
    .addOption(
      new Option("--seed <n>", "PRNG seed of the payloads")
        .default(DEFAULT_MATH_SEED)
        .argParser(nonNegativeInteger("--seed")),
    )
    .addOption(
      new Option("--json <file>", "also write the figures (and machine info) as JSON to this file").argParser(
        writableFile("--json"),
      ),
    )
    .option("--no-progress", "no progress bars")
    .addHelpText(
      "after",
      `
Payloads (deterministic: a mulberry32 PRNG seeded with --seed; job i has type i mod 3):
${describeMathRanges()
  .map((line) => `  ${line}`)
  .join("\n")}
Latency per job = completed_at − created_at (database clock). Throughput = completed jobs /
(last completed_at − first created_at).
${SYSTEM_HELP}`,
    )
    .action((flags: MathFlags) =>
      exitWith(() =>
        runMathBench({
          jobs: flags.jobs,
          workers: flags.workers,
          concurrency: flags.concurrency,
          timeoutSeconds: flags.timeout,
          httpInFlight: flags.httpInFlight,
          seed: flags.seed,
          jsonFile: flags.json,
          progress: flags.progress,
        }),
      ),
    );

  bench
    .command("load")
    .description(
      "noop jobs: enqueue rate (HTTP, addJob, addJobs) with workers stopped, drain rate once they start, " +
        "and pickup latency of idle workers",
    )
    .addOption(
      new Option("--jobs <n>", "N: jobs to enqueue and drain")
        .default(10_000)
        .argParser(positiveInteger("--jobs")),
    )
    .addOption(
      new Option("--concurrency <n>", "handlers run at once per worker process")
        .default(50)
        .argParser(positiveInteger("--concurrency", MAX_WORKER_COUNT)),
    )
    .addOption(
      new Option("--workers <n>", "worker processes").default(2).argParser(positiveInteger("--workers")),
    )
    .addOption(
      new Option(
        "--prefetch <n>",
        "jobs a worker process holds (WORKER_PREFETCH; default: its concurrency)",
      ).argParser(positiveInteger("--prefetch")),
    )
    .addOption(
      new Option("--http-in-flight <n>", "POST /jobs requests in flight in phase 1")
        .default(50)
        .argParser(positiveInteger("--http-in-flight")),
    )
    .addOption(
      new Option("--pickup-samples <n>", "jobs of the pickup-latency phase")
        .default(200)
        .argParser(positiveInteger("--pickup-samples")),
    )
    .addOption(
      new Option("--pickup-interval <ms>", "milliseconds between pickup-latency jobs")
        .default(20)
        .argParser(positiveNumber("--pickup-interval")),
    )
    .addOption(
      new Option("--timeout <seconds>", "give up waiting for a phase's jobs after this")
        .default(300)
        .argParser(positiveNumber("--timeout")),
    )
    .addOption(
      new Option("--json <file>", "also write the figures (and machine info) as JSON to this file").argParser(
        writableFile("--json"),
      ),
    )
    .option("--no-progress", "no progress bars")
    .addHelpText(
      "after",
      `
Phase 1 enqueues N/2 jobs over HTTP, N/4 with TaskQueue.addJob (50 in flight) and N/4 with
TaskQueue.addJobs (batches of 1,000), all due an hour ahead, before any worker runs. Phase 2 starts
the workers, makes the N jobs due in one statement, and times first claimed_at → last completed_at.
Phase 3 enqueues one job every --pickup-interval ms to idle workers: claimed_at − created_at.
${SYSTEM_HELP}`,
    )
    .action((flags: LoadFlags) =>
      exitWith(() =>
        runLoadBench({
          jobs: flags.jobs,
          concurrency: flags.concurrency,
          workers: flags.workers,
          prefetch: flags.prefetch,
          httpInFlight: flags.httpInFlight,
          pickupSamples: flags.pickupSamples,
          pickupIntervalMs: flags.pickupInterval,
          timeoutSeconds: flags.timeout,
          jsonFile: flags.json,
          progress: flags.progress,
        }),
      ),
    );
}
