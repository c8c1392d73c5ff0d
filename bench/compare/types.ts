/**
 * The contract every system adapter of `npm run bench:compare` implements, and the shapes the
 * runner passes around. An adapter knows how to talk to one queue system; the runner decides what
 * to measure, times it, bounds it and prints it.
 */
import type { Admin } from "./harness.js";

/** Rows of the comparison, in the order they run and print. */
export const SYSTEMS = [
  "taskqueue",
  "taskqueue-baseline",
  "taskqueue-2-sessions",
  "taskqueue-http",
  "pg-boss",
  "pg-boss-batch",
  "graphile-worker",
  "bullmq",
  "bullmq-redis",
  "sql-floor",
] as const;
export type SystemName = (typeof SYSTEMS)[number];

/**
 * The row `--baseline DIR` adds: the `taskqueue` row's adapter on the library of another build
 * (`DIR/dist/src/index.js`). Not a choice of `--only`.
 */
export const BASELINE: SystemName = "taskqueue-baseline";

/** The systems `--only` accepts (default: all of them). */
export const SELECTABLE: readonly SystemName[] = SYSTEMS.filter((s) => s !== BASELINE);

/** The peers taskqueue is compared with ("best peer" is taken among these). */
export const PEERS: readonly SystemName[] = ["pg-boss", "pg-boss-batch", "graphile-worker", "bullmq"];

/** The peers that run one handler call per job (the drain's "best peer" is taken among these). */
export const PER_JOB_PEERS: readonly SystemName[] = ["pg-boss", "graphile-worker", "bullmq"];

/** Measurements, in the order of the issue: (a) … (e). */
export type Phase = "enqueueBulk" | "enqueueSingle" | "drain" | "pickup" | "claim1m";

/** The payload of every benchmark job: `i` identifies a pickup sample (-1 otherwise). */
export interface BenchPayload {
  i: number;
}

/** Called by a system's job handler as its first statement, once per job. */
export type JobSink = (payload: BenchPayload) => void;

/** Shared settings of one run. */
export interface BenchContext {
  databaseUrl: string;
  redisUrl: string;
  /** Unique per run (contains the pid): prefixes schemas, queue names and Redis keys. */
  runId: string;
  /** `--baseline DIR`: the other build's checkout (absolute), whose library the baseline row loads; or null. */
  baselineDir: string | null;
  /** The admin connection (schema drops, seeds). */
  admin: Admin;
  /** Progress lines (stderr). */
  log(message: string): void;
}

/** What {@link SystemAdapter.pickup} observed. */
export interface PickupResult {
  /** Pickup latency of each sample that was picked up, ms. */
  latencies: number[];
  /** Samples enqueued but not picked up before the wait ended. */
  missing: number;
}

/**
 * One system under test. Every method may assume `setup()` ran; every phase may be cut short by
 * `signal` (the runner's per-phase timeout) and must then stop its loops promptly.
 */
export interface SystemAdapter {
  readonly system: SystemName;
  /** One short line: the settings that matter for the figures. */
  readonly settings: string;
  /** Where the jobs live, e.g. "PostgreSQL 15.x, schema bench_cmp_…" or "Redis 7 at 127.0.0.1:6379". */
  readonly backend: string;
  /** Phases this system cannot run, with the reason printed in place of a figure. */
  readonly unsupported: Partial<Record<Phase, string>>;
  /** Remarks collected while running, printed under the table. */
  readonly notes: string[];
  /** Why the CPU figures are not measured (e.g. the work is done by a server not counted); absent: measured. */
  readonly cpuUnsupported?: string;
  /** Processes of the system besides the child's own (a server it started), for the CPU figures. */
  processIds?(): number[];

