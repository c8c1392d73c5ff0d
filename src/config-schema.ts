/**
 * The configuration's schema: {@link CONFIG_SCHEMA} (the interface is config-types.ts), one
 * TypeBox property per option with its environment variable (`env`), default, range, pattern or
 * enum, and a description (DESIGN.md §9). Resolving and reading the environment is config.ts.
 */
import { type Static, Type } from "@sinclair/typebox";

export type {
  DatabasePooling,
  LogFormat,
  LogLevel,
  ResolvedConfig,
  TaskQueueOptions,
} from "./config-types.js";

import type { LogLevel, ResolvedConfig } from "./config-types.js";

const LOG_LEVELS = [
  "fatal",
  "error",
  "warn",
  "info",
  "debug",
  "trace",
  "silent",
] as const satisfies readonly LogLevel[];

/** The most handlers one worker process runs at once (`WORKER_COUNT`). */
export const MAX_WORKER_COUNT = 10_000;

/** Lower-case SQL identifier: what `schema` and `notifyChannel` accept. */
const IDENTIFIER = "^[a-z_][a-z0-9_]{0,62}$";

/** Keywords of our own on each property: its variable, and the words naming its pattern. */
export interface ConfigKeywords {
  /** Environment variable behind the option, e.g. `"PORT"`. */
  env: string;
  /** What the pattern means, for the message refusing a value that does not match it. */
  patternHint?: string;
}

const seconds = (env: string, def: number, what: string, minimum = 0.001, maximum = 86_400) =>
  Type.Number({
    env,
    default: def,
    minimum,
    maximum,
    description: `${what}. Default ${def} s; seconds, from ${minimum} to ${maximum}.`,
  });

/** A whole-number option from 0 to `maximum` (the backpressure limits). */
const whole = (env: string, def: number, maximum: number, description: string) =>
  Type.Integer({ env, default: def, minimum: 0, maximum, description });

/**
 * Every option: its environment variable (`env`), default, range (`minimum`/`maximum`, whole
 * numbers as `Type.Integer`), pattern or enum, and a description giving default and unit
 * (DESIGN.md §6 and §9). Options without a default (`databaseUrl`, `prefetch`) are optional.
 * Cross-field rules (schema not `public`, max ≥ base, stale > heartbeat, URL scheme) are checked
 * by {@link resolveConfig} after the schema. The property order is the order of the checks.
 */
