/** Command-line flags of `npm run bench:compare -- [flags]`. */

import { existsSync } from "node:fs";
import { dirname, join, resolve } from "node:path";
import { fileURLToPath } from "node:url";
import { parseArgs } from "node:util";
import { positiveInteger } from "../../src/cli/flags.js";
import { BASELINE_ENTRY } from "./build-info.js";
import { BASELINE, SELECTABLE, SYSTEMS, type SystemName } from "./types.js";

/** bench/results of the repository (this file runs from dist/bench/compare/). */
const DEFAULT_OUT_DIR = join(dirname(fileURLToPath(import.meta.url)), "..", "..", "..", "bench", "results");

export interface RunOptions {
  /** Jobs per bulk enqueue and drain measurement. */
  jobs: number;
  /**
   * Jobs per single-enqueue measurement (b): `--single-jobs`, default `jobs`. A smaller count lets
   * a run drain many jobs (a longer, steadier pass) without peers' one-call-per-job enqueue
   * taking minutes per round.
   */
  singleJobs: number;
  /** Systems to run, in SYSTEMS order (with `taskqueue-baseline` when `baseline` is set). */
  only: SystemName[];
  /**
   * `--baseline DIR`, absolute: a checkout of taskqueue built with `npm run build`, whose
   * `dist/src/index.js` the `taskqueue-baseline` row loads; null without the flag.
   */
  baseline: string | null;
  /**
   * `--interleave`: passes run round-robin across systems (round r runs every system's pass r,
   * phase by phase), and every figure but (e) is measured once per round; paired ratios printed.
   */
  interleave: boolean;
  /** Samples of the idle pickup measurement (d). */
  pickupSamples: number;
  /** Samples of each claim-latency pickup measurement (e). */
  claimSamples: number;
  /** Finished jobs seeded for (e). */
  finishedRows: number;
  /** Skip measurement (e). */
  skip1m: boolean;
  /** Drain runs; the median is reported. */
  repeat: number;
  /** Single enqueues in flight. */
  inFlight: number;
  /** Time between pickup enqueues, ms. */
  intervalMs: number;
  /** Bound of every phase, ms. */
  phaseTimeoutMs: number;
  /** Directory the result files are written to. */
  outDir: string;
  databaseUrl: string;
  redisUrl: string;
}

export const USAGE = `usage: npm run bench:compare -- [flags]
  --jobs N              jobs per bulk enqueue and drain measurement (default 20000)
  --single-jobs N       jobs per single enqueue measurement (default: --jobs)
  --only a,b,...        systems to run (default all): ${SELECTABLE.join(", ")}
  --pickup-samples N    idle pickup samples, one every 20 ms (default 200)
  --skip-1m             skip (e), the claim latency with 1,000,000 finished jobs
  --repeat N            bulk enqueue and drain runs, medians reported (default 1); rounds with --interleave
  --interleave          run the passes round-robin across systems, each round within a short window:
                        round r runs pass r of (a) bulk, (b) single, (c) drain and (d) pickup of every
                        system; prints medians of the rounds and taskqueue ÷ each system per round
                        (paired ratios: their median, an interval for it, min–max)
  --baseline DIR        add the row ${BASELINE}: the taskqueue row on DIR/dist/src/index.js, another
                        checkout of taskqueue built with npm run build (an older commit, say); the
                        ratios then show taskqueue ÷ ${BASELINE}
  --phase-timeout S     bound of each phase in seconds (default 120)
  --out DIR             where compare-latest.json and .meta.json go (default bench/results)
relative paths (--out, --baseline) start from the current directory: the project root under npm run
environment: DATABASE_URL (default postgres://postgres@127.0.0.1:5432/test),
             REDIS_URL (default redis://127.0.0.1:6379, bullmq-redis only)`;

/** A positive integer flag, read as the taskqueue command's flags are (no `8e3`, `0x10` or `+2`). */
function positiveInt(flag: string, value: string | undefined, fallback: number): number {
  if (value === undefined) return fallback;
  try {
    return positiveInteger(`--${flag}`)(value);
  } catch (error) {
    throw new Error(`${(error as Error).message}, got ${value}`);
  }
}

/** Parses argv (without node and script). @throws {Error} naming the bad flag. */
export function parseOptions(argv: string[], env: NodeJS.ProcessEnv = process.env): RunOptions {
  const { values } = parseArgs({
    args: argv,
    options: {
      jobs: { type: "string" },
      "single-jobs": { type: "string" },
      only: { type: "string" },
      "pickup-samples": { type: "string" },
      "skip-1m": { type: "boolean", default: false },
      repeat: { type: "string" },
      "phase-timeout": { type: "string" },
      out: { type: "string" },
      baseline: { type: "string" },
      interleave: { type: "boolean", default: false },
      help: { type: "boolean", short: "h", default: false },
    },
    strict: true,
    allowPositionals: false,
  });
  if (values.help) throw new HelpRequested();
  let only: SystemName[] = [...SELECTABLE];
  if (values.only !== undefined) {
    const names = values.only
      .split(",")
      .map((s) => s.trim())
      .filter(Boolean);
    if (names.includes(BASELINE))
      throw new Error(`--only: ${BASELINE} is not chosen with --only; --baseline DIR adds it`);
    const unknown = names.filter((n) => !(SELECTABLE as readonly string[]).includes(n));
    if (unknown.length > 0 || names.length === 0)
      throw new Error(
        `--only: unknown system ${unknown.join(", ") || "(none)"}; known: ${SELECTABLE.join(", ")}`,
      );
    only = SELECTABLE.filter((s) => names.includes(s));
  }
  const baseline = values.baseline === undefined ? null : baselineDir(resolve(values.baseline));
  if (baseline !== null) {
    if (!only.includes("taskqueue"))
      throw new Error("--baseline: the taskqueue row is compared with it; add taskqueue to --only");
    only = SYSTEMS.filter((s) => s === BASELINE || only.includes(s));
  }
  const jobs = positiveInt("jobs", values.jobs, 20_000);
  return {
    jobs,
    singleJobs: positiveInt("single-jobs", values["single-jobs"], jobs),
    only,
    pickupSamples: positiveInt("pickup-samples", values["pickup-samples"], 200),
    claimSamples: 50,
    finishedRows: 1_000_000,
    skip1m: values["skip-1m"] ?? false,
    repeat: positiveInt("repeat", values.repeat, 1),
    inFlight: 50,
    intervalMs: 20,
    phaseTimeoutMs: positiveInt("phase-timeout", values["phase-timeout"], 120) * 1000,
    outDir: values.out === undefined ? DEFAULT_OUT_DIR : resolve(values.out),
    baseline,
    interleave: values.interleave ?? false,
    databaseUrl: env.DATABASE_URL || "postgres://postgres@127.0.0.1:5432/test",
    redisUrl: env.REDIS_URL || "redis://127.0.0.1:6379",
  };
}

/**
 * `dir` if it holds a built taskqueue (`dist/src/index.js`).
 * @throws {Error} naming --baseline when it does not.
 */
function baselineDir(dir: string): string {
  if (!existsSync(join(dir, BASELINE_ENTRY)))
    throw new Error(
      `--baseline: ${join(dir, BASELINE_ENTRY)} not found; build that checkout first (npm ci && npm run build)`,
    );
  return dir;
}

export class HelpRequested extends Error {}
