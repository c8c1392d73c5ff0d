/**
 * bench:compare's runner, against the test server: a system's passes recorded round by round (a
 * scripted system, so that the figures are known), and a small interleaved run end to end with the
 * taskqueue row against `--baseline .` (this very build: an A/A run), through the compiled entry
 * point the npm script runs.
 */
import assert from "node:assert/strict";
import { spawn } from "node:child_process";
import { mkdtemp, readFile, rm } from "node:fs/promises";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { after, before, describe, it } from "node:test";
import type pg from "pg";
import { parseOptions, type RunOptions } from "../../bench/compare/cli.js";
import { Admin, median } from "../../bench/compare/harness.js";
import { SystemRun } from "../../bench/compare/system-run.js";
import type { Phase, PickupResult, SystemAdapter } from "../../bench/compare/types.js";
import { createPool } from "../../src/db/pool.js";
import { DATABASE_URL } from "../helpers/db.js";

/**
 * A system whose drain takes the scripted milliseconds and whose pickup returns the scripted
 * latencies, pass after pass; a script entry "fail" makes that pass throw.
 */
class ScriptedSystem implements SystemAdapter {
  readonly system = "bullmq" as const;
  readonly settings = "scripted";
  readonly backend = "none";
  readonly unsupported: Partial<Record<Phase, string>> = {};
  readonly notes: string[] = [];
  calls = 0;

  constructor(
    private readonly drains: (number | "fail")[],
    private readonly pickups: (number[] | "fail")[] = [],
    private readonly failSetup = false,
  ) {}

  async setup(): Promise<void> {
    this.calls++;
    if (this.failSetup) throw new Error("no such server");
  }
  async enqueueBulk(): Promise<void> {
    this.calls++;
  }
  async enqueueSingle(): Promise<void> {
    this.calls++;
  }
  async drain(): Promise<number> {
    this.calls++;
    const next = this.drains.shift();
    if (next === undefined || next === "fail") throw new Error("scripted failure");
    return next;
  }
  async pickup(): Promise<PickupResult> {
    this.calls++;
    const next = this.pickups.shift();
    if (next === undefined || next === "fail") throw new Error("scripted failure");
    return { latencies: next, missing: 0 };
  }
  async seedFinished(): Promise<void> {}
  async clear(): Promise<void> {}
  async abort(): Promise<void> {}
  async teardown(): Promise<void> {}
}

let admin: Admin;
let options: RunOptions;
const quiet = () => undefined;

before(async () => {
  admin = new Admin(DATABASE_URL);
  await admin.connect();
  options = { ...parseOptions(["--jobs", "1000", "--phase-timeout", "30"], { DATABASE_URL }), skip1m: true };
});
after(() => admin.end());

describe("a system's passes, round by round", () => {
  it("records each round's figure, null for a failed pass, and the row is the median of the others", async () => {
    const adapter = new ScriptedSystem([100, "fail", 50], [[1, 2, 3, 4], [2, 4, 6, 8], "fail"]);
    adapter.unsupported.enqueueSingle = "n/a — scripted";
    const run = new SystemRun(adapter, options, admin, `test${process.pid}`, quiet);
    await run.execute({ kind: "setup" });
    for (let r = 1; r <= 3; r++) {
      await run.execute({ kind: "pass", phase: "enqueueSingle", round: r, of: 3 });
      await run.execute({ kind: "pass", phase: "drain", round: r, of: 3 });
      await run.execute({ kind: "pass", phase: "pickup", round: r, of: 3 });
    }
    const { report } = run;
    assert.deepEqual(
      report.rounds.map((f) => f.drain_per_s),
      [10_000, null, 20_000],
    );
    assert.deepEqual(report.drainRuns, [10_000, 20_000]);
    assert.equal(report.row.drain_per_s, 15_000);
    assert.equal(report.missing.drain_per_s, undefined);
    assert.deepEqual(
      report.rounds.map((f) => [f.pickup_p50_ms, f.pickup_p99_ms]),
      [
        [2.5, 3.97],
        [5, 7.94],
        [null, null],
      ],
    );
    assert.equal(report.row.pickup_p50_ms, median([2.5, 5]));
    assert.equal(report.row.pickup_p99_ms, Number((median([3.97, 7.94]) as number).toFixed(2)));
    assert.deepEqual(report.missing.enqueue_single_per_s, { kind: "n/a", reason: "n/a — scripted" });
    assert.ok(report.rounds.every((f) => !("enqueue_single_per_s" in f)));
    assert.ok(report.notes.some((n) => /\(c\) drain 2\/3: scripted failure/.test(n)));
  });

  it("a figure whose every pass failed is FAILED; after a failed setup no command reaches the system", async () => {
    const failing = new SystemRun(new ScriptedSystem(["fail"]), options, admin, `test${process.pid}`, quiet);
    await failing.execute({ kind: "setup" });
    await failing.execute({ kind: "pass", phase: "drain", round: 1, of: 1 });
    assert.equal(failing.report.row.drain_per_s, null);
    assert.deepEqual(failing.report.missing.drain_per_s, { kind: "failed", reason: "failed or timed out" });

    const adapter = new ScriptedSystem([100], [], true);
    const down = new SystemRun(adapter, options, admin, `test${process.pid}`, quiet);
    await down.execute({ kind: "setup" });
    await down.execute({ kind: "warm-up", phase: "enqueueBulk" });
    await down.execute({ kind: "pass", phase: "drain", round: 1, of: 1 });
    await down.execute({ kind: "claim1m" });
    assert.equal(adapter.calls, 1);
    assert.deepEqual(down.report.missing.drain_per_s, { kind: "failed", reason: "setup failed" });
    assert.deepEqual(down.report.missing.claim_latency_ratio_1m, { kind: "failed", reason: "setup failed" });
  });
});

