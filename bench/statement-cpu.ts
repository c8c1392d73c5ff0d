#!/usr/bin/env node
/**
 * `npm run bench:statement-cpu -- --baseline DIR [--rounds N] [--batch N]`: the database's CPU
 * per job of the drain's two statements, the claim and the completion, this build against another
 * one (`DIR`, a checkout built with `npm run build`), round by round in one process. Each build
 * gets a schema of its own, migrated by that build, and a lock and a write connection with that
 * build's settings; a round inserts `--batch` jobs (one plain INSERT, not measured), claims them
 * with the build's one-type claim and completes them with its completion, as a worker's lock
 * session does. The CPU of each statement is its backend's time on a CPU
 * (`/proc/<pid>/schedstat`), so the server must run on this machine: unlike a wall-clock time,
 * it does not grow when other work takes the CPUs away. Prints the median µs per job of each
 * statement and build (the first 3 rounds are warm-up) and the median of the paired ratios.
 *
 * Figures, not a test; docs/benchmarks.md has runs and what they showed. Uses DATABASE_URL
 * (default postgres://postgres@127.0.0.1:5432/test); the schemas are dropped at the end.
 */
import { readFileSync } from "node:fs";
import { resolve } from "node:path";
import { pathToFileURL } from "node:url";
import { Command, Option } from "commander";
import pg from "pg";
import { positiveInteger } from "../src/cli/flags.js";
import { exitWith, runBenchProgram } from "./shared/cli.js";
import { fixed } from "./shared/stats.js";

interface Flags {
  baseline: string;
  rounds: number;
  batch: number;
}

/** A build's statement as its `claimJobs`/`writeDone` return it. */
interface Built {
  name: string;
  text: string;
}

/** One build under measurement: its schema, connections and statements, and its figures. */
interface Build {
  label: string;
  schema: string;
  lock: pg.Client;
  write: pg.Client;
  lockPid: number;
  writePid: number;
  claim: Built;
  done: Built;
  /** Advisory-lock class of its claims (each build its own: locks are server-wide). */
  lockClass: number;
  claimUs: number[];
  doneUs: number[];
  unlock: string;
}

const WARM_UP_ROUNDS = 3;

/** Nanoseconds backend `pid` has spent on a CPU. */
const cpuNs = (pid: number): number => Number(readFileSync(`/proc/${pid}/schedstat`, "utf8").split(" ")[0]);

const median = (values: readonly number[]): number => {
  const sorted = [...values].sort((a, b) => a - b);
  return sorted[Math.floor(sorted.length / 2)] ?? Number.NaN;
};

/** Sets up `dir`'s build (default this one) on a fresh schema. */
async function openBuild(label: string, dir: string | null, url: string, lockClass: number): Promise<Build> {
  const base = dir ? pathToFileURL(`${resolve(dir)}/dist/src/`) : new URL("../src/", import.meta.url);
  const library = (await import(new URL("index.js", base).href)) as {
    TaskQueue: new (options: object) => { migrate(): Promise<void>; close(): Promise<void> };
  };
  const claimSql = (await import(new URL("queue/sql/claim.js", base).href)) as {
    claimJobs: (schema: string, oneType?: boolean) => Built;
    lockConnectionSettings: string;
    lockSessionSettings: string;
    writeConnectionSettings?: string;
  };
  const finishSql = (await import(new URL("queue/sql/finish.js", base).href)) as {
    writeDone: (schema: string) => Built;
  };
  const schema = `bench_stmt_${process.pid}_${label}`;
  const queue = new library.TaskQueue({ databaseUrl: url, schema });
  await queue.migrate();
  await queue.close();
  const lock = new pg.Client({ connectionString: url });
  const write = new pg.Client({ connectionString: url });
  await Promise.all([lock.connect(), write.connect()]);
  await lock.query(claimSql.lockConnectionSettings);
  await write.query(claimSql.writeConnectionSettings ?? claimSql.lockSessionSettings);
  const pid = async (c: pg.Client) =>
    (await c.query<{ pid: number }>("SELECT pg_backend_pid() AS pid")).rows[0]?.pid ?? -1;
  return {
    label,
    schema,
    lock,
    write,
    lockPid: await pid(lock),
    writePid: await pid(write),
    claim: claimSql.claimJobs(schema, true),
    done: finishSql.writeDone(schema),
    lockClass,
    claimUs: [],
    doneUs: [],
    unlock: "{}",
  };
}

