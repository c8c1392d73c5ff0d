/**
 * Configuration: one typed options object for the library, filled from environment variables by
 * the CLI. Rules come from DESIGN.md §9 and live in one TypeBox schema, {@link CONFIG_SCHEMA}:
 * each property carries its environment variable (`env`), default, range, pattern or enum, and a
 * description. Every bad value is reported with the variable or field that holds it (a
 * {@link ConfigError}), at start-up, before anything connects. Nothing is registered with
 * TypeBox's global registries (no format, no kind): the schema uses built-in kinds only.
 */
import { type Static, type TSchema, Type } from "@sinclair/typebox";
import { Value } from "@sinclair/typebox/value";
import { ConfigError } from "./errors.js";

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
  /** Bound on opening a connection (TCP, TLS, authentication). Default 5 s. */
  connectTimeoutSeconds: number;
  /** Deadline of an outcome write (server `statement_timeout`; the client 1 s more). Default 30 s. */
  statementTimeoutSeconds: number;
  /** Deadline of a heartbeat, claim, unlock or ping; missed, the session is lost. Default 5 s. */
  heartbeatTimeoutSeconds: number;
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
  /** Log level. Default `"info"`. */
  logLevel: LogLevel;
}

/** The library's options object: any subset of {@link ResolvedConfig}. */
export type TaskQueueOptions = Partial<ResolvedConfig>;

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
interface ConfigKeywords {
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
  connectTimeoutSeconds: seconds("CONNECT_TIMEOUT_SECONDS", 5, "Bound on opening a connection", 0.1, 600),
  statementTimeoutSeconds: seconds(
    "STATEMENT_TIMEOUT_SECONDS",
    30,
    "Deadline of an outcome write",
    0.1,
    3600,
  ),
  heartbeatTimeoutSeconds: seconds(
    "HEARTBEAT_TIMEOUT_SECONDS",
    5,
    "Deadline of a heartbeat or claim",
    0.01,
    600,
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
  logLevel: Type.Union(
    LOG_LEVELS.map((level) => Type.Literal(level)),
    { env: "LOG_LEVEL", default: "info", description: 'pino log level. Default "info".' },
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

type Field = keyof ResolvedConfig;
type PropertySchema = TSchema & ConfigKeywords & { default?: unknown };
const PROPERTIES = CONFIG_SCHEMA.properties as unknown as Record<Field, PropertySchema>;
const FIELDS = Object.keys(PROPERTIES) as Field[];

/** What a property is, read from its TypeBox kind: decides how a variable is parsed and refused. */
type Shape = "integer" | "number" | "string" | "boolean" | "enum";
function shapeOf(schema: TSchema): Shape {
  switch (schema.type) {
    case "integer":
    case "number":
    case "string":
    case "boolean":
      return schema.type;
    default:
      return "enum";
  }
}

/** The sentence refusing `value` for a property that TypeBox found invalid (today's wording). */
function refusal(schema: PropertySchema, value: unknown): string {
  const shape = shapeOf(schema);
  switch (shape) {
    case "integer":
    case "number":
      if (typeof value !== "number" || !Number.isFinite(value)) return "must be a number";
      if (shape === "integer" && !Number.isInteger(value)) return "must be a whole number";
      return `must be between ${schema.minimum} and ${schema.maximum}, got ${value}`;
    case "string":
      if (typeof value !== "string" || value === "") return "must be a non-empty string";
      return `must be ${schema.patternHint ?? schema.pattern}, got ${JSON.stringify(value)}`;
    case "boolean":
      return "must be true or false";
    case "enum": {
      const values = (schema.anyOf as { const: string }[]).map((literal) => literal.const);
      return `must be one of ${values.join(", ")}, got ${JSON.stringify(value)}`;
    }
  }
}

/**
 * Validates `values` (every field present, defaults applied) against {@link CONFIG_SCHEMA}.
 * @throws {ConfigError} for the first bad field in schema order, named by `name(field)`.
 */
function check(values: Record<string, unknown>, name: (field: Field) => string): void {
  const error = Value.Errors(CONFIG_SCHEMA, values).First();
  if (error === undefined) return;
  // The path of a property's error is "/field" (the schema has no nesting).
  const field = error.path.split("/")[1] as Field;
  throw new ConfigError(name(field), refusal(PROPERTIES[field], values[field]));
}

function parseEnv(schema: PropertySchema, raw: string): unknown {
  const text = raw.trim();
  switch (shapeOf(schema)) {
    case "integer":
    case "number":
      // Plain decimals, as the command line's flags take them: no "+", exponent or hex. A minus
      // sign is read, so that "-1" is refused by the option's range, naming it.
      return /^-?(\d+\.?\d*|\.\d+)$/.test(text) ? Number(text) : Number.NaN;
    case "boolean": {
      const lower = text.toLowerCase();
      if (["1", "true", "yes", "on"].includes(lower)) return true;
      if (["0", "false", "no", "off"].includes(lower)) return false;
      return raw;
    }
    default:
      return text;
  }
}

/**
 * Resolves options: explicit fields win, then the schema's defaults. Validates every field
 * against {@link CONFIG_SCHEMA}, then the cross-field rules. Fields not in the schema are dropped.
 * @throws {ConfigError} naming the first bad field.
 */
export function resolveConfig(options: TaskQueueOptions = {}): ResolvedConfig {
  const given: Record<string, unknown> = {};
  for (const field of FIELDS) given[field] = options[field];
  const values = Value.Default(CONFIG_SCHEMA, given) as Record<string, unknown>;
  check(values, (field) => field);
  const config = values as unknown as ResolvedConfig;
  if (config.schema === "public" || config.schema.startsWith("pg_"))
    throw new ConfigError("schema", `must not be "public" or a pg_ schema`);
  if (config.backoffMaxSeconds < config.backoffBaseSeconds)
    throw new ConfigError("backoffMaxSeconds", "must not be smaller than backoffBaseSeconds");
  if (config.staleThresholdSeconds <= config.heartbeatIntervalSeconds)
    throw new ConfigError(
      "staleThresholdSeconds",
      `must be greater than heartbeatIntervalSeconds (${config.heartbeatIntervalSeconds}); at least twice is advisable, or live workers' jobs are reclaimed`,
    );
  if (config.databaseUrl !== undefined && !isConnectionString(config.databaseUrl))
    throw new ConfigError("databaseUrl", "must be a postgres:// or postgresql:// URL");
  return config;
}

/** Options only the HTTP API uses: a process without it (worker, migrate, inspect) reads neither. */
export const API_ONLY_OPTIONS = ["host", "port"] as const satisfies readonly (keyof ResolvedConfig)[];

/**
 * Reads options from environment variables (DATABASE_URL, PORT, WORKER_COUNT, ...: each
 * property's `env` in {@link CONFIG_SCHEMA}), then resolves them. `overrides` (e.g. CLI flags)
 * win over the environment. The variables of `unused` options (say, {@link API_ONLY_OPTIONS} for
 * a worker) are not read: their defaults stand, whatever they hold.
 * @throws {ConfigError} naming the environment variable at fault.
 */
export function configFromEnv(
  env: NodeJS.ProcessEnv = process.env,
  overrides: TaskQueueOptions = {},
  unused: readonly (keyof ResolvedConfig)[] = [],
): ResolvedConfig {
  const options: Record<string, unknown> = {};
  const given = stripUndefined(overrides);
  for (const field of FIELDS) {
    const schema = PROPERTIES[field];
    const raw = env[schema.env];
    // A variable that an override replaces is not read: its value, good or bad, is not used.
    if (
      raw === undefined ||
      (raw === "" && field === "databaseUrl") ||
      field in given ||
      unused.includes(field)
    )
      continue;
    options[field] = parseEnv(schema, raw);
  }
  // The variables' values alone, each named by its variable, before the overrides join them.
  check(
    Value.Default(CONFIG_SCHEMA, { ...options }) as Record<string, unknown>,
    (field) => PROPERTIES[field].env,
  );
  try {
    return resolveConfig({ ...(options as TaskQueueOptions), ...given });
  } catch (error) {
    // Cross-field checks name option fields; from the environment, name the variables.
    if (!(error instanceof ConfigError)) throw error;
    const schema = PROPERTIES[error.field as Field];
    if (!schema || error.field in given) throw error;
    let message = error.message.slice(error.field.length + 2);
    // Other option fields named in the message (camelCase words such as backoffBaseSeconds) become
    // their variables; plain words ("schema") stay as they are.
    for (const field of FIELDS)
      if (/[A-Z]/.test(field))
        message = message.replace(new RegExp(`\\b${field}\\b`, "g"), PROPERTIES[field].env);
    throw new ConfigError(schema.env, message);
  }
}

function isConnectionString(value: string): boolean {
  try {
    return ["postgres:", "postgresql:", "socket:"].includes(new URL(value).protocol);
  } catch {
    return false;
  }
}

function stripUndefined(options: TaskQueueOptions): TaskQueueOptions {
  return Object.fromEntries(Object.entries(options).filter(([, v]) => v !== undefined)) as TaskQueueOptions;
}

/**
 * Environment variable behind each option, with its default (undefined: none), for `--help` and
 * the README. Read from {@link CONFIG_SCHEMA}, in its order; each property's `description` is there.
 */
export function environmentVariables(): { field: string; env: string; default: unknown }[] {
  return FIELDS.map((field) => ({ field, env: PROPERTIES[field].env, default: PROPERTIES[field].default }));
}
