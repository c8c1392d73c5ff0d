/**
 * The database-wide metrics of GET /metrics/prometheus (DESIGN.md §8): counters and histograms by
 * job type kept in the database (schema version 8), gauges of depth, oldest pending age and live
 * workers, read at scrape time; every process that serves them reports the same values, so
 * Prometheus scrapes one API replica for them. The registry also holds the serving process's own
 * process and Node metrics (per process).
 */
import { Registry } from "prom-client";
import type { Ledger } from "../queue/ledger.js";
import type { TypeFigures } from "../queue/reads.js";
import { HISTOGRAM_BOUNDS_SECONDS } from "../queue/sql/accounting.js";
import { JOB_STATUSES, type QueueMetrics } from "../queue/types.js";
import { histogramSamples, processMetrics, type Sample, snapshotMetric } from "./exposition.js";

/** The counters by type, each `taskqueue_jobs_<event>_total`, and what it counts. */
export const JOB_COUNTERS = {
  enqueued:
    "Jobs enqueued (a dead job replayed counts again): those pending, claimed or running plus those completed, dead or cancelled.",
  completed: "Jobs completed (done).",
  failed: "Failed attempts: handler failures and reclaims from lost workers (retried + dead).",
  retried: "Failed attempts scheduled to run again.",
  dead: "Jobs dead-lettered (retries exhausted or a permanent failure).",
  cancelled: "Jobs cancelled.",
  fenced:
    "Outcome writes a worker could not hand in: refused by the claim fence, or dropped with a lost session.",
  overdue:
    "Handlers that had not settled JOB_ABORT_GRACE_SECONDS after a cancel or timeout aborted them: their slot was freed.",
} as const;

/**
 * Where each counter's count comes from, in one snapshot (typeFigures): the job_totals `events` it
 * sums; `completions`, the execution histogram's count (each completion counted once by its
 * statement); `live`, the type's jobs still in the queue (pending, claimed or running). `failed` is
 * retried + dead; `enqueued` (schema version 15) is every job still in the queue plus those that
 * left it, each counted once by the statement that moved it out, so it only grows.
 */
const COUNTER_SOURCES: Record<
  keyof typeof JOB_COUNTERS,
  { events: readonly string[]; completions?: true; live?: true }
> = {
  enqueued: { events: ["dead", "cancelled"], completions: true, live: true },
  completed: { events: [], completions: true },
  failed: { events: ["retried", "dead"] },
  retried: { events: ["retried"] },
  dead: { events: ["dead"] },
  cancelled: { events: ["cancelled"] },
  fenced: { events: ["fenced"] },
  overdue: { events: ["overdue"] },
};

/** A type's global limits, as the metrics read them. */
type Limit = QueueMetrics["typeLimits"][number];

/** One scrape's figures: the JSON metrics and the figures by type. */
interface Snapshot {
  metrics: QueueMetrics;
  types: TypeFigures;
}

export class DatabaseMetrics {
  readonly registry = new Registry();
  private snapshot: Snapshot | null = null;
  /** Scrapes run one after another, so that a text body never mixes two snapshots. */
  private queue: Promise<unknown> = Promise.resolve();

