#!/usr/bin/env node
/**
 * The `taskqueue` command. Configuration comes from environment variables (DESIGN.md §9); flags
 * override them. Exit codes: 0 success, 1 failure, 2 bad configuration or usage.
 */
import { readFileSync } from "node:fs";
import { Command, CommanderError, Option } from "commander";
import {
  API_ONLY_OPTIONS,
  configFromEnv,
  environmentVariables,
  type TaskQueueOptions,
  withSecretFiles,
} from "../config.js";
import { createPool } from "../db/pool.js";
import { ConfigError, EmbeddedPostgresUnavailableError } from "../errors.js";
import { TaskQueue } from "../index.js";
import { flushLogs } from "../log.js";
import { migrate } from "../queue/migrate.js";
import { tlsHint } from "./connection-errors.js";
import { registerDeadLetterCommands } from "./dead.js";
import { operatorDatabaseUrl } from "./embedded-state.js";
import { port, positiveInteger, positiveNumber } from "./flags.js";
import { registerHealthCommand } from "./health-command.js";
import { inspect } from "./inspect/watch.js";
import { registerScheduleCommands } from "./schedule.js";
import { runUntilSignal, startService } from "./service.js";
import { smoke } from "./smoke.js";
import { registerTypeCommands } from "./types.js";

/** Defaults that are not constants: what an unset variable falls back to. */
const DEFAULT_OF: Record<string, string> = {
  DATABASE_URL: "(none: npm start / taskqueue start run an embedded PostgreSQL)",
  WORKER_PREFETCH: "WORKER_COUNT",
  ALLOWED_JOB_TYPES: "(none: any type)",
  TASKQUEUE_API_TOKEN: "(none: the API binds to loopback only)",
};

function envHelp(): string {
  const rows = environmentVariables().map(
    (v) => `  ${v.env.padEnd(28)} ${v.default === undefined ? (DEFAULT_OF[v.env] ?? "") : String(v.default)}`,
  );
  return `\nEnvironment (variable, default):\n${rows.join("\n")}\n\nDATABASE_URL_FILE and TASKQUEUE_API_TOKEN_FILE name files holding those two (secrets).\nTASKQUEUE_HEALTH_FILE (or --health-file): the file start, api and worker keep for \`taskqueue health\`.\n`;
}

/** The version in package.json (three levels above dist/src/cli/, in the repository and in a package). */
function packageVersion(): string {
  const text = readFileSync(new URL("../../../package.json", import.meta.url), "utf8");
  return (JSON.parse(text) as { version: string }).version;
}

const program = new Command()
  .name("taskqueue")
  .description("A background job queue that runs entirely on PostgreSQL.")
  .version(packageVersion())
  .showHelpAfterError()
  // Usage errors are thrown (and exit 2 below) instead of exiting 1 inside commander.
  .exitOverride()
  .addHelpText("after", envHelp());

function workerFlags(command: Command): Command {
  return command
    .addOption(
      new Option("-c, --concurrency <n>", "handlers run at once (overrides WORKER_COUNT)").argParser(
        positiveInteger("--concurrency"),
      ),
    )
    .addOption(
      new Option(
        "--lock-sessions <n>",
        "lock sessions per worker process, each claiming and writing its own batches (overrides WORKER_LOCK_SESSIONS)",
      ).argParser(positiveInteger("--lock-sessions")),
    )
    .addOption(
      new Option(
        "--metrics-port <n>",
        "serve this worker process's own metrics at GET /metrics on this port (overrides WORKER_METRICS_PORT; host: WORKER_METRICS_HOST)",
      ).argParser(port("--metrics-port")),
    )
    .option("--types <list>", "claim only these job types, comma-separated (default: every registered type)")
    .option(
      "--handlers <module>",
      "ES module whose default export registers handlers: (registry) => void, or {type: handler}",
    );
}

const HEALTH_FILE_HELP =
  "keep a health file here for `taskqueue health`: rewritten after each worker heartbeat, removed on stop (overrides TASKQUEUE_HEALTH_FILE)";

const INSECURE_HELP =
  "serve without TASKQUEUE_API_TOKEN on a non-loopback HOST (overrides TASKQUEUE_INSECURE_NO_AUTH); only behind something that authenticates";

/** The command-line flag that sets each option field a role command takes. */
const FLAG_OF_OPTION: Record<string, string> = {
  insecureNoAuth: "--insecure-no-auth",
  workerCount: "--concurrency",
  lockSessions: "--lock-sessions",
  port: "--port",
  workerMetricsPort: "--metrics-port",
};

interface RoleFlags {
  concurrency?: number;
  lockSessions?: number;
  types?: string;
  handlers?: string;
  port?: number;
  metricsPort?: number;
  migrate?: boolean;
  insecureNoAuth?: boolean;
  healthFile?: string;
}

async function runRole(flags: RoleFlags, roles: { api: boolean; worker: boolean; allowEmbedded: boolean }) {
  const overrides: TaskQueueOptions = {
    workerCount: flags.concurrency,
    lockSessions: flags.lockSessions,
    port: flags.port,
    insecureNoAuth: flags.insecureNoAuth ? true : undefined,
    workerMetricsPort: flags.metricsPort,
  };
  let config: ReturnType<typeof configFromEnv>;
  try {
    config = configFromEnv(process.env, overrides, roles.api ? [] : API_ONLY_OPTIONS);
  } catch (error) {
    // A bad value that came from a flag is named as the flag the user typed.
    if (!(error instanceof ConfigError)) throw error;
    const flag = FLAG_OF_OPTION[error.field];
    if (flag && overrides[error.field as keyof TaskQueueOptions] !== undefined)
      throw new ConfigError(flag, error.message.slice(error.field.length + 2));
    throw error;
  }
  const service = await startService({
    config,
    ...roles,
    migrate: flags.migrate,
    types: flags.types
      ?.split(",")
      .map((t) => t.trim())
      .filter(Boolean),
    handlersModule: flags.handlers,
    healthFile: flags.healthFile ?? (process.env.TASKQUEUE_HEALTH_FILE || undefined),
  });
  await runUntilSignal(service);
}

