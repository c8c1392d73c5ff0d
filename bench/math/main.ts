#!/usr/bin/env node
/**
 * `npm run bench:math -- [flags]`: the seed's verified math benchmark (docs/benchmarks.md keeps
 * its figures). Run from a checkout; not part of the published package.
 */
import { Command, Option } from "commander";
import { nonNegativeInteger, positiveInteger, positiveNumber } from "../../src/cli/flags.js";
import { MAX_WORKER_COUNT } from "../../src/config.js";
import { exitWith, runBenchProgram, SYSTEM_HELP, withReportOptions } from "../shared/cli.js";
import { runMathBench } from "./math.js";
import { DEFAULT_MATH_SEED, describeMathRanges } from "./payloads.js";

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

const program = withReportOptions(new Command())
  .name("npm run bench:math --")
  .exitOverride()
  .showHelpAfterError()
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

runBenchProgram(program);
