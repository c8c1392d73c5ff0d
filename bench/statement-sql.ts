#!/usr/bin/env node
/**
 * `node dist/bench/statement-sql.js --schema S --batches N [--part insert|claim|drain] [--build DIR]`:
 * prints an SQL script for PostgreSQL's single-user mode (`postgres --single`, one statement a
 * line) that runs the hot path's statements of a build on schema S (already migrated by that
 * build): N inserts of 1,000 jobs (`insert`), or, after 20,000 pending jobs are inserted, N
 * one-type claims of 1,000 jobs (`claim`), each then completed (`drain`, the default). The claim
 * and completion are the build's own statements (`DIR/dist/src/queue/sql/claim.js` and
 * `finish.js`; default this build), prepared and run with the lock session's settings.
 *
 * Run under `valgrind --tool=callgrind` twice (N = 4 and N = 14), the difference divided by 10 is
 * the backend's instruction count per 1,000 jobs: exact and repeatable, where timings on a shared
 * machine vary by 10–20 % from run to run. docs/benchmarks.md ("What a statement costs") has the
 * commands and the figures.
 */
import { resolve } from "node:path";
import { pathToFileURL } from "node:url";
import { Command, Option } from "commander";
import { positiveInteger } from "../src/cli/flags.js";

/** A built statement as `claimJobs` and `writeDone` return it (any build). */
interface BuiltStatement {
  text: string;
}

interface Flags {
  schema: string;
  batches: number;
  part: "insert" | "claim" | "drain";
  build?: string;
}

/** Jobs per insert, claim and completion. */
const BATCH = 1000;
/** Pending jobs inserted before the claims (enough for 20 batches). */
const PENDING = 20_000;
/** A statement's text on one line (single-user mode ends a statement at a newline). */
const oneLine = (text: string): string => text.replace(/\s+/g, " ").trim();

/** `{a,b,c}`: an array literal of numbers. */
const arrayLiteral = (values: readonly number[]): string => `'{${values.join(",")}}'`;

/** The build's claim and completion statements for `schema`, and its lock connection's settings. */
async function statementsOf(build: string | undefined, schema: string) {
  const base = build
    ? pathToFileURL(`${resolve(build)}/dist/src/queue/sql/`)
    : new URL("../src/queue/sql/", import.meta.url);
  const claim = (await import(new URL("claim.js", base).href)) as {
    claimJobs: (schema: string, oneType?: boolean) => BuiltStatement;
    lockConnectionSettings: string;
  };
  const finish = (await import(new URL("finish.js", base).href)) as {
    writeDone: (schema: string) => BuiltStatement;
  };
  return {
    claim: claim.claimJobs(schema, true),
    done: finish.writeDone(schema),
    // One statement a line, as single-user mode reads them.
    settings: claim.lockConnectionSettings.split(";").map((s) => `${s.trim()};`),
  };
}

/**
 * The completion's row versions argument, for a build whose `writeDone` takes them ($6): a script
 * written before its claims run knows none, so its completions find every job by id (the path a
 * completion takes for rows that moved since their claim; a worker's drain reads them by version).
 */
const rowVersions = (done: BuiltStatement): string => (done.text.includes("$6::tid[]") ? ", '{}'" : "");

/** The script's lines (see the top of this file). */
async function statementScript(flags: Flags): Promise<string[]> {
  const table = `"${flags.schema}".jobs`;
  const insert = `INSERT INTO ${table} (type, payload, priority, max_retries, run_at) SELECT 'noop', jsonb_build_object('i', g), 5, 3, now() - interval '1 minute' FROM generate_series(1, $1::int) AS g`;
  const { claim, done, settings } = await statementsOf(flags.build, flags.schema);
  const lines = [
    ...settings,
    `TRUNCATE ${table} RESTART IDENTITY;`,
    `PREPARE insert_jobs(int) AS ${insert};`,
  ];
  if (flags.part === "insert") {
    for (let b = 0; b < flags.batches; b++) lines.push(`EXECUTE insert_jobs(${BATCH});`);
    return lines;
  }
  lines.push(
    `EXECUTE insert_jobs(${PENDING});`,
    `VACUUM ANALYZE ${table};`,
    `PREPARE claim_jobs AS ${oneLine(claim.text)};`,
    `PREPARE write_done AS ${oneLine(done.text)};`,
  );
  // Ids restart at 1 and every job has the same priority and run time: claim b takes ids
  // b·1000+1 … (b+1)·1000, and carries the unlock of the batch before it, as a worker's claim does.
  for (let b = 0; b < flags.batches; b++) {
    const ids = Array.from({ length: BATCH }, (_, k) => b * BATCH + k + 1);
    const unlock = b > 0 ? ids.map((id) => id - BATCH) : [];
    lines.push(`EXECUTE claim_jobs('{noop}', ${BATCH}, 77, 'w', ${arrayLiteral(unlock)});`);
    if (flags.part === "drain")
      lines.push(
        `EXECUTE write_done(${arrayLiteral(ids)}, ${arrayLiteral(ids.map(() => 0))}, '${JSON.stringify(ids.map(() => null))}', ${arrayLiteral(ids.map(() => 1))}, 'w'${rowVersions(done)});`,
      );
  }
  return lines;
}

const program = new Command("statement-sql")
  .description("Print a single-user-mode SQL script of the hot path's statements (see docs/benchmarks.md)")
  .requiredOption("--schema <name>", "a schema the build migrated")
  .addOption(
    new Option("--batches <n>", "batches of 1,000 jobs").argParser(positiveInteger("--batches")).default(14),
  )
  .addOption(
    new Option("--part <part>", "statements to run").choices(["insert", "claim", "drain"]).default("drain"),
  )
  .option("--build <dir>", "another build's checkout (its dist/ is used); default this build");

program.parse();
process.stdout.write(`${(await statementScript(program.opts<Flags>())).join("\n")}\n`);
