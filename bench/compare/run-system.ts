/**
 * Measures one system, in a child process of run.ts (so that each library loads into a clean
 * process): setup, then (a) bulk enqueue × repeat, (b) single enqueue, (c) drain × repeat, (d) idle pickup,
 * (e) pickup with an empty table vs 1,000,000 finished jobs, then teardown. Every phase is bounded
 * by the phase timeout: a phase that fails or times out records null and the run moves on. After
 * each phase the report so far goes to the parent (IPC), which prints and saves it.
 */
import { hostname } from "node:os";
import { createAdapter } from "./adapters/index.js";
import type { RunOptions } from "./cli.js";
import {
  Admin,
  BULK_BATCH,
  describe,
  median,
  PhaseAborted,
  quantile,
  sleep,
  untilAborted,
  within,
} from "./harness.js";
import {
  type BenchContext,
  blankReport,
  type Missing,
  type ResultRow,
  type SystemAdapter,
  type SystemName,
  type SystemReport,
} from "./types.js";

/** Message from this child to run.ts. */
export type ChildMessage = { type: "progress" | "done"; report: SystemReport };

/**
 * Pause between filling the queue and starting the drain (not timed), the same for every system:
 * long enough for pg-boss's queue-stats cache (monitor and cache intervals set to 1 s) to see the
 * backlog, which its burst mode needs; as it would in steady state.
 */
const SETTLE_MS = 2500;
/** Untimed enqueues before (a) and (b), for every system alike (then the table is cleared). */
const WARM_UP_BULK_JOBS = 3000;
const WARM_UP_SINGLE_JOBS = 500;

const round = (n: number, digits: number) => Number(n.toFixed(digits));
const perSecond = (jobs: number, ms: number) => Math.round(jobs / (ms / 1000));

class SystemRun {
  readonly report: SystemReport;

  constructor(
    readonly adapter: SystemAdapter,
    readonly options: RunOptions,
    readonly admin: Admin,
    readonly runId: string,
    readonly log: (message: string) => void,
  ) {
    this.report = blankReport(adapter.system, adapter.settings, adapter.backend);
    this.report.notes = adapter.notes;
  }

  private send(type: ChildMessage["type"]): void {
    process.send?.({ type, report: this.report } satisfies ChildMessage);
  }

  private missing(fields: (keyof ResultRow)[], why: Missing): void {
    for (const field of fields) this.report.missing[field] = why;
  }

  /**
   * Runs `fn` bounded by the phase timeout. On failure or timeout: note it, stop the system's
   * workers, and return null.
   */
  private async phase<T>(name: string, fn: (signal: AbortSignal) => Promise<T>): Promise<T | null> {
    const controller = new AbortController();
    const timer = setTimeout(
      () => controller.abort(new PhaseAborted(`timed out after ${this.options.phaseTimeoutMs / 1000} s`)),
      this.options.phaseTimeoutMs,
    );
    const started = performance.now();
    try {
      const value = await untilAborted(fn(controller.signal), controller.signal);
      this.log(`${this.adapter.system}: ${name} ok (${((performance.now() - started) / 1000).toFixed(1)} s)`);
      return value;
    } catch (error) {
      const reason = controller.signal.aborted
        ? `timed out after ${this.options.phaseTimeoutMs / 1000} s`
        : describe(error);
      this.adapter.notes.push(`${name}: ${reason}`);
      this.log(`${this.adapter.system}: ${name} FAILED: ${reason}`);
      await this.adapter.abort();
      return null;
    } finally {
      clearTimeout(timer);
      controller.abort();
    }
  }

  /**
   * Deletes every job between phases (bounded). A system's own maintenance can deadlock with the
   * TRUNCATE (pg-boss's did once), so a failed clear is tried twice more before it is noted: the
   * next phase would otherwise run on top of the last one's rows.
   */
  private async clear(): Promise<boolean> {
    let lastError: unknown = null;
    for (let attempt = 1; attempt <= 3; attempt++) {
      try {
        await within(this.adapter.clear(), 60_000, "clear");
        return true;
      } catch (error) {
        lastError = error;
        await sleep(200 * attempt);
      }
    }
    this.adapter.notes.push(
      `clear failed 3 times; the next phase ran on the rows left: ${describe(lastError)}`,
    );
    return false;
  }

  /**
   * VACUUM (ANALYZE) of this system's tables before each measured phase (bounded; Redis: none),
   * standing in for autovacuum, which may be off on the server.
   */
  private async vacuum(): Promise<void> {
    try {
      await within(this.admin.vacuumSchemas(`bench_cmp_${this.runId}_`), 120_000, "vacuum");
    } catch (error) {
      this.adapter.notes.push(`vacuum: ${describe(error)}`);
    }
  }

