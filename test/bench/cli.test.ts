/**
 * `npm run bench:math` and `npm run bench:load` end to end: their compiled entry points (what the
 * npm scripts run) with `taskqueue worker` processes against the test server, small runs, figures
 * read back from the --json file. And the `taskqueue` CLI of the package has no `bench` command.
 */
import assert from "node:assert/strict";
import { spawn } from "node:child_process";
import { mkdtemp, readFile, rm } from "node:fs/promises";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { after, before, test } from "node:test";
import type pg from "pg";
import { createPool } from "../../src/db/pool.js";
import { DATABASE_URL } from "../helpers/db.js";
import { CLI } from "../helpers/process.js";

let dir: string;
let pool: pg.Pool;

before(async () => {
  dir = await mkdtemp(join(tmpdir(), "taskqueue-bench-"));
  pool = createPool({ connectionString: DATABASE_URL, max: 1 });
});

after(async () => {
  await rm(dir, { recursive: true, force: true });
  await pool.end();
});

/** The entry point `npm run bench:<name>` runs, compiled by `npm run build:bench` (as `npm test` does). */
const BENCH_MAIN: Record<string, string> = {
  math: "dist/bench/math/main.js",
  load: "dist/bench/load/main.js",
};

/**
 * Runs a command to completion; resolves with its exit code and output. `["bench", name, ...flags]`
 * runs the benchmark `name` as its npm script does; anything else runs the `taskqueue` CLI.
 */
function runCli(args: string[]): Promise<{ code: number | null; stdout: string; stderr: string }> {
  const main = args[0] === "bench" && args[1] ? BENCH_MAIN[args[1]] : undefined;
  const command = main ? [main, ...args.slice(2)] : [CLI, ...args];
  const child = spawn(process.execPath, command, {
    env: { ...process.env, DATABASE_URL },
    stdio: ["ignore", "pipe", "pipe"],
  });
  let stdout = "";
  let stderr = "";
  child.stdout.on("data", (chunk: Buffer) => {
    stdout += chunk.toString("utf8");
  });
  child.stderr.on("data", (chunk: Buffer) => {
    stderr += chunk.toString("utf8");
  });
  return new Promise((resolve) => child.on("close", (code) => resolve({ code, stdout, stderr })));
}

async function schemaExists(schema: string): Promise<boolean> {
  const { rows } = await pool.query("SELECT 1 FROM pg_namespace WHERE nspname = $1", [schema]);
  return rows.length > 0;
}

test("bench math: 30 jobs, every result verified correct, exit 0, schema dropped", {
  timeout: 60_000,
}, async () => {
  const jsonFile = join(dir, "math.json");
  const run = await runCli([
    "bench",
    "math",
    "--jobs",
    "30",
    "--workers",
    "1",
    "--no-progress",
    "--json",
    jsonFile,
  ]);
  assert.equal(run.code, 0, `stdout: ${run.stdout}\nstderr: ${run.stderr}`);
  assert.match(run.stdout, /Math Benchmark — Verified Results/);
  assert.match(run.stdout, /✓ ALL RESULTS MATHEMATICALLY CORRECT/);
  const record = JSON.parse(await readFile(jsonFile, "utf8")) as {
    schema: string;
    results: {
      submitted: number;
      done: number;
      correct: number;
      incorrect: number;
      missing: number;
      allCorrect: boolean;
    };
    throughputJobsPerSecond: number;
    latencyMs: { p50Ms: number; maxMs: number };
    perType: Record<string, { total: number; correct: number }>;
    machine: { node: string; cpuCount: number; postgresVersion: string };
  };
  assert.deepEqual(record.results, {
    submitted: 30,
    done: 30,
    dead: 0,
    timedOut: 0,
    correct: 30,
    incorrect: 0,
    missing: 0,
    accuracyPercent: 100,
    allCorrect: true,
  });
  for (const type of ["is_prime", "collatz", "sha256_chain"])
    assert.deepEqual(record.perType[type], { ...record.perType[type], total: 10, correct: 10 });
  assert.ok(record.throughputJobsPerSecond > 0);
  assert.ok(record.latencyMs.p50Ms > 0 && record.latencyMs.maxMs >= record.latencyMs.p50Ms);
  assert.equal(record.machine.node, process.version);
  assert.ok(record.machine.cpuCount >= 1 && record.machine.postgresVersion.length > 0);
  assert.equal(await schemaExists(record.schema), false);
});

test("bench load: 300 jobs, positive enqueue, drain and pickup figures", { timeout: 60_000 }, async () => {
  const jsonFile = join(dir, "load.json");
  const run = await runCli([
    "bench",
    "load",
    "--jobs",
    "300",
    "--workers",
    "1",
    "--pickup-samples",
    "20",
    "--no-progress",
    "--json",
    jsonFile,
  ]);
  assert.equal(run.code, 0, `stdout: ${run.stdout}\nstderr: ${run.stderr}`);
  assert.match(run.stdout, /Load Benchmark — noop jobs/);
  const record = JSON.parse(await readFile(jsonFile, "utf8")) as {
    schema: string;
    enqueue: Record<"http" | "addJob" | "addJobs", { jobs: number; jobsPerSecond: number }>;
    drain: { jobs: number; done: number; jobsPerSecond: number };
    pickup: { samples: number; claimed: number; latencyMs: { p50Ms: number; p99Ms: number; maxMs: number } };
  };
  assert.deepEqual(
    Object.values(record.enqueue).map((e) => e.jobs),
    [150, 75, 75],
  );
  for (const figures of Object.values(record.enqueue)) assert.ok(figures.jobsPerSecond > 0);
  assert.equal(record.drain.done, 300);
  assert.ok(record.drain.jobsPerSecond > 0);
  assert.equal(record.pickup.claimed, 20);
  assert.ok(
    record.pickup.latencyMs.p50Ms >= 0 && record.pickup.latencyMs.maxMs >= record.pickup.latencyMs.p99Ms,
  );
  assert.equal(await schemaExists(record.schema), false);
});

test("the taskqueue CLI has no bench command; the bench scripts show their own help", async () => {
  const bench = await runCli(["bench"]);
  assert.equal(bench.code, 2, `stdout: ${bench.stdout}\nstderr: ${bench.stderr}`);
  assert.match(bench.stderr, /unknown command .bench./);
  const help = await runCli(["--help"]);
  assert.equal(help.code, 0);
  assert.doesNotMatch(help.stdout, /\bbench\b/);
  for (const name of ["math", "load"]) {
    const run = await runCli(["bench", name, "--help"]);
    assert.equal(run.code, 0, run.stderr);
    assert.match(run.stdout, new RegExp(`Usage: npm run bench:${name} -- \\[options\\]`));
    assert.match(run.stdout, /--jobs <n>/);
  }
  const bad = await runCli(["bench", "math", "--jobs", "0"]);
  assert.equal(bad.code, 2, bad.stderr);
});
