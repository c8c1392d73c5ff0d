/**
 * Measures one system, command by command (schedule.ts), in the system's child process: setup,
 * untimed warm-ups, passes of (a) bulk enqueue, (b) single enqueue, (c) drain and (d) idle pickup,
 * (e) pickup with an empty table vs 1,000,000 finished jobs, teardown. Every phase is bounded by
 * the phase timeout: a phase that fails or times out records null and the run moves on. Each
 * pass's figures are kept by round; the row holds their medians.
 */
import type { RunOptions } from "./cli.js";
import { CpuMeter } from "./cpu.js";
import {
  type Admin,
  BULK_BATCH,
  describe,
  median,
  PhaseAborted,
  quantile,
  sleep,
  untilAborted,
  within,
} from "./harness.js";
import type { Command, PassPhase } from "./schedule.js";
import {
  blankReport,
  type Missing,
  type ResultRow,
  type RoundFigure,
  type SystemAdapter,
  type SystemReport,
} from "./types.js";

/**
 * Pause between filling the queue and starting the drain (not timed), the same for every system:
 * long enough for pg-boss's queue-stats cache (monitor and cache intervals set to 1 s) to see the
 * backlog, which its burst mode needs; as it would in steady state.
 */
const SETTLE_MS = 2500;
/** Untimed enqueues before (a) and (b), for every system alike (then the table is cleared). */
const WARM_UP_BULK_JOBS = 3000;
const WARM_UP_SINGLE_JOBS = 500;

/** The row's figures each pass phase measures. */
const FIGURES: Record<PassPhase, RoundFigure[]> = {
  enqueueBulk: ["enqueue_bulk_per_s", "enqueue_bulk_cpu_us_per_job"],
  enqueueSingle: ["enqueue_single_per_s", "enqueue_single_cpu_us_per_job"],
  drain: ["drain_per_s", "drain_cpu_us_per_job"],
  pickup: ["pickup_p50_ms", "pickup_p99_ms"],
};
/** The CPU figure of each phase that has one. */
const CPU_FIGURE: Partial<Record<PassPhase, RoundFigure>> = {
  enqueueBulk: "enqueue_bulk_cpu_us_per_job",
  enqueueSingle: "enqueue_single_cpu_us_per_job",
  drain: "drain_cpu_us_per_job",
};
/** Decimals of each figure in the row. */
const DIGITS: Record<RoundFigure, number> = {
  enqueue_bulk_per_s: 0,
  enqueue_single_per_s: 0,
  drain_per_s: 0,
  pickup_p50_ms: 2,
  pickup_p99_ms: 2,
  enqueue_bulk_cpu_us_per_job: 2,
  enqueue_single_cpu_us_per_job: 2,
  drain_cpu_us_per_job: 2,
};

const round = (n: number, digits: number) => Number(n.toFixed(digits));
const perSecond = (jobs: number, ms: number) => Math.round(jobs / (ms / 1000));
const failed = (reason: string): Missing => ({ kind: "failed", reason });
const na = (reason: string): Missing => ({ kind: "n/a", reason });

export class SystemRun {
  readonly report: SystemReport;
  /** Set up successfully; every command after a failed setup does nothing. */
  private ready = false;
  private readonly cpu: CpuMeter;

  constructor(
    readonly adapter: SystemAdapter,
    readonly options: RunOptions,
    readonly admin: Admin,
    readonly runId: string,
    readonly log: (message: string) => void,
  ) {
    this.report = blankReport(adapter.system, adapter.settings, adapter.backend);
    this.report.notes = adapter.notes;
    this.cpu = new CpuMeter(admin, options.databaseUrl, () => [
      process.pid,
      ...(adapter.processIds?.() ?? []),
    ]);
  }

