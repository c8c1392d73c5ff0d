/**
 * `npm run bench:compare`: taskqueue side by side with pg-boss, graphile-worker and BullMQ, on the
 * same PostgreSQL, machine, Node version and job count: one system after another, or, with
 * `--interleave`, round-robin pass by pass (schedule.ts). Each system runs in its own child process
 * (run-system.ts, driven by children.ts) so that no library's global state touches another's
 * figures, and so that a system that hangs can be killed without losing the others. `--baseline
 * DIR` adds the taskqueue row on another build's library.
 *
 * Prints one table, taskqueue's ratios to the best peer, to sql-floor and to the baseline, the
 * paired per-round ratios of an interleaved run, and writes bench/results/compare-latest.json
 * (+ .meta.json). See bench/compare/README.md.
 */
import { mkdirSync, readFileSync, writeFileSync } from "node:fs";
import { cpus, loadavg, totalmem } from "node:os";
import { dirname, join, relative } from "node:path";
import { fileURLToPath } from "node:url";
import { Redis } from "ioredis";
import { processAlive as alive } from "../../src/db/embedded.js";
import { buildRevision } from "./build-info.js";
import { emptyReport, SystemChild } from "./children.js";
import { HelpRequested, parseOptions, type RunOptions, USAGE } from "./cli.js";
import { Admin, describe, within } from "./harness.js";
import { commandLine, nodeCommand, shareableArgv } from "./invocation.js";
import { type PairedRatio, pairedRatios, pairedTable } from "./paired.js";
import { interleavedSchedule, sequentialSchedule } from "./schedule.js";
import { CPU_COLUMNS, evaluateTargets, figuresTable, notesText, ratioTable, targetsTable } from "./table.js";
import { BASELINE, type SystemName, type SystemReport } from "./types.js";

const HERE = dirname(fileURLToPath(import.meta.url)); // dist/bench/compare
const ROOT = join(HERE, "..", "..", "..");
const SCHEMA_PREFIX = "bench_cmp_";

const log = (message: string) =>
  process.stderr.write(`[bench:compare ${new Date().toISOString().slice(11, 19)}] ${message}\n`);

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

const loadNow = () => Number(loadavg()[0]?.toFixed(2));

/**
 * Runs the schedule: forks each system's child at its first command, sends the commands in order,
 * and drops the run's leftover schemas (and Redis keys) once no child is left alive. Returns the
 * reports in `options.only` order and, interleaved, the 1-minute load average at each round's start.
 */
