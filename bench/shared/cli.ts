/**
 * What the benchmark commands (`npm run bench:math`, `npm run bench:load`) share: the help text on
 * the system under test, and running a commander program with the exit codes of the `taskqueue`
 * CLI (0 success, 1 failure, 2 bad configuration or usage).
 */
import { type Command, CommanderError, Option } from "commander";
import { writableFile } from "../../src/cli/flags.js";
import { ConfigError, EmbeddedPostgresUnavailableError } from "../../src/errors.js";

/** Help text on what a benchmark runs against. */
export const SYSTEM_HELP = `
System under test: DATABASE_URL if set, else an embedded PostgreSQL with throw-away data in
.taskqueue/bench-pg; a fresh schema bench_<name>_<random> (dropped at the end); the HTTP API in this
process on a free port; worker processes \`taskqueue worker\` (run from dist/src/cli/main.js).
Progress bars go to stderr when it is a terminal; the table goes to stdout.`;

/**
 * Runs a benchmark action and exits with its code once everything is closed. Exiting explicitly
 * keeps a stray keep-alive socket or timer from holding the process open after the report.
 */
export async function exitWith(run: () => Promise<number>): Promise<void> {
  const code = await run();
  process.exit(code);
}

/**
 * Parses the command line with `program` (built with `exitOverride()`) and runs its action; usage
 * and configuration errors exit 2 with their message, any other error exits 1.
 */
export function runBenchProgram(program: Command): void {
  program.parseAsync(process.argv).catch((error: unknown) => {
    // commander has printed its message (or the help, which exits 0).
    if (error instanceof CommanderError) process.exit(error.exitCode === 0 ? 0 : 2);
    if (error instanceof ConfigError || error instanceof EmbeddedPostgresUnavailableError) {
      console.error(`${program.name()}: configuration error: ${error.message}`);
      process.exit(2);
    }
    console.error(`${program.name()}:`, error instanceof Error ? error.message : error);
    process.exit(1);
  });
}

/** Adds the flags every benchmark's report takes: `--json <file>` and `--no-progress`. */
export function withReportOptions(program: Command): Command {
  return program
    .addOption(
      new Option("--json <file>", "also write the figures (and machine info) as JSON to this file").argParser(
        writableFile("--json"),
      ),
    )
    .option("--no-progress", "no progress bars");
}