/** One round of `build`: insert, claim (timed), complete (timed). */
async function round(build: Build, admin: pg.Client, batch: number): Promise<void> {
  await admin.query(
    `INSERT INTO "${build.schema}".jobs (type, payload) SELECT 'noop', jsonb_build_object('i', g) FROM generate_series(1, $1::int) g`,
    [batch],
  );
  let before = cpuNs(build.lockPid);
  const { rows } = await build.lock.query<{ id: number; attempt: number; ctid?: string }>({
    ...build.claim,
    values: [["noop"], batch, build.lockClass, "w", build.unlock],
  });
  build.claimUs.push((cpuNs(build.lockPid) - before) / 1000 / rows.length);
  if (rows.length !== batch) throw new Error(`${build.label}: claimed ${rows.length} of ${batch} jobs`);
  const ids = `{${rows.map((r) => r.id).join(",")}}`;
  const values: unknown[] = [
    ids,
    `{${rows.map((r) => r.attempt).join(",")}}`,
    `[${rows.map(() => "null").join(",")}]`,
    `{${rows.map(() => 1).join(",")}}`,
    "w",
  ];
  // A build whose completion reads rows at their claimed versions takes them as $6.
  if (build.done.text.includes("$6::tid[]")) values.push(`{${rows.map((r) => `"${r.ctid}"`).join(",")}}`);
  before = cpuNs(build.writePid);
  await build.write.query({ ...build.done, values });
  build.doneUs.push((cpuNs(build.writePid) - before) / 1000 / rows.length);
  build.unlock = ids; // the next claim carries this batch's unlock, as a worker's does
}

async function main(flags: Flags): Promise<number> {
  const url = process.env.DATABASE_URL ?? "postgres://postgres@127.0.0.1:5432/test";
  const admin = new pg.Client({ connectionString: url });
  await admin.connect();
  const builds: Build[] = [];
  try {
    builds.push(await openBuild("this", null, url, 7_701));
    builds.push(await openBuild("baseline", flags.baseline, url, 7_702));
    for (let r = 0; r < flags.rounds; r++) {
      for (const build of r % 2 === 0 ? builds : [...builds].reverse())
        await round(build, admin, flags.batch);
      if (r % 10 === 9)
        for (const build of builds) await admin.query(`VACUUM ANALYZE "${build.schema}".jobs`);
    }
    const measured = (values: number[]) => values.slice(WARM_UP_ROUNDS);
    console.log(
      `${flags.rounds} rounds of ${flags.batch} jobs (first ${WARM_UP_ROUNDS} not counted); backend CPU µs per job, median`,
    );
    console.log("build       claim   completion");
    for (const b of builds)
      console.log(
        `${b.label.padEnd(10)} ${fixed(median(measured(b.claimUs)), 2).padStart(6)} ${fixed(median(measured(b.doneUs)), 2).padStart(12)}`,
      );
    const [own, other] = builds as [Build, Build];
    const paired = (a: number[], b: number[]) =>
      median(measured(a).map((v, i) => v / (measured(b)[i] ?? Number.NaN)));
    console.log(
      `this ÷ baseline, median of the paired rounds: claim ${fixed(paired(own.claimUs, other.claimUs), 3)}×, completion ${fixed(paired(own.doneUs, other.doneUs), 3)}×`,
    );
    return 0;
  } finally {
    for (const b of builds) {
      await Promise.all([b.lock.end(), b.write.end()]);
      await admin.query(`DROP SCHEMA IF EXISTS "${b.schema}" CASCADE`);
    }
    await admin.end();
  }
}

const program = new Command("bench:statement-cpu")
  .description("The database's CPU per job of the claim and the completion, this build against another")
  .requiredOption("--baseline <dir>", "another checkout of taskqueue, built (npm run build)")
  .addOption(
    new Option("--rounds <n>", "rounds (each build once a round)")
      .argParser(positiveInteger("--rounds"))
      .default(40),
  )
  .addOption(
    new Option("--batch <n>", "jobs per claim and completion")
      .argParser(positiveInteger("--batch"))
      .default(1000),
  )
  .exitOverride()
  .action(async (flags: Flags) => exitWith(() => main(flags)));

runBenchProgram(program);
