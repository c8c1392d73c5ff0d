/** Shapes of the job ledger (DESIGN.md §3). */

/** Any value JSON can hold. */
export type JsonValue = null | boolean | number | string | JsonValue[] | { [key: string]: JsonValue };

/** Lifecycle states (DESIGN.md §4). */
export const JOB_STATUSES = ["pending", "claimed", "running", "done", "dead", "cancelled"] as const;
export type JobStatus = (typeof JOB_STATUSES)[number];

/** What to enqueue. Validated by {@link validateJobSpec} before anything is written. */
export interface JobSpec {
  /** Handler name, 1–200 characters. */
  type: string;
  /** Any JSON value without NUL characters (PostgreSQL's jsonb cannot store them). Default `{}`. */
  payload?: JsonValue;
  /** 1–10, 10 most urgent. Default 5. */
  priority?: number;
  /** 0–10: at most `maxRetries + 1` executions. Default 3. */
  maxRetries?: number;
  /** Not before this instant. A string must carry a UTC offset (`Z` or `+02:00`). Default now. */
  runAt?: Date | string;
  /**
   * 1–255 characters. While a job enqueued with this key exists (in any state, for
   * `idempotencyWindowSeconds` after it was created), enqueueing it again creates nothing and
   * answers that job; with a different body it is refused with an `IdempotencyConflictError`.
   * Default none.
   */
  idempotencyKey?: string;
  /**
   * 1–604800 whole seconds: how long one attempt may run. At the deadline the handler's
   * AbortSignal fires with a `JobTimeoutError` and the attempt fails (and is retried as any
   * failure). Default: the worker's `jobTimeoutSeconds`, or no bound.
   */
  timeoutSeconds?: number;
}

/** One entry of a job's attempt history: a failed attempt. */
export interface AttemptError {
  /** 0-based number of the attempt that failed. */
  attempt: number;
  error: string;
  worker_id: string | null;
  failed_at: string;
  /** Present, and true, when the attempt failed permanently (a `PermanentJobError`): no retry followed. */
  permanent?: true;
}

/** A job as the ledger stores it. Timestamps come from the database clock. */
export interface Job {
  id: number;
  type: string;
  payload: JsonValue;
  status: JobStatus;
  priority: number;
  /** Failed attempts so far (starts at 0). */
  attempt: number;
  maxRetries: number;
  runAt: Date;
  claimedAt: Date | null;
  startedAt: Date | null;
  heartbeatAt: Date | null;
  completedAt: Date | null;
  result: JsonValue | null;
  /** Error of the latest failed attempt. */
  error: string | null;
  /** Every failed attempt, oldest first. */
  errors: AttemptError[];
  workerId: string | null;
  createdAt: Date;
  /** The idempotency key it was enqueued with, or null (also once the key expired and was reused). */
  idempotencyKey: string | null;
  /** Bound of one attempt's run time, seconds, as enqueued; null: the worker's default (if any). */
  timeoutSeconds: number | null;
  /**
   * The latest progress its handler reported (`job.progress(value)`, any attempt), or null
   * (schema version 12).
   */
  progress: JsonValue | null;
  /**
   * Lists only: true when listJobs left the payload out (null) because it is larger than
   * `LIMITS.listValueBytes` (64 KiB); false when it is there. Other reads leave the flag out.
   */
  payloadOmitted?: boolean;
  /** Likewise for the result. */
  resultOmitted?: boolean;
}

/**
 * A job as a claim hands it to a worker: what a handler needs (DESIGN.md §7). `attempt` counts
 * the failed attempts before this one (0 on the first execution).
 */
export type ClaimedJob = Pick<
  Job,
  "id" | "type" | "payload" | "priority" | "attempt" | "maxRetries" | "timeoutSeconds"
>;

/**
 * A row of dead_letter_jobs: a job that exhausted its retries (or failed permanently), as it was
 * when it died. It stays when the job is replayed (`replayedAt` set) and is refreshed if the job
 * dies again.
 */
export interface DeadLetterJob {
  jobId: number;
  type: string;
  payload: JsonValue;
  priority: number;
  maxRetries: number;
  error: string | null;
  attempts: number;
  errors: AttemptError[];
  workerId: string | null;
  createdAt: Date;
  diedAt: Date;
  /** When the entry was last replayed (its job sent back to pending); null while the job waits dead. */
  replayedAt: Date | null;
  /** How many times it was replayed. */
  replays: number;
  /** Lists only: true when the payload is over `LIMITS.listValueBytes` and left out (null). */
  payloadOmitted?: boolean;
}

/** Filters of {@link Ledger.listJobs}. */
export interface ListJobsQuery {
  status?: JobStatus;
  type?: string;
  createdAfter?: Date;
  /** 1–1000. Default 50. */
  limit?: number;
  /** Default 0. */
  offset?: number;
}

/** Queue figures read from the database (GET /metrics), covering every worker process. */
export interface QueueMetrics {
  /** Jobs per status, every status present. */
  depth: Record<JobStatus, number>;
  /** Worker processes with a fresh heartbeat. */
  activeWorkers: number;
  /** Jobs completed per second over the trailing window. */
  jobsPerSecond: number;
  /** Failed attempts / finished attempts over the trailing window (0 when none finished). */
  errorRate: number;
  /** Mean execution time of jobs completed in the trailing window, seconds (null: none). */
  averageExecutionSeconds: number | null;
  /**
   * Execution-time quantiles of the jobs completed in the trailing window, seconds, estimated from
   * a histogram of eight bins per doubling (exact when a bin's jobs took the same time, within 9 %
   * otherwise); null when none completed. `samples`: the jobs they come from.
   */
  executionSecondsQuantiles: { p50: number | null; p90: number | null; p99: number | null; samples: number };
  /** Dead-letter entries whose job waits dead (replayed ones are not counted). */
  deadLetterCount: number;
  /** Completions and failures refused by the claim fence (late writers), summed over live workers. */
  fencedWrites: number;
  /** Length of the trailing window, seconds. */
  windowSeconds: number;
  /** Paused types (claims skip them), in type order, with when each was paused. */
  pausedTypes: { type: string; pausedAt: Date }[];
  /**
   * Types with global limits (issue 13, item 3; `setTypeLimit`), in type order: at most
   * `maxRunning` held at once, at most `ratePerSecond` starts per second (null: that limit unset),
   * `burst` the token bucket as set (null: the default, ceil(ratePerSecond)).
   */
  typeLimits: {
    type: string;
    maxRunning: number | null;
    ratePerSecond: number | null;
    burst: number | null;
  }[];
  /**
   * Types with pending jobs that no live worker claims, in type order: how many are pending and
   * the age of the oldest due one (seconds; null when none is due yet).
   */
  unhandledTypes: { type: string; pending: number; oldestPendingAgeSeconds: number | null }[];
}

/** A live worker process, as its heartbeat row says. */
export interface WorkerInfo {
  id: string;
  host: string;
  pid: number;
  /** Job types it claims. */
  types: string[];
  concurrency: number;
  fencedWrites: number;
  startedAt: Date;
  heartbeatAt: Date;
  /** Jobs it holds now (claimed or running). */
  heldJobs: number;
}