workerFlags(
  program
    .command("start")
    .description(
      "API and workers in one process; with no DATABASE_URL, on an embedded PostgreSQL kept in .taskqueue/",
    )
    .addOption(new Option("-p, --port <n>", "HTTP port (overrides PORT)").argParser(port("--port")))
    .option("--insecure-no-auth", INSECURE_HELP)
    .option("--no-migrate", "do not migrate at start")
    .option("--health-file <path>", HEALTH_FILE_HELP),
).action((flags: RoleFlags) => runRole(flags, { api: true, worker: true, allowEmbedded: true }));

program
  .command("api")
  .description("the REST API only (needs DATABASE_URL)")
  .addOption(new Option("-p, --port <n>", "HTTP port (overrides PORT)").argParser(port("--port")))
  .option("--insecure-no-auth", INSECURE_HELP)
  .option("--no-migrate", "do not migrate at start")
  .option("--health-file <path>", HEALTH_FILE_HELP)
  .action((flags: RoleFlags) => runRole(flags, { api: true, worker: false, allowEmbedded: false }));

workerFlags(
  program
    .command("worker")
    .description("a worker process: claims and runs jobs (needs DATABASE_URL); run as many as you like")
    .option("--no-migrate", "do not migrate at start")
    .option("--health-file <path>", HEALTH_FILE_HELP),
).action((flags: RoleFlags) => runRole(flags, { api: false, worker: true, allowEmbedded: false }));

program
  .command("migrate")
  .description(
    "create or upgrade the schema (DATABASE_URL, or the embedded database of a running npm start here); safe to run concurrently",
  )
  .action(async () => {
    const config = configFromEnv(process.env, {}, API_ONLY_OPTIONS);
    const pool = createPool({ connectionString: operatorDatabaseUrl(config.databaseUrl, "migrate"), max: 1 });
    try {
      const result = await migrate(pool, config);
      console.log(
        result.applied.length
          ? `schema ${config.schema}: applied ${result.applied.join(", ")}; now at version ${result.version}`
          : `schema ${config.schema}: up to date at version ${result.version}`,
      );
    } finally {
      await pool.end();
    }
  });

program
  .command("inspect")
  .description(
    "a terminal view of the queue: depth, rates, sizes, workers, held locks and their jobs, dead letters (DATABASE_URL, or the embedded database of a running npm start in this checkout)",
  )
  .option(
    "-w, --watch [seconds]",
    "redraw every few seconds (default 2), fitted to the terminal, until Ctrl-C",
  )
  .action(async (flags: { watch?: string | boolean }) => {
    const env = configFromEnv(process.env, {}, API_ONLY_OPTIONS);
    const config = { ...env, databaseUrl: operatorDatabaseUrl(env.databaseUrl, "inspect") };
    const seconds = flags.watch === undefined ? null : flags.watch === true ? 2 : Number(flags.watch);
    if (seconds !== null && !(seconds > 0))
      throw new ConfigError("--watch", "must be a positive number of seconds");
    const queue = new TaskQueue({ ...config, logLevel: "warn" });
    try {
      // Behind a transaction pooler its reads must go unnamed; a database that does not answer yet
      // shows as error lines below.
      await queue.detectPooling().catch(() => undefined);
      await inspect(queue.ledger, queue.config.staleThresholdSeconds, seconds);
    } finally {
      await queue.close();
    }
  });

registerDeadLetterCommands(program);
registerHealthCommand(program);
registerScheduleCommands(program);
registerTypeCommands(program);

program
  .command("smoke")
  .description("check every endpoint of a running deployment over HTTP (PASS/FAIL; exit 1 on any failure)")
  .option("--url <url>", "base URL of the API", "http://127.0.0.1:8000")
  .addOption(
    new Option("--timeout <seconds>", "per request, and for the echo job to finish")
      .default(10)
      .argParser(positiveNumber("--timeout")),
  )
  .action(async (flags: { url: string; timeout: number }) => {
    // The API's token, if the deployment has one (TASKQUEUE_API_TOKEN or its _FILE).
    const failed = await smoke(flags.url, flags.timeout, withSecretFiles(process.env).TASKQUEUE_API_TOKEN);
    process.exitCode = failed === 0 ? 0 : 1;
  });

program.parseAsync(process.argv).catch((error: unknown) => {
  // The lines logged before the failure come before its message.
  flushLogs();
  // commander has printed its message (or the help, or the version, which exit 0).
  if (error instanceof CommanderError) process.exit(error.exitCode === 0 ? 0 : 2);
  if (error instanceof ConfigError || error instanceof EmbeddedPostgresUnavailableError) {
    console.error(`taskqueue: configuration error: ${error.message}`);
    process.exit(2);
  }
  console.error("taskqueue:", tlsHint(error) ?? (error instanceof Error ? error.message : error));
  process.exit(1);
});