  /** Creates a fresh schema (or key prefix) and everything the system needs in it. */
  setup(): Promise<void>;
  /** Enqueues `count` noop jobs in batches of `batchSize` with the system's bulk call, one batch at a time. */
  enqueueBulk(count: number, batchSize: number, signal: AbortSignal): Promise<void>;
  /** Enqueues `count` noop jobs one call per job, `inFlight` calls at once. */
  enqueueSingle(count: number, inFlight: number, signal: AbortSignal): Promise<void>;
  /**
   * Starts the workers on `count` jobs already enqueued and resolves with the milliseconds from
   * just before the start to the last handler call. Workers are stopped before it resolves;
   * `drained`, if given, is awaited once every job was handled, before they stop (the CPU reading:
   * stopping closes connections whose backends' CPU time would be lost).
   */
  drain(count: number, signal: AbortSignal, drained?: () => Promise<void>): Promise<number>;
  /**
   * With a worker started and idle, enqueues one job every `intervalMs` (`samples` of them) and
   * returns, per job, handler start − the instant just before its enqueue call.
   */
  pickup(samples: number, intervalMs: number, signal: AbortSignal): Promise<PickupResult>;
  /** Inserts `count` jobs in the system's finished state with one INSERT … SELECT generate_series. */
  seedFinished(count: number, signal: AbortSignal): Promise<void>;
  /** Deletes every job (between phases). */
  clear(): Promise<void>;
  /** Stops whatever still runs (after a timed-out phase). Never throws. */
  abort(): Promise<void>;
  /** Closes every connection and drops the schema (or keys). Never throws. */
  teardown(): Promise<void>;
}

/** One row of bench/results/compare-latest.json (null where not applicable or not measured). */
export interface ResultRow {
  system: SystemName;
  settings: string;
  enqueue_bulk_per_s: number | null;
  enqueue_single_per_s: number | null;
  drain_per_s: number | null;
  pickup_p50_ms: number | null;
  pickup_p99_ms: number | null;
  claim_latency_ratio_1m: number | null;
  /**
   * CPU time per job of (a), (b) and (c), µs: the system's processes and the PostgreSQL backends
   * serving them, over the timed call (cpu.ts); for (c) from the workers' start to their stop.
   */
  enqueue_bulk_cpu_us_per_job: number | null;
  enqueue_single_cpu_us_per_job: number | null;
  drain_cpu_us_per_job: number | null;
}

/** The figures measured once per pass, so once per round when passes are interleaved. */
export type RoundFigure = Exclude<keyof ResultRow, "system" | "settings" | "claim_latency_ratio_1m">;

/**
 * One round's figures of one system: round r holds pass r of (a) and (c), and, interleaved, of (b)
 * and (d) too (run once otherwise: round 1). null: the pass failed or timed out; absent: not run.
 */
export type RoundFigures = Partial<Record<RoundFigure, number | null>>;

/** Why a figure is missing: not applicable to this system, or failed / timed out. */
export type Missing = { kind: "n/a"; reason: string } | { kind: "failed"; reason: string };

/** Everything measured for one system, with the raw figures behind the JSON row. */
export interface SystemReport {
  row: ResultRow;
  backend: string;
  missing: Partial<Record<keyof ResultRow, Missing>>;
  /** Bulk enqueue rate of each repeat, jobs/s. */
  bulkRuns: number[];
  /** Drain rate of each repeat, jobs/s. */
  drainRuns: number[];
  /** Figures by round (index 0 = round 1), for the paired ratios of an interleaved run. */
  rounds: RoundFigures[];
  /** Phase (e): median pickup ms on the empty table before, with the finished rows, and after. */
  claim: {
    emptyBeforeMs: number | null;
    seededMedianMs: number | null;
    emptyAfterMs: number | null;
    /** Mean of the two empty medians: the ratio's denominator. */
    emptyMedianMs: number | null;
    seedSeconds: number | null;
  };
  notes: string[];
}

/** A report with no figures yet: every value null, nothing missing, no notes. */
export function blankReport(system: SystemName, settings: string, backend: string): SystemReport {
  return {
    row: {
      system,
      settings,
      enqueue_bulk_per_s: null,
      enqueue_single_per_s: null,
      drain_per_s: null,
      pickup_p50_ms: null,
      pickup_p99_ms: null,
      claim_latency_ratio_1m: null,
      enqueue_bulk_cpu_us_per_job: null,
      enqueue_single_cpu_us_per_job: null,
      drain_cpu_us_per_job: null,
    },
    backend,
    missing: {},
    bulkRuns: [],
    drainRuns: [],
    rounds: [],
    claim: {
      emptyBeforeMs: null,
      seededMedianMs: null,
      emptyAfterMs: null,
      emptyMedianMs: null,
      seedSeconds: null,
    },
    notes: [],
  };
}
