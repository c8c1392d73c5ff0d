/** Runs the real `taskqueue` CLI as a child process against a test schema. */
import { type ChildProcess, execFile, spawn } from "node:child_process";
import { resolve } from "node:path";
import { setTimeout as sleep } from "node:timers/promises";
import { promisify } from "node:util";
import type { TestDb } from "./db.js";

export const CLI = "dist/src/cli/main.js";

export interface CliProcess {
  child: ChildProcess;
  /** Log lines (parsed JSON) so far. */
  logs: Record<string, unknown>[];
  /** Resolves with the first log line matching. */
  waitForLog(
    match: (line: Record<string, unknown>) => boolean,
    timeoutMs?: number,
  ): Promise<Record<string, unknown>>;
  /** Resolves with the exit code. */
  exited: Promise<number | null>;
}

/** Environment pointing the CLI at the test schema with tiny intervals. */
export function cliEnv(db: TestDb, extra: Record<string, string> = {}): NodeJS.ProcessEnv {
  return {
    ...process.env,
    DATABASE_URL: db.config.databaseUrl,
    TASKQUEUE_SCHEMA: db.schema,
    TASKQUEUE_NOTIFY_CHANNEL: db.config.notifyChannel,
    POLL_INTERVAL_SECONDS: "0.2",
    HEARTBEAT_INTERVAL_SECONDS: "0.2",
    REAPER_INTERVAL_SECONDS: "0.5",
    STALE_THRESHOLD_SECONDS: "5",
    BACKOFF_JITTER: "false",
    BACKOFF_BASE_SECONDS: "0.05",
    LOG_LEVEL: "info",
    ...extra,
  };
}

/**
 * CLI processes of this test file still running. A test that fails or times out before it stops
 * its processes (the runner's `--test-force-exit` then ends the file) must not leave them running
 * against a dropped schema, loading the machine for every later file: they are killed when this
 * process exits, however it exits (but SIGKILL).
 */
const running = new Set<ChildProcess>();
process.on("exit", () => {
  for (const child of running) child.kill("SIGKILL");
});

/** Starts the CLI with `args`; `cwd` (default this process's) is the directory it runs in. */
export function startCli(args: string[], env: NodeJS.ProcessEnv, cwd?: string): CliProcess {
  const child = spawn(process.execPath, [resolve(CLI), ...args], {
    env,
    cwd,
    stdio: ["ignore", "pipe", "pipe"],
  });
  running.add(child);
  child.on("exit", () => running.delete(child));
  const logs: Record<string, unknown>[] = [];
  const waiters: {
    match: (l: Record<string, unknown>) => boolean;
    resolve: (l: Record<string, unknown>) => void;
  }[] = [];
  let buffered = "";
  child.stdout?.on("data", (chunk: Buffer) => {
    buffered += chunk.toString("utf8");
    const lines = buffered.split("\n");
    buffered = lines.pop() ?? "";
    for (const text of lines) {
      let line: Record<string, unknown>;
      try {
        line = JSON.parse(text) as Record<string, unknown>;
      } catch {
        line = { msg: text };
      }
      logs.push(line);
      for (const w of [...waiters]) {
        if (w.match(line)) {
          waiters.splice(waiters.indexOf(w), 1);
          w.resolve(line);
        }
      }
    }
  });
  let stderr = "";
  child.stderr?.on("data", (chunk: Buffer) => {
    stderr += chunk.toString("utf8");
  });
  const exited = new Promise<number | null>((resolve) => child.on("exit", (code) => resolve(code)));
  return {
    child,
    logs,
    exited,
    waitForLog(match, timeoutMs = 15_000) {
      const seen = logs.find(match);
      if (seen) return Promise.resolve(seen);
      return new Promise((resolve, reject) => {
        const timer = setTimeout(
          () =>
            reject(new Error(`no matching log line within ${timeoutMs} ms; stderr: ${stderr.slice(-2000)}`)),
          timeoutMs,
        );
        waiters.push({
          match,
          resolve: (line) => {
            clearTimeout(timer);
            resolve(line);
          },
        });
        void exited.then(() => reject(new Error(`process exited; stderr: ${stderr.slice(-2000)}`)));
      });
    },
  };
}

/**
 * Re-checks a database condition until it holds (for state in another process, where no event of
 * ours exists to await). Fails after `timeoutMs`.
 */
export async function until(
  check: () => Promise<boolean>,
  timeoutMs = 20_000,
  what = "condition",
): Promise<void> {
  const deadline = Date.now() + timeoutMs;
  while (!(await check())) {
    if (Date.now() > deadline) throw new Error(`timed out waiting for ${what}`);
    await sleep(25);
  }
}

/** Runs the CLI to its end with `args` on `db`'s schema (cliEnv plus `env`); resolves with stdout, rejects on a non-zero exit. */
export async function runCli(db: TestDb, args: string[], env: Record<string, string> = {}): Promise<string> {
  const { stdout } = await promisify(execFile)(process.execPath, [CLI, ...args], { env: cliEnv(db, env) });
  return stdout;
}

/** The exit code and stderr of a CLI run on `db` that must fail. @throws when it succeeds. */
export async function failingCli(db: TestDb, args: string[]): Promise<{ code: number; stderr: string }> {
  try {
    await runCli(db, args);
  } catch (error) {
    const { code, stderr } = error as { code: number; stderr: string };
    return { code, stderr };
  }
  throw new Error(`taskqueue ${args.join(" ")} succeeded`);
}