  private timed = async (fn: () => Promise<unknown>): Promise<number> => {
    const started = performance.now();
    await fn();
    return performance.now() - started;
  };

  async run(): Promise<SystemReport> {
    const { adapter, options } = this;
    const { jobs } = options;
    const failed = (reason: string): Missing => ({ kind: "failed", reason });
    const na = (reason: string): Missing => ({ kind: "n/a", reason });
    const unsupported = adapter.unsupported;

    const ready = await this.phase("setup", () => adapter.setup().then(() => true));
    if (!ready) {
      this.missing(
        [
          "enqueue_bulk_per_s",
          "enqueue_single_per_s",
          "drain_per_s",
          "pickup_p50_ms",
          "pickup_p99_ms",
          "claim_latency_ratio_1m",
        ],
        failed("setup failed"),
      );
      await adapter.teardown();
      return this.report;
    }
    this.send("progress");

    // (a) bulk enqueue, batches of 1,000, one batch at a time; median of --repeat runs, each on an
    // empty, vacuumed table.
    if (unsupported.enqueueBulk) this.missing(["enqueue_bulk_per_s"], na(unsupported.enqueueBulk));
    else {
      // Untimed warm-up, the same for every system: JIT compilation and first plans are not what
      // is measured (a cold first pass showed taskqueue's HTTP API at 50k/s, warm at 70k/s).
      await this.phase("(a) warm-up, untimed", (signal) =>
        adapter.enqueueBulk(WARM_UP_BULK_JOBS, BULK_BATCH, signal),
      );
      await this.clear();
      for (let r = 1; r <= options.repeat; r++) {
        await this.vacuum();
        const ms = await this.phase(`(a) bulk enqueue ${r}/${options.repeat}`, (signal) =>
          this.timed(() => adapter.enqueueBulk(jobs, BULK_BATCH, signal)),
        );
        if (ms !== null) this.report.bulkRuns.push(perSecond(jobs, ms));
        await this.clear();
      }
      const bulk = median(this.report.bulkRuns);
      if (bulk === null) this.missing(["enqueue_bulk_per_s"], failed("failed or timed out"));
      else this.report.row.enqueue_bulk_per_s = Math.round(bulk);
      this.send("progress");
    }

    // (b) single enqueue, 50 in flight.
    if (unsupported.enqueueSingle) this.missing(["enqueue_single_per_s"], na(unsupported.enqueueSingle));
    else {
      await this.phase("(b) warm-up, untimed", (signal) =>
        adapter.enqueueSingle(WARM_UP_SINGLE_JOBS, options.inFlight, signal),
      );
      await this.clear();
      await this.vacuum();
      const ms = await this.phase(`(b) single enqueue, ${options.inFlight} in flight`, (signal) =>
        this.timed(() => adapter.enqueueSingle(jobs, options.inFlight, signal)),
      );
      if (ms === null) this.missing(["enqueue_single_per_s"], failed("failed or timed out"));
      else this.report.row.enqueue_single_per_s = perSecond(jobs, ms);
      await this.clear();
      this.send("progress");
    }

    // (c) drain of pre-enqueued jobs, median of --repeat runs.
    if (unsupported.drain) this.missing(["drain_per_s"], na(unsupported.drain));
    else {
      for (let r = 1; r <= options.repeat; r++) {
        await this.vacuum();
        const filled = await this.phase(
          `(c) enqueue ${jobs} for drain ${r}/${options.repeat}`,
          async (signal) => {
            await adapter.enqueueBulk(jobs, BULK_BATCH, signal);
            await sleep(SETTLE_MS, signal);
            return true;
          },
        );
        const ms = filled
          ? await this.phase(`(c) drain ${r}/${options.repeat}`, (signal) => adapter.drain(jobs, signal))
          : null;
        if (ms !== null) this.report.drainRuns.push(perSecond(jobs, ms));
        await this.clear();
      }
      const drain = median(this.report.drainRuns);
      if (drain === null) this.missing(["drain_per_s"], failed("failed or timed out"));
      else this.report.row.drain_per_s = Math.round(drain);
      this.send("progress");
    }

    // (d) idle pickup latency.
    if (unsupported.pickup) this.missing(["pickup_p50_ms", "pickup_p99_ms"], na(unsupported.pickup));
    else {
      await this.vacuum();
      const result = await this.phase(`(d) pickup, ${options.pickupSamples} samples`, (signal) =>
        adapter.pickup(options.pickupSamples, options.intervalMs, signal),
      );
      if (result && result.latencies.length > 0) {
        this.report.row.pickup_p50_ms = round(quantile(result.latencies, 0.5) as number, 2);
        this.report.row.pickup_p99_ms = round(quantile(result.latencies, 0.99) as number, 2);
        if (result.missing > 0)
          adapter.notes.push(`(d) ${result.missing} of ${options.pickupSamples} samples never picked up`);
      } else this.missing(["pickup_p50_ms", "pickup_p99_ms"], failed("failed or timed out"));
      await this.clear();
      this.send("progress");
    }

    // (e) claim latency: median pickup with 1,000,000 finished jobs vs an empty table.
    if (options.skip1m) this.missing(["claim_latency_ratio_1m"], na("skipped (--skip-1m)"));
    else if (adapter.system === "graphile-worker") {
      this.report.row.claim_latency_ratio_1m = 1.0;
      this.missing(["claim_latency_ratio_1m"], na(unsupported.claim1m ?? "n/a"));
    } else if (unsupported.claim1m) this.missing(["claim_latency_ratio_1m"], na(unsupported.claim1m));
    else await this.claimLatency();

    this.log(`${adapter.system}: teardown`);
    await adapter.teardown();
    return this.report;
  }

