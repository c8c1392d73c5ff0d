/** Command-line flags of `npm run bench:compare -- [flags]`. */

import { dirname, join, resolve } from "node:path";
import { fileURLToPath } from "node:url";
import { parseArgs } from "node:util";
import { positiveInteger } from "../../src/cli/flags.js";
import { SYSTEMS, type SystemName } from "./types.js";

/** bench/results of the repository (this file runs from dist/bench/compare/). */
const DEFAULT_OUT_DIR = join(dirname(fileURLToPath(import.meta.url)), "..", "..", "..", "bench", "results");

export interface RunOptions {
  /** Jobs per enqueue and drain measurement. */
  jobs: number;
  /** Systems to run, in SYSTEMS order. */
  only: SystemName[];
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
  --jobs N              jobs per enqueue and drain measurement (default 20000)
  --only a,b,...        systems to run (default all): ${SYSTEMS.join(", ")}
  --pickup-samples N    idle pickup samples, one every 20 ms (default 200)
  --skip-1m             skip (e), the claim latency with 1,000,000 finished jobs
  --repeat N            bulk enqueue and drain runs, medians reported (default 1)
  --phase-timeout S     bound of each phase in seconds (default 120)
  --out DIR             where compare-latest.json and .meta.json go (default bench/results)
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
      only: { type: "string" },
      "pickup-samples": { type: "string" },
      "skip-1m": { type: "boolean", default: false },
      repeat: { type: "string" },
      "phase-timeout": { type: "string" },
      out: { type: "string" },
      help: { type: "boolean", short: "h", default: false },
    },
    strict: true,
    allowPositionals: false,
  });
  if (values.help) throw new HelpRequested();
  let only: SystemName[] = [...SYSTEMS];
  if (values.only !== undefined) {
    const names = values.only
      .split(",")
      .map((s) => s.trim())
      .filter(Boolean);
    const unknown = names.filter((n) => !(SYSTEMS as readonly string[]).includes(n));
    if (unknown.length > 0 || names.length === 0)
      throw new Error(
        `--only: unknown system ${unknown.join(", ") || "(none)"}; known: ${SYSTEMS.join(", ")}`,
      );
    only = SYSTEMS.filter((s) => names.includes(s));
  }
  return {
    jobs: positiveInt("jobs", values.jobs, 20_000),
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
    databaseUrl: env.DATABASE_URL || "postgres://postgres@127.0.0.1:5432/test",
    redisUrl: env.REDIS_URL || "redis://127.0.0.1:6379",
  };
}

export class HelpRequested extends Error {}
