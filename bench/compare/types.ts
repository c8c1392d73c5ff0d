/**
 * The contract every system adapter of `npm run bench:compare` implements, and the shapes the
 * runner passes around. An adapter knows how to talk to one queue system; the runner decides what
 * to measure, times it, bounds it and prints it.
 */
import type { Admin } from "./harness.js";

/** Rows of the comparison, in the order they run and print. */
export const SYSTEMS = [
  "taskqueue",
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

  /** Creates a fresh schema (or key prefix) and everything the system needs in it. */
  setup(): Promise<void>;
  /** Enqueues `count` noop jobs in batches of `batchSize` with the system's bulk call, one batch at a time. */
  enqueueBulk(count: number, batchSize: number, signal: AbortSignal): Promise<void>;
  /** Enqueues `count` noop jobs one call per job, `inFlight` calls at once. */
  enqueueSingle(count: number, inFlight: number, signal: AbortSignal): Promise<void>;
  /**
   * Starts the workers on `count` jobs already enqueued and resolves with the milliseconds from
   * just before the start to the last handler call. Workers are stopped before it resolves.
   */
  drain(count: number, signal: AbortSignal): Promise<number>;
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
}

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
    },
    backend,
    missing: {},
    bulkRuns: [],
    drainRuns: [],
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
