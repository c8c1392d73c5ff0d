/**
 * The scheduler of a worker process (DESIGN.md §3, "Schedules"): a pass of
 * `Ledger.runSchedulePass` every `schedulerIntervalSeconds`, and another at the earliest next tick
 * of any schedule (as the pass measured it on the database's clock), whichever comes first, so a
 * per-second schedule fires within milliseconds of its tick while schedules created or changed by
 * other processes are seen within the interval. Every worker process runs one; there is no leader
 * to lose, and the pass's compare and set and the tick's unique key make one job per tick however
 * many passes race (schedules.ts). One pass at a time per process; a failed pass is logged (once
 * per distinct message while it repeats) and the next turn tries again.
 */
import type { ResolvedConfig } from "../config.js";
import type { Logger } from "../log.js";
import type { Ledger } from "../queue/ledger.js";
import type { WorkerEmitter } from "./events.js";

/** After the tick, wait this much more so that the database's clock is surely past it. */
const TICK_MARGIN_MS = 3;

export class Scheduler {
  private timer: NodeJS.Timeout | null = null;
  private pass: Promise<void> | null = null;
  private stopped = false;
  private lastError: string | null = null;

  constructor(
    private readonly ledger: Ledger,
    private readonly config: ResolvedConfig,
    private readonly events: WorkerEmitter,
    private readonly logger: Logger,
  ) {}

  /** Runs a first pass now, then keeps passing until {@link stop}. */
  start(): void {
    this.runPass();
  }

  /** Disarms the timer and waits for the pass in flight. Idempotent; never throws. */
  async stop(): Promise<void> {
    this.stopped = true;
    if (this.timer) clearTimeout(this.timer);
    this.timer = null;
    await this.pass;
  }

  private runPass(): void {
    if (this.stopped || this.pass) return;
    this.pass = this.passOnce().finally(() => {
      this.pass = null;
    });
  }

  private async passOnce(): Promise<void> {
    let untilNextMs: number | null = null;
    try {
      const report = await this.ledger.runSchedulePass(this.config);
      untilNextMs = report.msUntilNextTick;
      this.lastError = null;
      for (const [name, reason] of Object.entries(report.failed))
        this.logger.warn({ schedule: name, reason }, "schedule cannot be evaluated");
      for (const [name, ticks] of Object.entries(report.skippedTicks))
        this.logger.info(
          { schedule: name, ticks },
          "skipped schedule ticks (misfired or past the catch-up limit)",
        );
      if (report.enqueuedJobIds.length > 0) {
        this.logger.debug({ jobIds: report.enqueuedJobIds }, "enqueued schedule ticks");
        this.events.emit("schedule:enqueued", { jobIds: report.enqueuedJobIds });
      }
    } catch (error) {
      const message = (error as Error).message;
      if (message !== this.lastError) this.logger.warn({ err: error }, "scheduler pass failed");
      this.lastError = message;
    }
    this.arm(untilNextMs);
  }

  private arm(untilNextMs: number | null): void {
    if (this.stopped) return;
    const intervalMs = this.config.schedulerIntervalSeconds * 1000;
    const ms = untilNextMs === null ? intervalMs : Math.min(intervalMs, untilNextMs + TICK_MARGIN_MS);
    this.timer = setTimeout(() => {
      this.timer = null;
      this.runPass();
    }, ms);
  }
}