export const CONFIG_SCHEMA = Type.Object({
  databaseUrl: Type.Optional(
    Type.String({
      env: "DATABASE_URL",
      minLength: 1,
      description:
        "PostgreSQL connection string (postgres:// or postgresql://). No default: the CLI starts an embedded PostgreSQL.",
    }),
  ),
  schema: Type.String({
    env: "TASKQUEUE_SCHEMA",
    default: "taskqueue",
    minLength: 1,
    pattern: IDENTIFIER,
    patternHint: "a lower-case SQL identifier (letters, digits, _), not starting with a digit",
    description: 'Schema holding every taskqueue table. Default "taskqueue"; never public or pg_*.',
  }),
  notifyChannel: Type.String({
    env: "TASKQUEUE_NOTIFY_CHANNEL",
    default: "job_channel",
    minLength: 1,
    pattern: IDENTIFIER,
    patternHint: "a lower-case SQL identifier",
    description: 'NOTIFY channel that wakes workers on insert. Default "job_channel". Applied by migrate.',
  }),
  host: Type.String({
    env: "HOST",
    default: "127.0.0.1",
    minLength: 1,
    description: 'Interface the HTTP API binds to. Default "127.0.0.1".',
  }),
  port: Type.Integer({
    env: "PORT",
    default: 8000,
    minimum: 0,
    maximum: 65_535,
    description: "HTTP API port. Default 8000; a TCP port number, 0 to 65535.",
  }),
  apiToken: Type.Optional(
    Type.String({
      env: "TASKQUEUE_API_TOKEN",
      minLength: 1,
      description:
        "Bearer token of every API route but /health, /ready, /docs and /ui; at least 16 characters. No default: without it the API binds to loopback only.",
    }),
  ),
  insecureNoAuth: Type.Boolean({
    env: "TASKQUEUE_INSECURE_NO_AUTH",
    default: false,
    description:
      "Serve the API without a token on a non-loopback address (--insecure-no-auth). Default false.",
  }),
  tlsCertFile: Type.Optional(
    Type.String({
      env: "TLS_CERT_FILE",
      minLength: 1,
      description:
        "PEM certificate (chain) file: the API serves HTTPS, with TLS_KEY_FILE. No default: plain HTTP.",
    }),
  ),
  tlsKeyFile: Type.Optional(
    Type.String({
      env: "TLS_KEY_FILE",
      minLength: 1,
      description: "PEM private key file of TLS_CERT_FILE. No default.",
    }),
  ),
  workerCount: Type.Integer({
    env: "WORKER_COUNT",
    default: 4,
    minimum: 1,
    maximum: MAX_WORKER_COUNT,
    description: `Handlers run at once by one worker process. Default 4; a count, 1 to ${MAX_WORKER_COUNT}.`,
  }),
  prefetch: Type.Optional(
    Type.Integer({
      env: "WORKER_PREFETCH",
      minimum: 1,
      maximum: 100_000,
      description: "Jobs one worker process holds at once. Default: workerCount; a count, 1 to 100000.",
    }),
  ),
  lockSessions: Type.Integer({
    env: "WORKER_LOCK_SESSIONS",
    default: 1,
    minimum: 1,
    maximum: 16,
    description: "Lock sessions per worker process. Default 1; a count, 1 to 16.",
  }),
  workerMetricsPort: Type.Optional(
    Type.Integer({
      env: "WORKER_METRICS_PORT",
      minimum: 0,
      maximum: 65_535,
      description:
        "Port of a worker process's own GET /metrics. Default: not served; a TCP port number, 0 (any free port) to 65535.",
    }),
  ),
  workerMetricsHost: Type.String({
    env: "WORKER_METRICS_HOST",
    default: "127.0.0.1",
    minLength: 1,
    description: 'Interface a worker\'s metrics port binds to. Default "127.0.0.1".',
  }),
  pollIntervalSeconds: seconds(
    "POLL_INTERVAL_SECONDS",
    5,
    "Poll for due jobs this often when no NOTIFY arrives",
  ),
  heartbeatIntervalSeconds: seconds(
    "HEARTBEAT_INTERVAL_SECONDS",
    10,
    "Heartbeat of held jobs and the worker row",
  ),
  reaperIntervalSeconds: seconds("REAPER_INTERVAL_SECONDS", 15, "Run the stale-job reaper this often"),
  staleThresholdSeconds: seconds(
    "STALE_THRESHOLD_SECONDS",
    30,
    "Heartbeat age after which an unlocked held job is reclaimed",
  ),
  shutdownGraceSeconds: seconds(
    "SHUTDOWN_GRACE_SECONDS",
    60,
    "Wait this long for running handlers on stop",
    0,
  ),
  connectTimeoutSeconds: seconds(
    "CONNECT_TIMEOUT_SECONDS",
    5,
    "Bound on connecting and on a free pooled connection",
    0.001,
    600,
  ),
  statementTimeoutSeconds: seconds(
    "STATEMENT_TIMEOUT_SECONDS",
    30,
    "Server statement_timeout; deadline of a write",
    0.001,
    3600,
  ),
  heartbeatTimeoutSeconds: seconds(
    "HEARTBEAT_TIMEOUT_SECONDS",
    5,
    "Deadline of a heartbeat or claim",
    0.01,
    600,
  ),
  migrationTimeoutSeconds: seconds(
    "MIGRATION_TIMEOUT_SECONDS",
    3600,
    "Deadline of each statement of a migration run",
    0.001,
    86_400,
  ),
  poolSize: Type.Integer({
    env: "POOL_SIZE",
    default: 10,
    minimum: 1,
    maximum: 1000,
    description: "Connections of the shared pool (and of the API's). Default 10; 1 to 1000.",
  }),
  apiTimeoutSeconds: seconds("API_TIMEOUT_SECONDS", 4, "API wait on the database before 503", 0.001, 600),
  handlerKillGraceSeconds: seconds(
    "HANDLER_KILL_GRACE_SECONDS",
    5,
    "Sandboxed handlers: wait before SIGKILL",
    0.001,
    3600,
  ),
  backoffBaseSeconds: seconds("BACKOFF_BASE_SECONDS", 1, "Retry delay base: min(base * 2^attempt, max)", 0),
  backoffMaxSeconds: seconds("BACKOFF_MAX_SECONDS", 3600, "Upper bound of the retry delay", 0, 31_536_000),
  backoffJitter: Type.Boolean({
    env: "BACKOFF_JITTER",
    default: true,
    description: "Multiply each retry delay by a random factor in [0.5, 1]. Default true.",
  }),
  maxPendingJobs: whole(
    "MAX_PENDING_JOBS",
    0,
    1e12,
    "Most pending jobs in the schema (a soft cap; 429 past it). Default 0: none.",
  ),
  maxPendingJobsPerType: whole("MAX_PENDING_JOBS_PER_TYPE", 0, 1e12, "Per type, the same. Default 0: none."),
  apiMaxInflightBodyBytes: whole(
    "API_MAX_INFLIGHT_BODY_BYTES",
    64 * 1024 * 1024,
    2 ** 40,
    "Request-body bytes the API holds at once (503 past it). Default 67108864 (64 MiB); 0: none.",
  ),
  allowedJobTypes: Type.Optional(
    Type.Array(Type.String({ minLength: 1, maxLength: 200 }), {
      env: "ALLOWED_JOB_TYPES",
      minItems: 1,
      maxItems: 10_000,
      description:
        "Job types an enqueue may name, comma-separated; any other is refused (HTTP 422 naming type). Default: any type.",
    }),
  ),
  idempotencyWindowSeconds: seconds(
    "IDEMPOTENCY_WINDOW_SECONDS",
    86_400,
    "How long a job holds its idempotency key after its creation (0: while it exists)",
    0,
    31_536_000,
  ),
  retainDoneSeconds: seconds(
    "RETAIN_DONE_SECONDS",
    604_800,
    "Delete done and cancelled jobs this long after they finished (0: keep)",
    0,
    315_360_000,
  ),
  retainDeadSeconds: seconds(
    "RETAIN_DEAD_SECONDS",
    2_592_000,
    "Delete dead jobs and their dead-letter entries this long after they died (0: keep)",
    0,
    315_360_000,
  ),
  pruneIntervalSeconds: seconds(
    "PRUNE_INTERVAL_SECONDS",
    60,
    "Start a pruning pass this often, in a worker process that runs the reaper",
    0.01,
    86_400,
  ),
  logFormat: Type.Union([Type.Literal("auto"), Type.Literal("json"), Type.Literal("pretty")], {
    env: "LOG_FORMAT",
    default: "auto",
    description: 'Log format: "json", "pretty" or "auto" (pretty when stdout is a terminal). Default "auto".',
  }),
  schedulerIntervalSeconds: seconds(
    "SCHEDULER_INTERVAL_SECONDS",
    10,
    "Run a scheduler pass this often in every worker process (and at each schedule's next tick)",
    0.01,
    3600,
  ),
  scheduleCatchUpLimit: Type.Integer({
    env: "SCHEDULE_CATCH_UP_LIMIT",
    default: 100,
    minimum: 1,
    maximum: 10_000,
    description: "Most ticks one schedule enqueues in one pass (the latest missed). Default 100; 1 to 10000.",
  }),
  scheduleMisfireSeconds: seconds(
    "SCHEDULE_MISFIRE_SECONDS",
    60,
    "Without catch-up, skip a tick found later than this",
    0,
    86_400,
  ),
  logLevel: Type.Union(
    LOG_LEVELS.map((level) => Type.Literal(level)),
    { env: "LOG_LEVEL", default: "info", description: 'pino log level. Default "info".' },
  ),
  databasePooling: Type.Union(
    (["auto", "session", "transaction"] as const).map((mode) => Type.Literal(mode)),
    {
      env: "DATABASE_POOLING",
      default: "auto",
      description:
        'What sits in front of PostgreSQL: "auto" (probe at start), "session" or "transaction" (a transaction-mode pooler: unnamed statements, no workers). Default "auto".',
    },
  ),
});

// The schema and the interface describe the same fields with the same types (required-ness aside:
// the schema's optional fields are the interface's `| undefined` ones). A change to one without
// the other fails to compile here.
type SchemaConfig = Static<typeof CONFIG_SCHEMA>;
type Same<A, B> = [A] extends [B] ? ([B] extends [A] ? true : false) : false;
const schemaMatchesInterface: Same<Partial<SchemaConfig>, Partial<ResolvedConfig>> &
  Same<ResolvedConfig extends SchemaConfig ? true : false, true> = true;
void schemaMatchesInterface;
