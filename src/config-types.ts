/**
 * The configuration's shape: {@link ResolvedConfig}, every option taskqueue can be told, and the
 * library's {@link TaskQueueOptions}. Its schema (environment variables, defaults, ranges) is
 * config-schema.ts, which checks that the two agree; resolving is config.ts.
 */
/** How log lines are written (see {@link ResolvedConfig.logFormat}). */
export type LogFormat = "auto" | "json" | "pretty";

/** Log levels understood by the logger (pino's names). */
export type LogLevel = "fatal" | "error" | "warn" | "info" | "debug" | "trace" | "silent";

/** Everything taskqueue can be told. All fields are optional in {@link TaskQueueOptions}. */
export interface ResolvedConfig {
  /** PostgreSQL connection string. Unset: the CLI starts an embedded PostgreSQL. */
  databaseUrl: string | undefined;
  /** Schema holding every taskqueue table. Default `"taskqueue"`. Never `public`. */
  schema: string;
  /** NOTIFY channel that wakes workers on insert. Default `"job_channel"`. Applied by migrate. */
  notifyChannel: string;
  /** Interface the HTTP API binds to. Default `"127.0.0.1"` (the Docker image sets `0.0.0.0`). */
  host: string;
  /** HTTP API port. Default 8000. */
  port: number;
  /**
   * Bearer token every API route but `/health`, `/ready`, `/docs` and `/ui` requires (at least 16
   * characters). From the environment: `TASKQUEUE_API_TOKEN`, or a file named by
   * `TASKQUEUE_API_TOKEN_FILE`. Default: none, and then the API binds only to a loopback address.
   */
  apiToken: string | undefined;
  /** Let the API serve without a token on a non-loopback address (`--insecure-no-auth`). Default false. */
  insecureNoAuth: boolean;
  /**
   * PEM certificate file (the server's certificate, then any intermediates) the API serves HTTPS
   * with, together with `tlsKeyFile`; both are read once at start. Default: none, plain HTTP.
   */
  tlsCertFile: string | undefined;
  /** PEM private key file of `tlsCertFile` (unencrypted). Default: none. */
  tlsKeyFile: string | undefined;
  /** Handlers run at once by one worker process. Default 4. */
  workerCount: number;
  /**
   * Jobs one worker process holds at once (running plus claimed and waiting), hence advisory locks
   * held by its lock session. Default: `workerCount`. Capped at start-up to an eighth of the
   * server's lock table (`max_locks_per_transaction` × server processes; 976 on a default server).
   */
  prefetch: number | undefined;
  /**
   * Lock sessions per worker process. Each claims and writes its own batches on its own
   * connection (plus a LISTEN connection), with its share of `workerCount` and `prefetch`, so the
   * database works on several batches at once. Default 1; 2 drained about 15 % faster on two cores
   * (docs/performance.md). At most `workerCount`.
   */
  lockSessions: number;
  /**
   * Port on which a worker process serves its own metrics (GET /metrics, Prometheus text: this
   * process's job counters and process metrics). Default: none (not served); 0 picks a free port.
   */
  workerMetricsPort: number | undefined;
  /** Interface the worker's metrics port binds to. Default `"127.0.0.1"`. */
  workerMetricsHost: string;
  /** Poll for due jobs this often when no NOTIFY arrives. Default 5 s. */
  pollIntervalSeconds: number;
  /** Touch `heartbeat_at` of every held job and of the worker row this often. Default 10 s. */
  heartbeatIntervalSeconds: number;
  /** Run the stale-job reaper this often. Default 15 s. */
  reaperIntervalSeconds: number;
  /** A claimed/running job whose heartbeat is older than this (and unlocked) is reclaimed. Default 30 s. */
  staleThresholdSeconds: number;
  /** On SIGTERM/stop(), wait this long for running handlers before aborting them. Default 60 s. */
  shutdownGraceSeconds: number;
  /** Bound on opening a connection (TCP, TLS, authentication) and on waiting for a free pooled one. Default 5 s. */
  connectTimeoutSeconds: number;
  /** Server `statement_timeout` of every connection, the deadline of an outcome write (the client waits a little longer). Default 30 s. */
  statementTimeoutSeconds: number;
  /** Deadline of a heartbeat, claim, unlock or ping; missed, the session is lost. Default 5 s. */
  heartbeatTimeoutSeconds: number;
  /**
   * Deadline of a whole `migrate` run (its transaction's `statement_timeout`, and the client's
   * wait): rebuilding an index of a large jobs table, or waiting for another process's migration,
   * may take far longer than a statement. Default 3600 s.
   */
  migrationTimeoutSeconds: number;
  /** Connections of the shared pool (and of the service's own API pool). Default 10. */
  poolSize: number;
  /** The API answers 503 when a database call of a request takes longer. Default 4 s. */
  apiTimeoutSeconds: number;
  /** Sandboxed handlers: after an abort, wait this long for the child process, then SIGKILL. Default 5 s. */
  handlerKillGraceSeconds: number;
  /** Retry delay after failed attempt a (0-based) is min(base * 2^a, max). Default base 1 s. */
  backoffBaseSeconds: number;
  /** Upper bound of the retry delay. Default 3600 s. */
  backoffMaxSeconds: number;
  /** Multiply each retry delay by a random factor in [0.5, 1] ("equal jitter"). Default true. */
  backoffJitter: boolean;
  /** Most pending jobs, a soft cap (src/queue/capacity.ts): past it, QueueFullError / 429. Default 0: none. */
  maxPendingJobs: number;
  /** The same cap for each job type. Default 0: none. */
  maxPendingJobsPerType: number;
  /** Request-body bytes the API holds at once; past it, 503 before reading. Default 64 MiB; 0: none. */
  apiMaxInflightBodyBytes: number;
  /**
   * Enqueue only jobs of these types (`POST /jobs` answers 422 naming `type` for any other, and the
   * library's enqueue throws `JobValidationError`). From the environment: comma-separated. Default:
   * any type.
   */
  allowedJobTypes: string[] | undefined;
  /** How long a job holds its idempotency key after it was created; 0: while the job exists. Default 86400 s. */
  idempotencyWindowSeconds: number;
  /** Done and cancelled jobs are deleted this long after they finished; 0: kept for ever. Default 604800 s (7 days). */
  retainDoneSeconds: number;
  /** Dead jobs and their dead-letter entries are deleted this long after they died; 0: kept for ever. Default 2592000 s (30 days). */
  retainDeadSeconds: number;
  /** A worker process that runs the reaper starts a pruning pass this often (one process at a time). Default 60 s. */
  pruneIntervalSeconds: number;
  /**
   * Log format: `json` (one JSON object per line), `pretty` (human-readable, pino-pretty) or `auto`
   * (pretty when stdout is a terminal, else JSON). Default `"auto"`.
   */
  logFormat: LogFormat;
  /** Every worker process runs a scheduler pass this often (and at each schedule's next tick). Default 10 s. */
  schedulerIntervalSeconds: number;
  /** Most ticks one schedule enqueues in one pass, hence after a downtime with catch-up. Default 100. */
  scheduleCatchUpLimit: number;
  /** A schedule without catch-up skips a tick found later than this. Default 60 s. */
  scheduleMisfireSeconds: number;
  /** Log level. Default `"info"`. */
  logLevel: LogLevel;
  /**
   * What sits between taskqueue and PostgreSQL (README, "PgBouncer"). `"auto"` (default): the CLI
   * probes at start; `"session"`: PostgreSQL or a session-mode pool, no probe; `"transaction"`: a
   * transaction-mode pooler, so statements go out unnamed and workers refuse to start.
   */
  databasePooling: DatabasePooling;
}

/** Values of `databasePooling`. */
export type DatabasePooling = "auto" | "session" | "transaction";

/** The library's options object: any subset of {@link ResolvedConfig}. */
export type TaskQueueOptions = Partial<ResolvedConfig>;
