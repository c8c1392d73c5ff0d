/**
 * Configuration: one typed options object for the library, filled from environment variables by
 * the CLI. Rules come from DESIGN.md §9; every bad value is reported with the variable or field
 * that holds it (a {@link ConfigError}), at start-up, before anything connects.
 */
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
  /** Retry delay after failed attempt a (0-based) is min(base * 2^a, max). Default base 1 s. */
  backoffBaseSeconds: number;
  /** Upper bound of the retry delay. Default 3600 s. */
  backoffMaxSeconds: number;
  /** Multiply each retry delay by a random factor in [0.5, 1] ("equal jitter"). Default true. */
  backoffJitter: boolean;
  /** Log level. Default `"info"`. */
  logLevel: LogLevel;
}

/** The library's options object: any subset of {@link ResolvedConfig}. */
export type TaskQueueOptions = Partial<ResolvedConfig>;

const LOG_LEVELS: readonly LogLevel[] = ["fatal", "error", "warn", "info", "debug", "trace", "silent"];

interface NumberRule {
  kind: "number";
  env: string;
  min: number;
  max: number;
  integer: boolean;
  default: number | undefined;
}
interface StringRule {
  kind: "string";
  env: string;
  default: string | undefined;
  pattern?: RegExp;
  hint?: string;
}
interface BooleanRule {
  kind: "boolean";
  env: string;
  default: boolean;
}
interface EnumRule {
  kind: "enum";
  env: string;
  values: readonly string[];
  default: string;
}
type Rule = NumberRule | StringRule | BooleanRule | EnumRule;

const IDENTIFIER = /^[a-z_][a-z0-9_]{0,62}$/;
const seconds = (env: string, def: number, min = 0.001, max = 86_400): NumberRule => ({
  kind: "number",
  env,
  min,
  max,
  integer: false,
  default: def,
});

/** Every option, its environment variable, range and default (DESIGN.md §6 and §9). */
/** The most handlers one worker process runs at once (`WORKER_COUNT`). */
export const MAX_WORKER_COUNT = 10_000;

const RULES: { [K in keyof ResolvedConfig]: Rule } = {
  databaseUrl: { kind: "string", env: "DATABASE_URL", default: undefined },
  schema: {
    kind: "string",
    env: "TASKQUEUE_SCHEMA",
    default: "taskqueue",
    pattern: IDENTIFIER,
    hint: "a lower-case SQL identifier (letters, digits, _), not starting with a digit",
  },
  notifyChannel: {
    kind: "string",
    env: "TASKQUEUE_NOTIFY_CHANNEL",
    default: "job_channel",
    pattern: IDENTIFIER,
    hint: "a lower-case SQL identifier",
  },
  host: { kind: "string", env: "HOST", default: "127.0.0.1" },
  port: { kind: "number", env: "PORT", min: 0, max: 65_535, integer: true, default: 8000 },
  workerCount: {
    kind: "number",
    env: "WORKER_COUNT",
    min: 1,
    max: MAX_WORKER_COUNT,
    integer: true,
    default: 4,
  },
  prefetch: {
    kind: "number",
    env: "WORKER_PREFETCH",
    min: 1,
    max: 100_000,
    integer: true,
    default: undefined,
  },
  lockSessions: { kind: "number", env: "WORKER_LOCK_SESSIONS", min: 1, max: 16, integer: true, default: 1 },
  pollIntervalSeconds: seconds("POLL_INTERVAL_SECONDS", 5),
  heartbeatIntervalSeconds: seconds("HEARTBEAT_INTERVAL_SECONDS", 10),
  reaperIntervalSeconds: seconds("REAPER_INTERVAL_SECONDS", 15),
  staleThresholdSeconds: seconds("STALE_THRESHOLD_SECONDS", 30),
  shutdownGraceSeconds: seconds("SHUTDOWN_GRACE_SECONDS", 60, 0),
  backoffBaseSeconds: seconds("BACKOFF_BASE_SECONDS", 1, 0),
  backoffMaxSeconds: seconds("BACKOFF_MAX_SECONDS", 3600, 0, 31_536_000),
  backoffJitter: { kind: "boolean", env: "BACKOFF_JITTER", default: true },
  logLevel: { kind: "enum", env: "LOG_LEVEL", values: LOG_LEVELS, default: "info" },
};

