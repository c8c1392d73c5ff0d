/**
 * A private PgBouncer (the Debian package's /usr/sbin/pgbouncer, or PGBOUNCER_BIN) on a free
 * loopback port in front of the test database, for the pooling tests. Its configuration is the one
 * the README's "PgBouncer" section gives; trust authentication on loopback. PgBouncer refuses to
 * run as root: as root it switches to `nobody` (`-u`), and its files are made readable to it.
 */
import { type ChildProcess, spawn } from "node:child_process";
import { chmod, mkdtemp, rm, writeFile } from "node:fs/promises";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { freePort } from "../../src/db/embedded.js";

export const PGBOUNCER_BIN = process.env.PGBOUNCER_BIN ?? "/usr/sbin/pgbouncer";

export interface PgBouncer {
  /** `databaseUrl` with its host and port replaced by the bouncer's. */
  url: string;
  port: number;
  /** Stops the bouncer (SIGINT, then SIGKILL after 5 s) and removes its files. */
  stop(): Promise<void>;
}

/**
 * Starts a bouncer in `mode` in front of the database of `databaseUrl` (its user must need no
 * password, as on the test server) and resolves once it listens (its own log line, within 10 s).
 */
export async function startPgBouncer(
  databaseUrl: string,
  mode: "session" | "transaction",
  defaultPoolSize = 3,
): Promise<PgBouncer> {
  const target = new URL(databaseUrl);
  const dbname = decodeURIComponent(target.pathname.slice(1)) || "postgres";
  const user = decodeURIComponent(target.username) || "postgres";
  const dir = await mkdtemp(join(tmpdir(), "taskqueue-pgbouncer-"));
  const port = await freePort();
  await writeFile(join(dir, "userlist.txt"), `"${user}" ""\n`);
  await writeFile(
    join(dir, "pgbouncer.ini"),
    [
      "[databases]",
      `${dbname} = host=${target.hostname} port=${target.port || 5432} dbname=${dbname}`,
      "[pgbouncer]",
      "listen_addr = 127.0.0.1",
      `listen_port = ${port}`,
      "unix_socket_dir =",
      "auth_type = trust",
      `auth_file = ${join(dir, "userlist.txt")}`,
      `pool_mode = ${mode}`,
      `default_pool_size = ${defaultPoolSize}`,
      "max_client_conn = 500",
      // node-postgres sends statement_timeout as a startup parameter; PgBouncer refuses unknown ones.
      "ignore_startup_parameters = extra_float_digits,statement_timeout",
      "",
    ].join("\n"),
  );
  const asRoot = process.getuid?.() === 0;
  if (asRoot) await chmod(dir, 0o755);
  const args = [...(asRoot ? ["-u", "nobody"] : []), join(dir, "pgbouncer.ini")];
  const child: ChildProcess = spawn(PGBOUNCER_BIN, args, { stdio: ["ignore", "pipe", "pipe"] });
  const exited = new Promise<void>((resolve) => child.once("exit", () => resolve()));
  let output = "";
  try {
    await new Promise<void>((resolve, reject) => {
      const timer = setTimeout(
        () => reject(new Error(`pgbouncer did not listen within 10 s: ${output}`)),
        10_000,
      );
      const onData = (chunk: Buffer) => {
        output += chunk.toString("utf8");
        if (output.includes(`listening on 127.0.0.1:${port}`)) {
          clearTimeout(timer);
          resolve();
        }
      };
      child.stdout?.on("data", onData);
      child.stderr?.on("data", onData);
      child.once("exit", (code) => {
        clearTimeout(timer);
        reject(new Error(`pgbouncer exited with ${code}: ${output}`));
      });
      child.once("error", (error) => {
        clearTimeout(timer);
        reject(error);
      });
    });
  } catch (error) {
    child.kill("SIGKILL");
    await rm(dir, { recursive: true, force: true });
    throw error;
  }
  const url = new URL(databaseUrl);
  url.hostname = "127.0.0.1";
  url.port = String(port);
  return {
    url: url.toString(),
    port,
    async stop() {
      if (child.exitCode === null && child.signalCode === null) {
        const killer = setTimeout(() => child.kill("SIGKILL"), 5000);
        child.kill("SIGINT");
        await exited;
        clearTimeout(killer);
      }
      child.stdout?.destroy();
      child.stderr?.destroy();
      await rm(dir, { recursive: true, force: true });
    },
  };
}
