/**
 * `npm run bench:compare`: taskqueue side by side with pg-boss, graphile-worker and BullMQ, on the
 * same PostgreSQL, machine, Node version and job count, one system after another. Each system runs
 * in its own child process (run-system.ts) so that no library's global state touches another's
 * figures, and so that a system that hangs can be killed without losing the others.
 *
 * Prints one table, taskqueue's ratios to the best peer and to sql-floor, and writes
 * bench/results/compare-latest.json (+ .meta.json). See bench/compare/README.md.
 */
import { type ChildProcess, fork } from "node:child_process";
import { mkdirSync, readFileSync, writeFileSync } from "node:fs";
import { cpus, loadavg, totalmem } from "node:os";
import { dirname, join, relative } from "node:path";
import { fileURLToPath } from "node:url";
import { Redis } from "ioredis";
import { processAlive as alive } from "../../src/db/embedded.js";
import { HelpRequested, parseOptions, type RunOptions, USAGE } from "./cli.js";
import { Admin, describe, within } from "./harness.js";
import type { ChildMessage } from "./run-system.js";
import { evaluateTargets, figuresTable, notesText, ratioTable, targetsTable } from "./table.js";
import { blankReport, type ResultRow, type SystemName, type SystemReport } from "./types.js";

const HERE = dirname(fileURLToPath(import.meta.url)); // dist/bench/compare
const ROOT = join(HERE, "..", "..", "..");
const SCHEMA_PREFIX = "bench_cmp_";

const log = (message: string) =>
  process.stderr.write(`[bench:compare ${new Date().toISOString().slice(11, 19)}] ${message}\n`);

/** A report for a system whose child produced nothing. */
function emptyReport(system: SystemName, reason: string): SystemReport {
  const report = blankReport(system, "", "?");
  for (const key of Object.keys(report.row) as (keyof ResultRow)[])
    if (key !== "system" && key !== "settings") report.missing[key] = { kind: "failed", reason };
  report.notes.push(reason);
  return report;
}

/** Runs one system in a child process; kills it if it outlives every phase's bound. */
function runChild(system: SystemName, options: RunOptions, runId: string): Promise<SystemReport> {
  const budgetMs = (9 + 2 * options.repeat) * options.phaseTimeoutMs + 120_000;
  return new Promise((resolve) => {
    let latest: SystemReport | null = null;
    let finished = false;
    const child: ChildProcess = fork(join(HERE, "run-system.js"), [system, JSON.stringify(options), runId], {
      stdio: ["ignore", 2, 2, "ipc"],
    });
    const killer = setTimeout(() => {
      log(`${system}: still running after ${budgetMs / 1000} s; killing it`);
      child.kill("SIGKILL");
    }, budgetMs);
    child.on("message", (message: ChildMessage) => {
      latest = message.report;
      if (message.type === "done") finished = true;
    });
    child.on("exit", (code, signal) => {
      clearTimeout(killer);
      const report = latest ?? emptyReport(system, `child exited (${signal ?? code}) before reporting`);
      if (!finished) report.notes.push(`run cut short: child exited with ${signal ?? code}`);
      resolve(report);
    });
  });
}

/** Drops schemas of this run (leftovers of a killed child) and of earlier runs whose process is gone. */
async function dropLeftovers(admin: Admin, runId: string | null): Promise<string[]> {
  const { rows } = await admin.query<{ nspname: string }>(
    "SELECT nspname FROM pg_namespace WHERE nspname LIKE $1 ORDER BY 1",
    [`${SCHEMA_PREFIX}%`],
  );
  const dropped: string[] = [];
  for (const { nspname } of rows) {
    const pid = Number(/^bench_cmp_(\d+)_/.exec(nspname)?.[1]);
    const ours = runId !== null && nspname.startsWith(`${SCHEMA_PREFIX}${runId}_`);
    if (!ours && (!Number.isInteger(pid) || alive(pid))) continue;
    await admin.dropSchema(nspname).then(
      () => dropped.push(nspname),
      (error: unknown) => log(`could not drop ${nspname}: ${describe(error)}`),
    );
  }
  return dropped;
}

/** Deletes Redis keys of this run (and of dead runs); returns the Redis version, or null. */
async function redisHousekeeping(url: string, runId: string): Promise<string | null> {
  const redis = new Redis(url, { lazyConnect: true, maxRetriesPerRequest: 1, retryStrategy: () => null });
  redis.on("error", () => undefined);
  try {
    await within(redis.connect(), 3000, "redis connect");
    const info = await redis.info("server");
    let cursor = "0";
    do {
      const [next, keys] = await redis.scan(cursor, "MATCH", `${SCHEMA_PREFIX}*`, "COUNT", 1000);
      cursor = next;
      const stale = keys.filter((k) => {
        const pid = Number(/^bench_cmp_(\d+):/.exec(k)?.[1]);
        return k.startsWith(`${SCHEMA_PREFIX}${runId}:`) || (Number.isInteger(pid) && !alive(pid));
      });
      if (stale.length > 0) await redis.del(...stale);
    } while (cursor !== "0");
    return /redis_version:(\S+)/.exec(info)?.[1] ?? "unknown";
  } catch {
    return null;
  } finally {
    redis.disconnect();
  }
}