function checkValue(field: string, rule: Rule, value: unknown): unknown {
  if (value === undefined) return rule.default;
  switch (rule.kind) {
    case "number": {
      if (typeof value !== "number" || !Number.isFinite(value))
        throw new ConfigError(field, "must be a number");
      if (rule.integer && !Number.isInteger(value)) throw new ConfigError(field, "must be a whole number");
      if (value < rule.min || value > rule.max)
        throw new ConfigError(field, `must be between ${rule.min} and ${rule.max}, got ${value}`);
      return value;
    }
    case "string": {
      if (typeof value !== "string" || value === "")
        throw new ConfigError(field, "must be a non-empty string");
      if (rule.pattern && !rule.pattern.test(value))
        throw new ConfigError(
          field,
          `must be ${rule.hint ?? rule.pattern.source}, got ${JSON.stringify(value)}`,
        );
      return value;
    }
    case "boolean":
      if (typeof value !== "boolean") throw new ConfigError(field, "must be true or false");
      return value;
    case "enum":
      if (typeof value !== "string" || !rule.values.includes(value))
        throw new ConfigError(
          field,
          `must be one of ${rule.values.join(", ")}, got ${JSON.stringify(value)}`,
        );
      return value;
  }
}

function parseEnv(rule: Rule, raw: string): unknown {
  const text = raw.trim();
  switch (rule.kind) {
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
 * Resolves options: explicit fields win, then the defaults. Validates every field.
 * @throws {ConfigError} naming the first bad field.
 */
export function resolveConfig(options: TaskQueueOptions = {}): ResolvedConfig {
  const out: Record<string, unknown> = {};
  for (const [field, rule] of Object.entries(RULES) as [keyof ResolvedConfig, Rule][]) {
    out[field] = checkValue(field, rule, options[field]);
  }
  const config = out as unknown as ResolvedConfig;
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
 * Reads options from environment variables (DATABASE_URL, PORT, WORKER_COUNT, ...), then resolves them.
 * `overrides` (e.g. CLI flags) win over the environment. The variables of `unused` options (say,
 * {@link API_ONLY_OPTIONS} for a worker) are not read: their defaults stand, whatever they hold.
 * @throws {ConfigError} naming the environment variable at fault.
 */
export function configFromEnv(
  env: NodeJS.ProcessEnv = process.env,
  overrides: TaskQueueOptions = {},
  unused: readonly (keyof ResolvedConfig)[] = [],
): ResolvedConfig {
  const options: Record<string, unknown> = {};
  const given = stripUndefined(overrides);
  for (const [field, rule] of Object.entries(RULES) as [keyof ResolvedConfig, Rule][]) {
    const raw = env[rule.env];
    // A variable that an override replaces is not read: its value, good or bad, is not used.
    if (
      raw === undefined ||
      (raw === "" && field === "databaseUrl") ||
      field in given ||
      unused.includes(field)
    )
      continue;
    const value = parseEnv(rule, raw);
    try {
      checkValue(rule.env, rule, value);
    } catch (error) {
      if (error instanceof ConfigError)
        throw new ConfigError(rule.env, error.message.slice(rule.env.length + 2));
      throw error;
    }
    options[field] = value;
  }
  try {
    return resolveConfig({ ...(options as TaskQueueOptions), ...given });
  } catch (error) {
    // Cross-field checks name option fields; from the environment, name the variables.
    if (!(error instanceof ConfigError)) throw error;
    const rule = RULES[error.field as keyof ResolvedConfig];
    if (!rule || error.field in given) throw error;
    let message = error.message.slice(error.field.length + 2);
    // Other option fields named in the message (camelCase words such as backoffBaseSeconds) become
    // their variables; plain words ("schema") stay as they are.
    for (const [field, other] of Object.entries(RULES))
      if (/[A-Z]/.test(field)) message = message.replace(new RegExp(`\\b${field}\\b`, "g"), other.env);
    throw new ConfigError(rule.env, message);
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

/** Environment variable behind each option, for `--help` and the README. */
export function environmentVariables(): { field: string; env: string; default: unknown }[] {
  return Object.entries(RULES).map(([field, rule]) => ({ field, env: rule.env, default: rule.default }));
}
