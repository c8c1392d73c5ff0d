/**
 * The state file of a running `npm start` (`taskqueue start` on its embedded PostgreSQL):
 * `.taskqueue/embedded.json` in the working directory, readable by its owner only (mode 0600: the
 * URL carries the server's password), removed when the process exits. It lets `taskqueue inspect`
 * (and other commands run without DATABASE_URL in the same checkout) find that database.
 */
import { chmodSync, existsSync, mkdirSync, readFileSync, rmSync, writeFileSync } from "node:fs";
import { dirname, join, resolve } from "node:path";
import { processAlive } from "../db/embedded.js";
import { ConfigError } from "../errors.js";

/** Where the state file is, relative to the working directory of `taskqueue start`. */
export const EMBEDDED_STATE_FILE = ".taskqueue/embedded.json";

/** What the state file holds. */
export interface EmbeddedState {
  /** Connection string of the embedded server (password included). */
  databaseUrl: string;
  /** Process id of the `taskqueue start` that runs it. */
  pid: number;
  port: number;
  startedAt: string;
}

/**
 * Writes the state file (mode 0600) and returns the function that removes it, which also runs when
 * the process exits, however it exits short of SIGKILL (a stale file is then recognised by its dead
 * pid). `directory`: default the working directory.
 */
export function writeEmbeddedState(
  state: Omit<EmbeddedState, "pid" | "startedAt">,
  directory = process.cwd(),
): () => void {
  const path = resolve(directory, EMBEDDED_STATE_FILE);
  mkdirSync(dirname(path), { recursive: true });
  rmSync(path, { force: true });
  const full: EmbeddedState = { ...state, pid: process.pid, startedAt: new Date().toISOString() };
  writeFileSync(path, `${JSON.stringify(full, null, 2)}\n`, { mode: 0o600 });
  chmodSync(path, 0o600);
  let removed = false;
  const remove = () => {
    if (removed) return;
    removed = true;
    process.off("exit", remove);
    // Only our own file: another start may have replaced it since.
    try {
      if ((JSON.parse(readFileSync(path, "utf8")) as EmbeddedState).pid === process.pid)
        rmSync(path, { force: true });
    } catch {
      // Gone already.
    }
  };
  process.on("exit", remove);
  return remove;
}

/**
 * The embedded database of a `taskqueue start` running in `directory` (default: the working
 * directory) or a folder above it, from its state file; null when there is none.
 * @throws {ConfigError} (field DATABASE_URL) when the file names a process that is not running.
 */
export function findEmbeddedState(directory = process.cwd()): (EmbeddedState & { path: string }) | null {
  let dir = resolve(directory);
  for (;;) {
    const path = join(dir, EMBEDDED_STATE_FILE);
    if (existsSync(path)) {
      const state = JSON.parse(readFileSync(path, "utf8")) as EmbeddedState;
      if (!processAlive(state.pid))
        throw new ConfigError(
          "DATABASE_URL",
          `is not set, and ${path} names a taskqueue start (pid ${state.pid}) that is no longer running: start it again (npm start), or set DATABASE_URL`,
        );
      return { ...state, path };
    }
    const parent = dirname(dir);
    if (parent === dir) return null;
    dir = parent;
  }
}

/**
 * The database URL an operator command (`inspect`, `dead`, `retry`, `prune`, `schedule`, `migrate`
 * …) works on: `DATABASE_URL` when set, else the embedded database of a `taskqueue start` running
 * in this checkout ({@link findEmbeddedState}).
 * @throws {ConfigError} (field DATABASE_URL) when neither is there, naming `command`.
 */
export function operatorDatabaseUrl(configured: string | undefined, command: string): string {
  if (configured) return configured;
  const embedded = findEmbeddedState();
  if (!embedded)
    throw new ConfigError(
      "DATABASE_URL",
      `is required for ${command}, unless a taskqueue start on its embedded PostgreSQL runs in this checkout (${EMBEDDED_STATE_FILE})`,
    );
  return embedded.databaseUrl;
}
