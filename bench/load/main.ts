#!/usr/bin/env node
/**
 * `npm run bench:load -- [flags]`: noop throughput and latency (docs/benchmarks.md keeps its
 * figures). Run from a checkout; not part of the published package.
 */
import { Command, Option } from "commander";
import { positiveInteger, positiveNumber } from "../../src/cli/flags.js";
import { MAX_WORKER_COUNT } from "../../src/config.js";
import { exitWith, runBenchProgram, SYSTEM_HELP, withReportOptions } from "../shared/cli.js";
import { runLoadBench } from "./load.js";

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

const program = withReportOptions(new Command())
  .name("npm run bench:load --")
  .exitOverride()
  .showHelpAfterError()
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

runBenchProgram(program);
