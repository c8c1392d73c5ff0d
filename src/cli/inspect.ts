/**
 * `taskqueue inspect`: a terminal view of the queue read from the database — depth by status,
 * rates, live workers with the jobs they hold, advisory locks held, recent dead letters.
 * `--watch` redraws every interval until Ctrl-C.
 */
import type { ResolvedConfig } from "../config.js";
import type { Ledger } from "../queue/ledger.js";

const pad = (value: unknown, width: number) => String(value).padEnd(width);
const num = (value: number | null, digits = 3) => (value === null ? "—" : value.toFixed(digits));

/** Renders one snapshot of the queue as text (no trailing newline). */
export async function renderInspection(ledger: Ledger, config: ResolvedConfig): Promise<string> {
  const [metrics, workers, locks, dead] = await Promise.all([
    ledger.metrics(config.staleThresholdSeconds),
    ledger.listWorkers(config.staleThresholdSeconds),
    ledger.heldJobLocks(),
    ledger.listDeadLetters({ replayed: false, limit: 5 }),
  ]);
  const lines = [
    `taskqueue — schema ${config.schema} — ${new Date().toISOString()}`,
    "",
    `depth    ${Object.entries(metrics.depth)
      .map(([status, n]) => `${status} ${n}`)
      .join("   ")}`,
    `rates    ${metrics.jobsPerSecond.toFixed(2)} jobs/s, error rate ${(metrics.errorRate * 100).toFixed(1)} % (trailing ${metrics.windowSeconds} s)`,
    `exec s   mean ${num(metrics.averageExecutionSeconds)}  p50 ${num(metrics.executionSecondsQuantiles.p50)}  p90 ${num(metrics.executionSecondsQuantiles.p90)}  p99 ${num(metrics.executionSecondsQuantiles.p99)}`,
    `locks    ${locks.length} job advisory locks held; fenced writes ${metrics.fencedWrites}; dead letters ${metrics.deadLetterCount}`,
    "",
    `workers  ${workers.length} live`,
    ...workers.map(
      (w) =>
        `  ${pad(w.id, 36)} held ${pad(w.heldJobs, 5)} concurrency ${pad(w.concurrency, 4)} heartbeat ${w.heartbeatAt.toISOString()}  types ${w.types.join(",")}`,
    ),
    "",
    `recent dead letters`,
    ...(dead.length === 0
      ? ["  none"]
      : dead.map((d) =>
          `  #${pad(d.jobId, 8)} ${pad(d.type, 16)} attempts ${pad(d.attempts, 3)} ${d.error ?? ""}`.slice(
            0,
            160,
          ),
        )),
  ];
  return lines.join("\n");
}

/** Prints one snapshot, or redraws every `watchSeconds` until the process is stopped. */
export async function inspect(
  ledger: Ledger,
  config: ResolvedConfig,
  watchSeconds: number | null,
): Promise<void> {
  if (watchSeconds === null) {
    console.log(await renderInspection(ledger, config));
    return;
  }
  for (;;) {
    const text = await renderInspection(ledger, config);
    process.stdout.write(`\x1b[2J\x1b[H${text}\n\n(every ${watchSeconds} s; Ctrl-C to stop)\n`);
    await new Promise((resolve) => setTimeout(resolve, watchSeconds * 1000));
  }
}