function packageVersion(name: string): string {
  try {
    return (
      JSON.parse(readFileSync(join(ROOT, "node_modules", name, "package.json"), "utf8")) as {
        version: string;
      }
    ).version;
  } catch {
    return "not installed";
  }
}

/** The command line of process `pid` (Linux /proc; words, whether NUL- or space-separated) and its parent. */
function procInfo(pid: number): { words: string[]; ppid: number } | null {
  try {
    const words = readFileSync(`/proc/${pid}/cmdline`, "utf8")
      .split(/[\0 ]+/)
      .filter(Boolean);
    const stat = readFileSync(`/proc/${pid}/stat`, "utf8");
    const ppid = Number(stat.slice(stat.lastIndexOf(")") + 2).split(" ")[1]);
    return { words, ppid };
  } catch {
    return null;
  }
}

/**
 * How this run was invoked, as a person would retype it: `npm run bench:compare -- <flags>` when an
 * ancestor process is that npm script (npx hides it from the environment), else the node command.
 */
function commandLine(argv: string[]): string {
  let pid = process.ppid;
  for (let depth = 0; depth < 8 && pid > 1; depth++) {
    const info = procInfo(pid);
    if (!info) break;
    const at = info.words.indexOf("bench:compare");
    if (at > 0 && ["run", "run-script"].includes(info.words[at - 1] ?? ""))
      return `npm run bench:compare${argv.length > 0 ? ` -- ${argv.join(" ")}` : ""}`;
    pid = info.ppid;
  }
  return nodeCommand(argv);
}

function nodeCommand(argv: string[]): string {
  return ["node", relative(process.cwd(), fileURLToPath(import.meta.url)), ...argv].join(" ");
}

