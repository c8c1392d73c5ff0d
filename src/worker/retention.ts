/**
 * The pruning passes of a worker process (DESIGN.md §3, "Retention"): every
 * `pruneIntervalSeconds` (± 10 %), the lane that runs the reaper starts a pass of
 * `Ledger.pruneHistory` with the process's retention options, unless one is in flight. Every
 * process that reaps does so; the pass's advisory lock lets one of them prune at a time, and the
 * others find it taken and wait for their next turn. A pass that deleted anything is logged and
 * reported as `history:pruned`; a failed one is logged, and the next turn tries again.
 */
import type { ResolvedConfig } from "../config.js";
import type { Logger } from "../log.js";
import type { Ledger } from "../queue/ledger.js";
import type { WorkerEmitter } from "./events.js";

export class HistoryPruner {
  private timer: NodeJS.Timeout | null = null;
  private pass: Promise<void> | null = null;
  private readonly stopping = new AbortController();

  constructor(
    private readonly ledger: Ledger,
    private readonly config: ResolvedConfig,
    private readonly events: WorkerEmitter,
    private readonly logger: Logger,
  ) {}

  /** Arms the first turn, one interval from now. Nothing runs when both retentions are 0. */
  start(): void {
    if (this.config.retainDoneSeconds <= 0 && this.config.retainDeadSeconds <= 0) return;
    this.arm();
  }

  /** Disarms the timer and ends the pass in flight after its current batch (stop). Never throws. */
  async stop(): Promise<void> {
    if (this.timer) clearTimeout(this.timer);
    this.timer = null;
    this.stopping.abort();
    await this.pass;
  }

  private arm(): void {
    if (this.stopping.signal.aborted) return;
    const ms = this.config.pruneIntervalSeconds * 1000 * (0.9 + Math.random() * 0.2);
    this.timer = setTimeout(() => {
      this.timer = null;
      this.pass ??= this.run().finally(() => {
        this.pass = null;
      });
      this.arm();
    }, ms);
  }

  private async run(): Promise<void> {
    try {
      const report = await this.ledger.pruneHistory({ ...this.config, signal: this.stopping.signal });
      if (!report.ran) return;
      const deleted = Object.values(report.deletedJobs).reduce((sum, n) => sum + n, 0);
      if (deleted > 0 || report.deletedDeadLetters > 0)
        this.logger.info(
          {
            jobs: report.deletedJobs,
            deadLetters: report.deletedDeadLetters,
            ms: Math.round(report.elapsedMs),
          },
          "pruned finished jobs past their retention",
        );
      this.events.emit("history:pruned", report);
    } catch (error) {
      this.logger.warn({ err: error }, "pruning pass failed");
    }
  }
}
