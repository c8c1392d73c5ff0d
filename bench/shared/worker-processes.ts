/**
 * Worker processes of the system under test: `taskqueue worker` child processes (the real CLI, as an
 * operator runs it), pointed at the benchmark's schema. Their JSON log lines on stdout tell us when
 * each has started; warnings and errors are kept for the report.
 */
import { type ChildProcess, spawn } from "node:child_process";
import { fileURLToPath } from "node:url";

/** The compiled CLI entry point (dist/src/cli/main.js, from dist/bench/shared/). */
export const CLI_MAIN_PATH = fileURLToPath(new URL("../../src/cli/main.js", import.meta.url));

/** Options of {@link startWorkerProcesses}. */
export interface WorkerProcessOptions {
  /** Number of processes. */
  count: number;
  /** `--concurrency` of each: handlers run at once. */
  concurrency: number;
  /** `WORKER_PREFETCH` of each (default: the worker's own default, = concurrency). */
  prefetch?: number;
  databaseUrl: string;
  schema: string;
  notifyChannel: string;
  /** Give up when a process has not logged "worker started" within this. Default 30 s. */
  startTimeoutMs?: number;
  /** More environment variables of the processes (e.g. `RETAIN_DONE_SECONDS`). */
  env?: Record<string, string>;
}

/** Running worker processes. */
export interface WorkerProcesses {
  /** Process ids, in start order. */
  readonly pids: readonly number[];
  /** Log lines at level warn or above from any of them so far (`[worker N] msg`). */
  readonly warnings: readonly string[];
  /**
   * SIGTERM to each (graceful: the worker finishes or gives back its jobs and exits 0), then
   * SIGKILL to any still running after `graceMs` (default 15 s). Idempotent.
   */
  stop(graceMs?: number): Promise<void>;
  /** SIGKILL to every process still running, synchronously (for `process.on("exit")`). */
  killNow(): void;
}

interface Child {
  process: ChildProcess;
  exited: Promise<number | null>;
  stderrTail: string;
}

const PINO_WARN = 40;

/**
 * Spawns `count` processes of `node dist/src/cli/main.js worker --concurrency C --no-migrate` with
 * DATABASE_URL, TASKQUEUE_SCHEMA, TASKQUEUE_NOTIFY_CHANNEL and LOG_LEVEL=info (for the
 * "worker started" line), and resolves once every one has logged "worker started".
 * The schema must already be migrated.
 * @throws if a process exits or stays silent past `startTimeoutMs`; all of them are killed then.
 */
export async function startWorkerProcesses(options: WorkerProcessOptions): Promise<WorkerProcesses> {
  const env: NodeJS.ProcessEnv = {
    ...process.env,
    DATABASE_URL: options.databaseUrl,
    TASKQUEUE_SCHEMA: options.schema,
    TASKQUEUE_NOTIFY_CHANNEL: options.notifyChannel,
    LOG_LEVEL: "info",
    // Jobs are all final when the benchmark stops the workers; a stuck one should not hold it up.
    SHUTDOWN_GRACE_SECONDS: "5",
    ...options.env,
  };
  if (options.prefetch !== undefined) env.WORKER_PREFETCH = String(options.prefetch);
  const warnings: string[] = [];
  const children: Child[] = [];
  const started: Promise<void>[] = [];
  for (let n = 0; n < options.count; n++) {
    const child = spawn(
      process.execPath,
      [CLI_MAIN_PATH, "worker", "--concurrency", String(options.concurrency), "--no-migrate"],
      { env, stdio: ["ignore", "pipe", "pipe"] },
    );
    const entry: Child = {
      process: child,
      exited: new Promise((resolve) => child.on("exit", (code) => resolve(code))),
      stderrTail: "",
    };
    children.push(entry);
    child.stderr?.on("data", (chunk: Buffer) => {
      entry.stderrTail = (entry.stderrTail + chunk.toString("utf8")).slice(-4000);
    });
    started.push(
      new Promise<void>((resolve, reject) => {
        let buffered = "";
        child.stdout?.on("data", (chunk: Buffer) => {
          buffered += chunk.toString("utf8");
          const lines = buffered.split("\n");
          buffered = lines.pop() ?? "";
          for (const text of lines) {
            let line: { level?: number; msg?: string } = {};
            try {
              line = JSON.parse(text) as typeof line;
            } catch {
              continue;
            }
            if (line.msg === "worker started") resolve();
            else if ((line.level ?? 0) >= PINO_WARN) warnings.push(`[worker ${n + 1}] ${text}`);
          }
        });
        void entry.exited.then((code) =>
          reject(
            new Error(
              `worker process ${n + 1} exited with code ${code} before starting: ${entry.stderrTail}`,
            ),
          ),
        );
      }),
    );
  }
  const killNow = () => {
    for (const c of children)
      if (c.process.exitCode === null && c.process.signalCode === null) c.process.kill("SIGKILL");
  };
  let stopping: Promise<void> | null = null;
  const stop = (graceMs = 15_000) => {
    stopping ??= (async () => {
      await Promise.all(
        children.map(async (c) => {
          if (c.process.exitCode !== null || c.process.signalCode !== null) return;
          c.process.kill("SIGTERM");
          let timer: NodeJS.Timeout | undefined;
          const killed = new Promise<void>((resolve) => {
            timer = setTimeout(() => {
              c.process.kill("SIGKILL");
              resolve();
            }, graceMs);
          });
          await Promise.race([c.exited, killed]);
          clearTimeout(timer);
          await c.exited;
        }),
      );
    })();
    return stopping;
  };
  const timeoutMs = options.startTimeoutMs ?? 30_000;
  let timer: NodeJS.Timeout | undefined;
  try {
    await Promise.race([
      Promise.all(started),
      new Promise<never>((_, reject) => {
        timer = setTimeout(
          () => reject(new Error(`worker processes did not start within ${timeoutMs} ms`)),
          timeoutMs,
        );
      }),
    ]);
  } catch (error) {
    killNow();
    await Promise.all(children.map((c) => c.exited));
    throw error;
  } finally {
    clearTimeout(timer);
  }
  return {
    pids: children.map((c) => c.process.pid ?? -1),
    warnings,
    stop,
    killNow,
  };
}