  /**
   * @param ledger the ledger read at each scrape.
   * @param workerLivenessSeconds a worker counts as live if its heartbeat is younger than this.
   */
  constructor(
    private readonly ledger: Ledger,
    private readonly workerLivenessSeconds: number,
  ) {
    processMetrics(this.registry);
    const r = this.registry;
    for (const [event, help] of Object.entries(JOB_COUNTERS) as [keyof typeof JOB_COUNTERS, string][])
      snapshotMetric(r, {
        name: `taskqueue_jobs_${event}_total`,
        help: `${help} By job type, database-wide, since schema version 8.`,
        type: "counter",
        samples: () => this.counterSamples(event),
      });
    for (const [metric, name, help] of [
      ["execution", "taskqueue_job_execution_seconds", "Execution time of completed jobs, by type."],
      [
        "queue_wait",
        "taskqueue_job_queue_wait_seconds",
        "Time from due (run_at) to claimed, of the attempt that completed, by type.",
      ],
    ] as const)
      snapshotMetric(r, {
        name,
        help: `${help} Database-wide.`,
        type: "histogram",
        samples: () => this.histogram(name, metric),
      });
    snapshotMetric(r, {
      name: "taskqueue_queue_depth",
      help: "Jobs per status, database-wide.",
      type: "gauge",
      samples: () =>
        JOB_STATUSES.map((status) => ({
          labels: { status },
          value: this.snapshot?.metrics.depth[status] ?? 0,
        })),
    });
    snapshotMetric(r, {
      name: "taskqueue_queue_depth_by_type",
      help: "Pending, claimed and running jobs per type (pending includes jobs scheduled for later).",
      type: "gauge",
      samples: () =>
        (this.snapshot?.types.live ?? []).map((l) => ({
          labels: { status: l.status, type: l.type },
          value: l.jobs,
        })),
    });
    snapshotMetric(r, {
      name: "taskqueue_oldest_pending_age_seconds",
      help: "Age of the oldest pending job already due (now - run_at), per type; 0 when none is due.",
      type: "gauge",
      samples: () =>
        (this.snapshot?.types.live ?? [])
          .filter((l) => l.status === "pending")
          .map((l) => ({ labels: { type: l.type }, value: l.oldestDueSeconds ?? 0 })),
    });
    snapshotMetric(r, {
      name: "taskqueue_type_paused",
      help: "1 for a paused type (no worker claims its jobs), 0 for other types with live jobs.",
      type: "gauge",
      samples: () => this.pausedSamples(),
    });
    for (const [name, help, value] of [
      [
        "taskqueue_type_limit_max_running",
        "A limited type's global limit of held jobs (claimed or running), per type with that limit.",
        (l: Limit) => l.maxRunning,
      ],
      [
        "taskqueue_type_limit_rate_per_second",
        "A limited type's global limit of starts per second, per type with that limit.",
        (l: Limit) => l.ratePerSecond,
      ],
    ] as const)
      snapshotMetric(r, {
        name,
        help,
        type: "gauge",
        samples: () =>
          (this.snapshot?.metrics.typeLimits ?? []).flatMap((l) => {
            const v = value(l);
            return v === null ? [] : [{ labels: { type: l.type }, value: v }];
          }),
      });
    snapshotMetric(r, {
      name: "taskqueue_unhandled_pending_jobs",
      help: "Pending jobs of a type that no live worker claims, per type (absent: some worker claims it).",
      type: "gauge",
      samples: () =>
        (this.snapshot?.metrics.unhandledTypes ?? []).map((t) => ({
          labels: { type: t.type },
          value: t.pending,
        })),
    });
    snapshotMetric(r, {
      name: "taskqueue_unhandled_oldest_pending_age_seconds",
      help: "Age of the oldest due pending job of a type that no live worker claims (now - run_at); 0 when none is due.",
      type: "gauge",
      samples: () =>
        (this.snapshot?.metrics.unhandledTypes ?? []).map((t) => ({
          labels: { type: t.type },
          value: t.oldestPendingAgeSeconds ?? 0,
        })),
    });
    snapshotMetric(r, {
      name: "taskqueue_active_workers",
      help: "Live workers: lock sessions (one per worker process, or per lane) with a fresh heartbeat.",
      type: "gauge",
      samples: () => [{ labels: {}, value: this.snapshot?.metrics.activeWorkers ?? 0 }],
    });
    snapshotMetric(r, {
      name: "taskqueue_dead_letter_jobs",
      help: "Dead-letter entries whose job waits dead (not replayed since it died).",
      type: "gauge",
      samples: () => [{ labels: {}, value: this.snapshot?.metrics.deadLetterCount ?? 0 }],
    });
  }

  /**
   * Reads the database (two statements) and renders the registry in the text exposition format.
   * @throws the database error; nothing is rendered then.
   */
  render(): Promise<string> {
    const run = async (): Promise<string> => {
      const [metrics, types] = await Promise.all([
        this.ledger.metrics(this.workerLivenessSeconds),
        this.ledger.typeFigures(),
      ]);
      this.snapshot = { metrics, types };
      return this.registry.metrics();
    };
    const result = this.queue.then(run, run);
    this.queue = result.catch(() => undefined);
    return result;
  }

  /** `taskqueue_type_paused`: 1 per paused type, 0 per other type with live jobs, in type order. */
  private pausedSamples(): Sample[] {
    const s = this.snapshot;
    if (!s) return [];
    const byType = new Map<string, number>(s.types.live.map((l) => [l.type, 0]));
    for (const p of s.metrics.pausedTypes) byType.set(p.type, 1);
    return [...byType]
      .sort(([a], [b]) => (a < b ? -1 : 1))
      .map(([type, value]) => ({ labels: { type }, value }));
  }

  /** Every type seen in a counter, a histogram or the live jobs, so that each counter has a series per type. */
  private knownTypes(): string[] {
    const s = this.snapshot;
    if (!s) return [];
    const types = new Set<string>();
    for (const t of s.types.totals) types.add(t.type);
    for (const h of s.types.histogram) types.add(h.type);
    for (const l of s.types.live) types.add(l.type);
    return [...types].sort();
  }

  private counterSamples(event: keyof typeof JOB_COUNTERS): Sample[] {
    const s = this.snapshot;
    if (!s) return [];
    const byType = new Map<string, number>(this.knownTypes().map((t) => [t, 0]));
    const add = (type: string, n: number) => byType.set(type, (byType.get(type) ?? 0) + n);
    const source = COUNTER_SOURCES[event];
    for (const t of s.types.totals) if (source.events.includes(t.event)) add(t.type, t.count);
    if (source.completions)
      for (const h of s.types.histogram) if (h.metric === "execution") add(h.type, h.count);
    if (source.live) for (const l of s.types.live) add(l.type, l.jobs);
    return [...byType].map(([type, value]) => ({ labels: { type }, value }));
  }

  private histogram(name: string, metric: "execution" | "queue_wait"): Sample[] {
    const s = this.snapshot;
    if (!s) return [];
    const byType = new Map<string, { counts: number[]; sum: number }>();
    for (const h of s.types.histogram) {
      if (h.metric !== metric) continue;
      let entry = byType.get(h.type);
      if (!entry) {
        entry = { counts: [], sum: 0 };
        byType.set(h.type, entry);
      }
      entry.counts[h.bucket] = (entry.counts[h.bucket] ?? 0) + h.count;
      entry.sum += h.sumSeconds;
    }
    return [...byType]
      .sort(([a], [b]) => (a < b ? -1 : 1))
      .flatMap(([type, e]) => histogramSamples(name, { type }, HISTOGRAM_BOUNDS_SECONDS, e.counts, e.sum));
  }
}