  /** Runs one command of the schedule. Never throws: failures become notes and missing figures. */
  async execute(command: Command): Promise<void> {
    switch (command.kind) {
      case "setup":
        return this.setup();
      case "warm-up":
        return this.warmUp(command.phase);
      case "pass":
        return this.pass(command.phase, command.round, command.of);
      case "claim1m":
        return this.claim1m();
      case "teardown":
        this.log(`${this.adapter.system}: teardown`);
        return this.adapter.teardown();
    }
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
   * VACUUM (ANALYZE) of the run's tables before each measured phase (bounded; Redis: none),
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

  private async setup(): Promise<void> {
    this.ready = (await this.phase("setup", () => this.adapter.setup().then(() => true))) === true;
    if (!this.ready) {
      const all = Object.keys(this.report.row).filter((k) => k !== "system" && k !== "settings");
      this.missing(all as (keyof ResultRow)[], failed("setup failed"));
    }
  }

  /**
   * Untimed warm-up, the same for every system, then a clear: JIT compilation and first plans are
   * not what is measured (a cold first pass showed taskqueue's HTTP API at 50k/s, warm at 70k/s).
   */
  private async warmUp(phase: "enqueueBulk" | "enqueueSingle"): Promise<void> {
    const { adapter, options } = this;
    if (!this.ready || adapter.unsupported[phase]) return;
    if (phase === "enqueueBulk")
      await this.phase("(a) warm-up, untimed", (signal) =>
        adapter.enqueueBulk(WARM_UP_BULK_JOBS, BULK_BATCH, signal),
      );
    else
      await this.phase("(b) warm-up, untimed", (signal) =>
        adapter.enqueueSingle(WARM_UP_SINGLE_JOBS, options.inFlight, signal),
      );
    await this.clear();
  }

  /** Records round `r`'s figure (null: failed) and sets the row's figure to the median of the rounds. */
  private record(r: number, figure: RoundFigure, value: number | null): void {
    const { rounds } = this.report;
    while (rounds.length < r) rounds.push({});
    (rounds[r - 1] as Record<RoundFigure, number | null>)[figure] = value;
    const values = rounds.map((f) => f[figure]).filter((v): v is number => typeof v === "number");
    const mid = median(values);
    this.report.row[figure] = mid === null ? null : round(mid, DIGITS[figure]);
    if (mid === null) this.report.missing[figure] = failed("failed or timed out");
    else delete this.report.missing[figure];
  }

  /**
   * Pass `r` of `of` of a phase, on an emptied, vacuumed table: (a) `jobs` jobs in bulk calls of
   * 1,000, one at a time; (b) `singleJobs` single enqueues, 50 in flight; (c) `jobs` jobs enqueued, 2.5 s
   * of rest, then drained; (d) idle pickup, one job every 20 ms.
   */
  private async pass(phase: PassPhase, r: number, of: number): Promise<void> {
    const { adapter, options } = this;
    const { jobs } = options;
    if (!this.ready) return;
    const unsupported = adapter.unsupported[phase];
    if (unsupported) return this.missing(FIGURES[phase], na(unsupported));
    const label = of > 1 ? ` ${r}/${of}` : "";
    await this.vacuum();
    const cpuFigure = CPU_FIGURE[phase];
    const noCpu = this.cpu.unavailable ?? adapter.cpuUnsupported;
    if (cpuFigure && noCpu) this.missing([cpuFigure], na(noCpu));
    /**
     * Runs a measured call and records its rate and CPU per job: CPU time read before the call and
     * when the call says it is done (`cpuEnd`), or else after it.
     */
    const measure = async (
      name: string,
      figure: RoundFigure,
      count: number,
      call: (signal: AbortSignal, cpuEnd: () => Promise<void>) => Promise<number>,
    ) => {
      const mark = noCpu ? null : await this.cpu.start().catch(() => null);
      let ns: number | null = null;
      let read = false;
      const cpuEnd = async () => {
        if (read) return;
        read = true;
        ns = await this.cpu.stop(mark).catch(() => null);
      };
      const ms = await this.phase(name, (signal) => call(signal, cpuEnd));
      await cpuEnd();
      this.record(r, figure, ms === null ? null : perSecond(count, ms));
      if (cpuFigure && !noCpu)
        this.record(r, cpuFigure, ms === null || ns === null ? null : ns / 1000 / count);
      return ms;
    };
    if (phase === "enqueueBulk") {
      const ms = await measure(`(a) bulk enqueue${label}`, "enqueue_bulk_per_s", jobs, (signal) =>
        this.timed(() => adapter.enqueueBulk(jobs, BULK_BATCH, signal)),
      );
      if (ms !== null) this.report.bulkRuns.push(perSecond(jobs, ms));
    } else if (phase === "enqueueSingle") {
      await measure(
        `(b) single enqueue${label}, ${options.singleJobs} jobs, ${options.inFlight} in flight`,
        "enqueue_single_per_s",
        options.singleJobs,
        (signal) => this.timed(() => adapter.enqueueSingle(options.singleJobs, options.inFlight, signal)),
      );
    } else if (phase === "drain") {
      const filled = await this.phase(`(c) enqueue ${jobs} for drain${label}`, async (signal) => {
        await adapter.enqueueBulk(jobs, BULK_BATCH, signal);
        await sleep(SETTLE_MS, signal);
        return true;
      });
      const ms = filled
        ? await measure(`(c) drain${label}`, "drain_per_s", jobs, (signal, cpuEnd) =>
            adapter.drain(jobs, signal, cpuEnd),
          )
        : null;
      if (!filled) this.record(r, "drain_per_s", null);
      if (!filled && !noCpu) this.record(r, "drain_cpu_us_per_job", null);
      if (ms !== null) this.report.drainRuns.push(perSecond(jobs, ms));
    } else {
      const result = await this.phase(`(d) pickup${label}, ${options.pickupSamples} samples`, (signal) =>
        adapter.pickup(options.pickupSamples, options.intervalMs, signal),
      );
      const measured = result !== null && result.latencies.length > 0;
      const at = (q: number) => (measured ? round(quantile(result.latencies, q) as number, 3) : null);
      this.record(r, "pickup_p50_ms", at(0.5));
      this.record(r, "pickup_p99_ms", at(0.99));
      if (result && result.missing > 0)
        adapter.notes.push(
          `(d)${label} ${result.missing} of ${options.pickupSamples} samples never picked up`,
        );
    }
    await this.clear();
  }

  /** (e) claim latency: median pickup with 1,000,000 finished jobs vs an empty table. */
  private async claim1m(): Promise<void> {
    const { adapter, options } = this;
    if (!this.ready) return;
    if (options.skip1m) this.missing(["claim_latency_ratio_1m"], na("skipped (--skip-1m)"));
    else if (adapter.system === "graphile-worker") {
      this.report.row.claim_latency_ratio_1m = 1.0;
      this.missing(["claim_latency_ratio_1m"], na(adapter.unsupported.claim1m ?? "n/a"));
    } else if (adapter.unsupported.claim1m)
      this.missing(["claim_latency_ratio_1m"], na(adapter.unsupported.claim1m));
    else await this.claimLatency();
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
  }
}