  /**
   * (e), bracketed to cancel drift in the machine's load: median pickup on the empty table, then
   * with the finished rows seeded, then on the empty table again (after clearing); the ratio is
   * seeded ÷ the mean of the two empty medians.
   */
  private async claimLatency(): Promise<void> {
    const { adapter, options } = this;
    const samples = options.claimSamples;
    const rows = options.finishedRows.toLocaleString("en-US");
    const pickupMedian = async (label: string): Promise<number | null> => {
      await this.vacuum();
      const result = await this.phase(`(e) pickup, ${label}, ${samples} samples`, (signal) =>
        adapter.pickup(samples, options.intervalMs, signal),
      );
      const value = result ? median(result.latencies) : null;
      return value === null ? null : round(value, 2);
    };
    const claim = this.report.claim;
    claim.emptyBeforeMs = await pickupMedian("empty table");
    const seedMs = await this.phase(`(e) seed ${rows} finished jobs`, (signal) =>
      this.timed(() => adapter.seedFinished(options.finishedRows, signal)),
    );
    if (seedMs !== null) {
      claim.seedSeconds = round(seedMs / 1000, 1);
      claim.seededMedianMs = await pickupMedian(`${rows} finished`);
    }
    if (await this.clear()) claim.emptyAfterMs = await pickupMedian("empty table again");
    const empties = [claim.emptyBeforeMs, claim.emptyAfterMs].filter((v): v is number => v !== null);
    claim.emptyMedianMs =
      empties.length > 0 ? round(empties.reduce((a, b) => a + b) / empties.length, 2) : null;
    if (claim.emptyMedianMs && claim.seededMedianMs !== null)
      this.report.row.claim_latency_ratio_1m = round(claim.seededMedianMs / claim.emptyMedianMs, 2);
    else this.missing(["claim_latency_ratio_1m"], { kind: "failed", reason: "failed or timed out" });
    await this.clear();
    this.send("progress");
  }
}

async function main(): Promise<void> {
  const [system, optionsJson, runId] = process.argv.slice(2);
  const options = JSON.parse(optionsJson as string) as RunOptions;
  const log = (message: string) =>
    process.stderr.write(`[bench:compare ${new Date().toISOString().slice(11, 19)}] ${message}\n`);
  const admin = new Admin(options.databaseUrl);
  await admin.connect();
  const ctx: BenchContext = {
    databaseUrl: options.databaseUrl,
    redisUrl: options.redisUrl,
    runId: runId as string,
    admin,
    log,
  };
  const adapter = await createAdapter(system as SystemName, ctx);
  log(`${system}: start on ${hostname()} (${adapter.backend})`);
  const run = new SystemRun(adapter, options, admin, runId as string, log);
  try {
    await run.run();
  } finally {
    await admin.end();
  }
  await new Promise<void>((resolve) => {
    if (!process.send) return resolve();
    process.send({ type: "done", report: run.report } satisfies ChildMessage, () => resolve());
  });
  process.disconnect?.();
  // Every connection is closed by now; a handle a library left open must not hang the run.
  setTimeout(() => {
    log(`${system}: still open 5 s after teardown: ${process.getActiveResourcesInfo().join(", ")}; exiting`);
    process.exit(0);
  }, 5000).unref();
}

main().catch((error: unknown) => {
  process.stderr.write(`[bench:compare] ${describe(error)}\n`);
  process.exitCode = 1;
  process.disconnect?.();
});