async function main(): Promise<number> {
  const argv = process.argv.slice(2);
  let options: RunOptions;
  try {
    options = parseOptions(argv);
  } catch (error) {
    if (error instanceof HelpRequested) {
      process.stdout.write(`${USAGE}\n`);
      return 0;
    }
    process.stderr.write(`${describe(error)}\n${USAGE}\n`);
    return 2;
  }
  const runId = String(process.pid);
  const started = new Date();
  const loadAtStart = loadavg().map((l) => Number(l.toFixed(2)));
  const admin = new Admin(options.databaseUrl);
  await admin.connect();
  const pg = await admin.query<{ version: string; server_version: string }>(
    "SELECT version(), current_setting('server_version') AS server_version",
  );
  const settings = await admin.query<{ name: string; setting: string; unit: string | null }>(
    `SELECT name, setting, unit FROM pg_settings
     WHERE name IN ('max_connections', 'shared_buffers', 'synchronous_commit', 'max_locks_per_transaction',
                    'work_mem', 'fsync', 'autovacuum') ORDER BY name`,
  );
  const dropped = await dropLeftovers(admin, null);
  if (dropped.length > 0) log(`dropped schemas left by earlier runs: ${dropped.join(", ")}`);
  const redisVersion = await redisHousekeeping(options.redisUrl, runId);
  const cpuList = cpus();
  log(
    `node ${process.version}, PostgreSQL ${pg.rows[0]?.server_version}, Redis ${redisVersion ?? "unreachable"}, ` +
      `${cpuList.length} × ${cpuList[0]?.model ?? "?"}; ${options.jobs} jobs; systems: ${options.only.join(", ")}`,
  );

  const reports: SystemReport[] = [];
  for (const system of options.only) {
    log(`== ${system}`);
    const report = await runChild(system, options, runId);
    reports.push(report);
    const leftovers = await dropLeftovers(admin, runId).catch(() => []);
    if (leftovers.length > 0) log(`dropped leftover schemas: ${leftovers.join(", ")}`);
    if (system === "bullmq-redis") await redisHousekeeping(options.redisUrl, runId);
  }
  await admin.end();

  const legend =
    "↑ higher is better, ↓ lower is better. n/a: not applicable to the system; FAILED: failed or timed out " +
    "(see notes); * value by construction, not measured (see notes).";
  const targets = evaluateTargets(reports);
  const output = [
    "",
    `taskqueue vs peers — ${options.jobs.toLocaleString("en-US")} jobs, node ${process.version}, ` +
      `PostgreSQL ${pg.rows[0]?.server_version}, ${cpuList.length} × ${cpuList[0]?.model ?? "?"}, ${started.toISOString()}, ` +
      `load average ${loadAtStart[0]} at start, ${loadavg()[0]?.toFixed(2)} at end`,
    "",
    `PostgreSQL server settings: ${settings.rows.map((r) => `${r.name} ${r.unit === "8kB" ? `${(Number(r.setting) * 8) / 1024} MB` : r.unit ? `${r.setting} ${r.unit}` : r.setting}`).join(", ")}`,
    "",
    figuresTable(reports),
    "",
    legend,
    `(a) bulk enqueue, batches of 1,000, median of ${options.repeat} · (b) single enqueue, 50 in flight · (c) drain of pre-enqueued noop jobs ` +
      `(2.5 s rest after the enqueue, untimed), median of ${options.repeat} · (d) idle pickup after 20 warm-up jobs, ` +
      `${options.pickupSamples} samples every ${options.intervalMs} ms · (e) median pickup (${options.claimSamples} samples) ` +
      `with ${options.finishedRows.toLocaleString("en-US")} finished jobs ÷ mean of the empty-table medians before and after. ` +
      "Before each measured phase every table of the system is VACUUM ANALYZEd (autovacuum's work; it may be off on the server).",
    "",
    "taskqueue ÷ best PostgreSQL peer (among pg-boss, pg-boss-batch, graphile-worker, bullmq; for the drain, " +
      "among the per-job ones: pg-boss, graphile-worker, bullmq), ÷ sql-floor" +
      (reports.some((r) => r.row.system === "bullmq-redis") ? ", ÷ bullmq-redis (Redis reference)" : "") +
      ":",
    "",
    ratioTable(reports),
    ...(reports.some((r) => r.row.system === "taskqueue-2-sessions")
      ? [
          "",
          "The same for two lock sessions per worker process:",
          "",
          ratioTable(reports, "taskqueue-2-sessions"),
        ]
      : []),
    "",
    "Targets of the performance issue (ratios within this run; a missed one says by how much):",
    "",
    targetsTable(targets),
    "",
    "notes:",
    notesText(reports),
    "",
  ].join("\n");
  process.stdout.write(output);

  const RESULTS = options.outDir;
  mkdirSync(RESULTS, { recursive: true });
  writeFileSync(
    join(RESULTS, "compare-latest.json"),
    `${JSON.stringify(
      reports.map((r) => r.row),
      null,
      2,
    )}\n`,
  );
  const meta = {
    command: commandLine(argv),
    node_command: nodeCommand(argv),
    date: started.toISOString(),
    finished: new Date().toISOString(),
    node: process.version,
    postgresql: pg.rows[0]?.version,
    postgresql_settings: Object.fromEntries(
      settings.rows.map((s) => [s.name, s.unit ? `${s.setting} ${s.unit}` : s.setting]),
    ),
    redis: redisVersion,
    cpu: { model: cpuList[0]?.model ?? null, count: cpuList.length },
    memory_gib: Number((totalmem() / 2 ** 30).toFixed(1)),
    load_average_1_5_15: { start: loadAtStart, end: loadavg().map((l) => Number(l.toFixed(2))) },
    jobs: options.jobs,
    options: {
      only: options.only,
      repeat: options.repeat,
      pickup_samples: options.pickupSamples,
      pickup_interval_ms: options.intervalMs,
      claim_samples: options.claimSamples,
      finished_rows: options.finishedRows,
      skip_1m: options.skip1m,
      single_in_flight: options.inFlight,
      bulk_batch: 1000,
      phase_timeout_s: options.phaseTimeoutMs / 1000,
    },
    versions: {
      "pg-boss": packageVersion("pg-boss"),
      "graphile-worker": packageVersion("graphile-worker"),
      bullmq: packageVersion("bullmq"),
      ioredis: packageVersion("ioredis"),
      pg: packageVersion("pg"),
    },
    targets,
    systems: Object.fromEntries(
      reports.map((r) => [
        r.row.system,
        {
          backend: r.backend,
          settings: r.row.settings,
          missing: r.missing,
          bulk_runs_per_s: r.bulkRuns,
          drain_runs_per_s: r.drainRuns,
          claim: r.claim,
          notes: r.notes,
        },
      ]),
    ),
  };
  writeFileSync(join(RESULTS, "compare-latest.meta.json"), `${JSON.stringify(meta, null, 2)}\n`);
  log(`wrote ${relative(process.cwd(), join(RESULTS, "compare-latest.json"))} and compare-latest.meta.json`);
  const failed = reports.flatMap((r) =>
    Object.entries(r.missing)
      .filter(([, missing]) => missing?.kind === "failed")
      .map(([figure]) => `${r.row.system} ${figure}`),
  );
  if (failed.length > 0) {
    log(`failed: ${failed.join(", ")} (see the notes); exit code 1`);
    return 1;
  }
  return 0;
}

main().then(
  (code) => {
    process.exitCode = code;
    // Everything is closed by now; if a library left a handle open, do not hang on it.
    setTimeout(() => {
      log("a handle was still open 5 s after the end; exiting anyway");
      process.exit(code);
    }, 5000).unref();
  },
  (error: unknown) => {
    process.stderr.write(`[bench:compare] fatal: ${describe(error)}\n`);
    process.exit(1);
  },
);