async function runSchedule(
  options: RunOptions,
  runId: string,
  admin: Admin,
): Promise<{ reports: SystemReport[]; roundLoads: number[] }> {
  const steps = options.interleave
    ? interleavedSchedule(options.only, options.repeat)
    : sequentialSchedule(options.only, options.repeat);
  const children = new Map<SystemName, SystemChild>();
  const roundLoads: number[] = [];
  let redisCleaned = false;
  if (options.interleave) log(`== setup and warm-up of ${options.only.join(", ")}`);
  for (const { system, command } of steps) {
    if (options.interleave && command.kind === "pass" && command.round > roundLoads.length) {
      roundLoads.push(loadNow());
      log(`== round ${command.round}/${command.of}, load average ${roundLoads.at(-1)}`);
    }
    let child = children.get(system);
    if (!child) {
      if (!options.interleave) log(`== ${system}`);
      child = new SystemChild(system, options, runId, log);
      children.set(system, child);
    }
    if (!child.alive && command.kind !== "teardown") continue;
    await child.run(command);
    if (command.kind !== "teardown" && child.alive) continue;
    await child.exited;
    if ([...children.values()].some((c) => c.alive)) continue;
    const leftovers = await dropLeftovers(admin, runId).catch(() => []);
    if (leftovers.length > 0) log(`dropped leftover schemas: ${leftovers.join(", ")}`);
    if (children.has("bullmq-redis") && !redisCleaned) {
      redisCleaned = true;
      await redisHousekeeping(options.redisUrl, runId);
    }
  }
  const reports = options.only.map(
    (system) => children.get(system)?.finalReport() ?? emptyReport(system, "the system never started"),
  );
  return { reports, roundLoads };
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

  const ownRevision = buildRevision(ROOT);
  const baselineRevision = options.baseline ? buildRevision(options.baseline) : null;
  if (options.baseline)
    log(
      `${BASELINE}: the taskqueue row on the library of ${relative(process.cwd(), options.baseline) || "."} ` +
        `(${baselineRevision}); this build is ${ownRevision}` +
        (options.interleave ? "" : "; add --interleave for paired ratios"),
    );
  const { reports, roundLoads } = await runSchedule(options, runId, admin);
  await admin.end();

  const paired: PairedRatio[] = options.interleave
    ? [...pairedRatios(reports, "taskqueue"), ...pairedRatios(reports, "taskqueue-http")]
    : [];
  const pairedMedian = (ours: SystemName, against: SystemName, figure: string) =>
    paired.find((p) => p.ours === ours && p.against === against && p.figure === figure)?.median ?? null;
  const legend =
    "↑ higher is better, ↓ lower is better. n/a: not applicable to the system; FAILED: failed or timed out " +
    "(see notes); * value by construction, not measured (see notes).";
  const targets = evaluateTargets(reports, options.interleave ? pairedMedian : undefined);
  const ofRepeat = options.interleave ? `median of ${options.repeat} rounds` : `median of ${options.repeat}`;
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
    "CPU time per job, µs: the system's processes and the PostgreSQL backends serving them, over the timed " +
      "call (the drain: from the workers' start to their stop); other load on the machine does not inflate it " +
      "as it does the rates (bench/compare/README.md):",
    "",
    figuresTable(reports, CPU_COLUMNS, false),
    "",
    legend,
    `(a) bulk enqueue, batches of 1,000, ${ofRepeat} · (b) single enqueue of ${options.singleJobs.toLocaleString("en-US")} jobs, 50 in flight${options.interleave ? `, ${ofRepeat}` : ""} · ` +
      `(c) drain of pre-enqueued noop jobs (2.5 s rest after the enqueue, untimed), ${ofRepeat} · (d) idle pickup after 20 warm-up jobs, ` +
      `${options.pickupSamples} samples every ${options.intervalMs} ms${options.interleave ? `, p50 and p99 each the ${ofRepeat}` : ""} · ` +
      `(e) median pickup (${options.claimSamples} samples) ` +
      `with ${options.finishedRows.toLocaleString("en-US")} finished jobs ÷ mean of the empty-table medians before and after. ` +
      "Before each measured phase every table of the system is VACUUM ANALYZEd (autovacuum's work; it may be off on the server)." +
      (options.interleave
        ? ` Interleaved: round r ran pass r of (a), (b), (c), (d) of every system, phase by phase, the systems' order reversed every other round; 1-minute load average at each round's start: ${roundLoads.join(", ")}.`
        : ""),
    "",
    "taskqueue ÷ best PostgreSQL peer (among pg-boss, pg-boss-batch, graphile-worker, bullmq; for the drain, " +
      "among the per-job ones: pg-boss, graphile-worker, bullmq), ÷ sql-floor" +
      (reports.some((r) => r.row.system === "bullmq-redis") ? ", ÷ bullmq-redis (Redis reference)" : "") +
      (options.baseline
        ? `, ÷ ${BASELINE} (the library of ${baselineRevision}; this build: ${ownRevision})`
        : "") +
      `; ratios of the figures above${options.interleave ? " (the paired ratios below are the ones to read)" : ""}:`,
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
    ...(options.interleave
      ? [
          "",
          `Paired ratios: taskqueue ÷ each system, round by round (${options.repeat} rounds; in a round the systems' ` +
            "passes of a figure ran back to back): the median of the rounds' ratios; the interval that holds the " +
            "true median ratio with the probability in brackets if rounds are independent (order statistics, " +
            "the sign test's: min–max up to 8 rounds); min–max and the spread (the larger distance of min or max " +
            "from the median). Reading: better or worse when the interval is on one side of 1.00, else not resolved:",
          "",
          pairedTable(paired.filter((p) => p.ours === "taskqueue")),
        ]
      : []),
    "",
    `Targets of the performance issue (ratios within this run${options.interleave ? ": medians of the paired ratios" : ""}; a missed one says by how much):`,
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
    command: commandLine(shareableArgv(argv)),
    node_command: nodeCommand(shareableArgv(argv)),
    build: ownRevision,
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
    single_jobs: options.singleJobs,
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
      interleave: options.interleave,
      baseline: options.baseline
        ? { dir: shareableArgv(["--baseline", options.baseline])[1], revision: baselineRevision }
        : null,
    },
    ...(options.interleave ? { round_load_average_1m: roundLoads } : {}),
    versions: {
      "pg-boss": packageVersion("pg-boss"),
      "graphile-worker": packageVersion("graphile-worker"),
      bullmq: packageVersion("bullmq"),
      ioredis: packageVersion("ioredis"),
      pg: packageVersion("pg"),
    },
    targets,
    ...(options.interleave
      ? {
          paired: paired.map((p) => ({
            ours: p.ours,
            against: p.against,
            figure: p.figure,
            rounds: p.n,
            median: p.median === null ? null : Number(p.median.toFixed(4)),
            min: p.min === null ? null : Number(p.min.toFixed(4)),
            max: p.max === null ? null : Number(p.max.toFixed(4)),
            per_round: p.perRound.map((v) => (v === null ? null : Number(v.toFixed(4)))),
            interval: p.interval && {
              low: Number(p.interval.low.toFixed(4)),
              high: Number(p.interval.high.toFixed(4)),
              coverage: Number(p.interval.coverage.toFixed(4)),
            },
          })),
        }
      : {}),
    systems: Object.fromEntries(
      reports.map((r) => [
        r.row.system,
        {
          backend: r.backend,
          settings: r.row.settings,
          missing: r.missing,
          bulk_runs_per_s: r.bulkRuns,
          drain_runs_per_s: r.drainRuns,
          rounds: r.rounds,
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