describe("an interleaved run against --baseline . (A/A)", () => {
  let dir: string;
  let pool: pg.Pool;
  before(async () => {
    dir = await mkdtemp(join(tmpdir(), "taskqueue-bench-compare-"));
    pool = createPool({ connectionString: DATABASE_URL, max: 1 });
  });
  after(async () => {
    await rm(dir, { recursive: true, force: true });
    await pool.end();
  });

  it("measures taskqueue and taskqueue-baseline in each round, prints and saves the paired ratios, drops its schemas", {
    timeout: 240_000,
  }, async () => {
    const args = ["--only", "taskqueue", "--baseline", ".", "--interleave", "--repeat", "2", "--jobs", "200"];
    args.push("--pickup-samples", "3", "--skip-1m", "--phase-timeout", "60", "--out", dir);
    const child = spawn(process.execPath, ["dist/bench/compare/run.js", ...args], {
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
    const code = await new Promise<number | null>((resolve) => child.on("close", resolve));
    assert.equal(code, 0, `stdout: ${stdout}\nstderr: ${stderr.slice(-3000)}`);
    assert.match(stderr, /== round 1\/2, load average [\d.]+/);
    assert.match(stderr, /== round 2\/2, load average [\d.]+/);
    assert.match(stdout, /÷ taskqueue-baseline/);
    assert.match(stdout, /CPU time per job, µs/);
    assert.match(stdout, /drain CPU µs\/job ↓ +taskqueue-baseline +[\d.]+×/);
    assert.match(stdout, /Paired ratios: taskqueue ÷ each system, round by round \(2 rounds/);
    assert.match(stdout, /drain\/s ↑ +taskqueue-baseline +[\d.]+×/);

    const rows = JSON.parse(await readFile(join(dir, "compare-latest.json"), "utf8")) as {
      system: string;
      drain_per_s: number | null;
      settings: string;
    }[];
    assert.deepEqual(
      rows.map((r) => r.system),
      ["taskqueue", "taskqueue-baseline"],
    );
    assert.match(rows[1]?.settings ?? "", /the --baseline build's library/);
    const meta = JSON.parse(await readFile(join(dir, "compare-latest.meta.json"), "utf8")) as {
      options: { interleave: boolean; baseline: { dir: string; revision: string } | null };
      round_load_average_1m: number[];
      systems: Record<string, { rounds: Record<string, number | null>[] }>;
      paired: { ours: string; against: string; figure: string; median: number; per_round: number[] }[];
    };
    assert.equal(meta.options.interleave, true);
    assert.equal(meta.options.baseline?.dir, ".");
    assert.equal(meta.round_load_average_1m.length, 2);
    for (const system of ["taskqueue", "taskqueue-baseline"]) {
      const rounds = meta.systems[system]?.rounds ?? [];
      assert.equal(rounds.length, 2, system);
      const figures = ["enqueue_bulk_per_s", "enqueue_single_per_s", "drain_per_s", "pickup_p50_ms"];
      figures.push("enqueue_bulk_cpu_us_per_job", "enqueue_single_cpu_us_per_job", "drain_cpu_us_per_job");
      for (const figure of figures)
        assert.ok(
          rounds.every((r) => typeof r[figure] === "number" && (r[figure] as number) > 0),
          figure,
        );
      const row = rows.find((r) => r.system === system);
      assert.equal(
        row?.drain_per_s,
        Math.round(median(rounds.map((r) => r.drain_per_s as number)) as number),
      );
    }
    const drain = meta.paired.find((p) => p.against === "taskqueue-baseline" && p.figure === "drain_per_s");
    const [a, b] = (["taskqueue", "taskqueue-baseline"] as const).map(
      (s) => meta.systems[s]?.rounds.map((r) => r.drain_per_s as number) ?? [],
    );
    assert.deepEqual(
      drain?.per_round,
      a?.map((v, i) => Number((v / (b?.[i] as number)).toFixed(4))),
    );
    const { rows: left } = await pool.query("SELECT nspname FROM pg_namespace WHERE nspname LIKE $1", [
      `bench\\_cmp\\_${child.pid}\\_%`,
    ]);
    assert.deepEqual(left, []);
  });
});
