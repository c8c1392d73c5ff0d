/**
 * Cancel-to-abort latency (issue 14, item 3): a worker runs `--running` (8) jobs whose handlers
 * wait for their AbortSignal; another queue (its own pool, as an API host would be) cancels them,
 * one at a time, `--cancels` (300) in all, replacing each. For each cancel it measures the time from
 * just before `cancelJob` is called to the moment the handler's signal fires (NOTIFY → the worker's
 * LISTEN connection → a check of the row → abort), and the cancel statement's own round trip.
 * The heartbeat is set to 60 s, so no abort comes from the fallback. Prints p50/p90/p99/max.
 *
 *   npm run bench:cancel -- [--cancels 300] [--running 8]
 *
 * Uses DATABASE_URL (default postgres://postgres@127.0.0.1:5432/test) and a throw-away schema.
 */
import { parseArgs } from "node:util";
import { positiveInteger } from "../src/cli/flags.js";
import { JobCancelledError, TaskQueue } from "../src/index.js";
import { fixed, summarizeMs } from "./shared/stats.js";

const { values } = parseArgs({
  options: {
    cancels: { type: "string", default: "300" },
    running: { type: "string", default: "8" },
  },
});
function flag(name: "cancels" | "running"): number {
  try {
    return positiveInteger(`--${name}`)(values[name]);
  } catch (error) {
    console.error(`error: ${(error as Error).message}`);
    process.exit(2);
  }
}
const cancels = flag("cancels");
const running = flag("running");
const schema = `bench_cancel_${process.pid}`;
const options = {
  databaseUrl: process.env.DATABASE_URL ?? "postgres://postgres@127.0.0.1:5432/test",
  schema,
  notifyChannel: `${schema}_jobs`,
  logLevel: "warn" as const,
  heartbeatIntervalSeconds: 60,
  staleThresholdSeconds: 120,
  workerCount: running,
};
const workers = new TaskQueue(options);
const api = new TaskQueue(options);

/** Handlers waiting for their abort, by job id: resolves the abort's time. */
const aborts = new Map<number, (abortedAt: number) => void>();
/** Jobs whose handler has started, and those whose start the bench waits for. */
const begun = new Set<number>();
const startWaiters = new Map<number, () => void>();
let wrongReasons = 0;

workers.register("bench_cancel", async (job, signal) => {
  await new Promise<void>((resolve) => {
    signal.addEventListener("abort", () => {
      const at = performance.now();
      if (!(signal.reason instanceof JobCancelledError)) wrongReasons++;
      aborts.get(job.id)?.(at);
      resolve();
    });
    begun.add(job.id);
    startWaiters.get(job.id)?.();
  });
  return null;
});

/** Enqueues one job and resolves with its id and the promise of its abort time once it runs. */
async function runningJob(): Promise<{ id: number; aborted: Promise<number> }> {
  const job = await api.addJob({ type: "bench_cancel" });
  let abortedResolve: (at: number) => void = () => undefined;
  const aborted = new Promise<number>((resolve) => {
    abortedResolve = resolve;
  });
  aborts.set(job.id, abortedResolve);
  if (!begun.has(job.id))
    await new Promise<void>((resolve, reject) => {
      const timer = setTimeout(() => reject(new Error(`job ${job.id} did not start within 10 s`)), 10_000);
      startWaiters.set(job.id, () => {
        clearTimeout(timer);
        resolve();
      });
    });
  return { id: job.id, aborted };
}

try {
  await api.migrate();
  const worker = await workers.startWorker({ runReaper: false, runScheduler: false });
  try {
    const pool = await Promise.all(Array.from({ length: running }, () => runningJob()));
    const toAbortMs: number[] = [];
    const statementMs: number[] = [];
    const afterAnswerMs: number[] = [];
    for (let i = 0; i < cancels; i++) {
      const victim = pool[i % running] as { id: number; aborted: Promise<number> };
      const t0 = performance.now();
      await api.cancelJob(victim.id);
      statementMs.push(performance.now() - t0);
      const abortedAt = await Promise.race([
        victim.aborted,
        new Promise<number>((_, reject) =>
          setTimeout(() => reject(new Error("no abort within 10 s")), 10_000),
        ),
      ]);
      toAbortMs.push(abortedAt - t0);
      afterAnswerMs.push(abortedAt - t0 - (statementMs.at(-1) as number));
      aborts.delete(victim.id);
      begun.delete(victim.id);
      pool[i % running] = await runningJob();
    }
    const line = (name: string, ms: number[]) => {
      const s = summarizeMs(ms);
      console.log(
        `  ${name.padEnd(24)} p50 ${fixed(s.p50Ms, 2)} ms  p90 ${fixed(s.p90Ms, 2)} ms  p99 ${fixed(s.p99Ms, 2)} ms  max ${fixed(s.maxMs, 2)} ms`,
      );
    };
    console.log(
      `cancel: ${cancels} cancels of running jobs, ${running} running at a time, one worker process`,
    );
    line("cancel-to-abort", toAbortMs);
    line("cancel statement", statementMs);
    line("answer-to-abort", afterAnswerMs);
    if (wrongReasons > 0) console.log(`  ${wrongReasons} aborts had another reason than JobCancelledError`);
  } finally {
    await worker.stop(0);
  }
} finally {
  await api.pool.query(`DROP SCHEMA IF EXISTS "${schema}" CASCADE`).catch(() => undefined);
  await api.close();
  await workers.close();
}
