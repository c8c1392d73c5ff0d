/**
 * Configuration: one typed options object for the library, filled from environment variables by
 * the CLI. Rules come from DESIGN.md §9 and live in one TypeBox schema, {@link CONFIG_SCHEMA}:
 * each property carries its environment variable (`env`), default, range, pattern or enum, and a
 * description. Every bad value is reported with the variable or field that holds it (a
 * {@link ConfigError}), at start-up, before anything connects. Nothing is registered with
 * TypeBox's global registries (no format, no kind): the schema uses built-in kinds only.
 */
import { readFileSync } from "node:fs";
import type { TSchema } from "@sinclair/typebox";
import { Value } from "@sinclair/typebox/value";
import {
  CONFIG_SCHEMA,
  type ConfigKeywords,
  type ResolvedConfig,
  type TaskQueueOptions,
} from "./config-schema.js";
import { ConfigError } from "./errors.js";

export {
  CONFIG_SCHEMA,
  type LogFormat,
  type LogLevel,
  MAX_WORKER_COUNT,
  type ResolvedConfig,
  type TaskQueueOptions,
} from "./config-schema.js";

type Field = keyof ResolvedConfig;
type PropertySchema = TSchema & ConfigKeywords & { default?: unknown };
const PROPERTIES = CONFIG_SCHEMA.properties as unknown as Record<Field, PropertySchema>;
const FIELDS = Object.keys(PROPERTIES) as Field[];

/** What a property is, read from its TypeBox kind: decides how a variable is parsed and refused. */
type Shape = "integer" | "number" | "string" | "boolean" | "list" | "enum";
function shapeOf(schema: TSchema): Shape {
  switch (schema.type) {
    case "integer":
    case "number":
    case "string":
    case "boolean":
      return schema.type;
    case "array":
      return "list";
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
    case "list": {
      const item = schema.items as { minLength: number; maxLength: number };
      return `must be a non-empty list of names of ${item.minLength} to ${item.maxLength} characters (comma-separated in the environment), got ${JSON.stringify(value)}`;
    }
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
    case "list":
      // Comma-separated names, spaces around them dropped; an empty entry is refused by the schema.
      return text.split(",").map((name) => name.trim());
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
  // A misspelt option (say `wokerCount` from JavaScript) would silently fall back to its default.
  for (const key of Object.keys(options))
    if (!(FIELDS as string[]).includes(key)) throw new ConfigError(key, unknownOptionMessage(key));
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
  if (config.apiToken !== undefined && config.apiToken.length < MIN_API_TOKEN_LENGTH)
    throw new ConfigError(
      "apiToken",
      `must be at least ${MIN_API_TOKEN_LENGTH} characters (say, \`openssl rand -hex 32\`)`,
    );
  if ((config.tlsCertFile === undefined) !== (config.tlsKeyFile === undefined))
    throw new ConfigError(
      config.tlsCertFile === undefined ? "tlsCertFile" : "tlsKeyFile",
      "must be set together with the other of tlsCertFile and tlsKeyFile (HTTPS needs both)",
    );
  if (config.databaseUrl !== undefined && !isConnectionString(config.databaseUrl))
    throw new ConfigError("databaseUrl", "must be a postgres:// or postgresql:// URL");
  return config;
}

/** "is not an option", naming the nearest option when one is a typo away (edit distance ≤ 2). */
function unknownOptionMessage(key: string): string {
  const distance = (a: string, b: string): number => {
    let row = Array.from({ length: b.length + 1 }, (_, j) => j);
    for (let i = 1; i <= a.length; i++) {
      const next = [i];
      for (let j = 1; j <= b.length; j++)
        next[j] = Math.min(
          (row[j] ?? 0) + 1,
          (next[j - 1] ?? 0) + 1,
          (row[j - 1] ?? 0) + (a[i - 1]?.toLowerCase() === b[j - 1]?.toLowerCase() ? 0 : 1),
        );
      row = next;
    }
    return row[b.length] ?? 0;
  };
  const nearest = FIELDS.map((field) => ({ field, d: distance(key, field) })).sort((x, y) => x.d - y.d)[0];
  return nearest && nearest.d <= 2 ? `is not an option; did you mean ${nearest.field}?` : "is not an option";
}

/** Shortest API token accepted: guessing 16 random characters is out of reach. */
export const MIN_API_TOKEN_LENGTH = 16;

/** Options only the HTTP API uses: a process without it (worker, migrate, inspect) reads none of them. */
export const API_ONLY_OPTIONS = [
  "host",
  "port",
  "apiToken",
  "insecureNoAuth",
  "tlsCertFile",
  "tlsKeyFile",
] as const satisfies readonly (keyof ResolvedConfig)[];

/**
 * Variables that may instead be read from a file named by `<VARIABLE>_FILE` (Docker and Kubernetes
 * secrets): the file's content, without its trailing line break, is the value.
 */
export const SECRET_FILE_VARIABLES = ["DATABASE_URL", "TASKQUEUE_API_TOKEN"] as const;

/**
 * `env` with each `<VARIABLE>_FILE` of {@link SECRET_FILE_VARIABLES} replaced by the file's content
 * as `<VARIABLE>` (one trailing line break dropped). `skip` names variables not to read.
 * @throws {ConfigError} naming `<VARIABLE>_FILE` when both are set, or the file cannot be read or is empty.
 */
export function withSecretFiles(env: NodeJS.ProcessEnv, skip: readonly string[] = []): NodeJS.ProcessEnv {
  const result = { ...env };
  for (const variable of SECRET_FILE_VARIABLES) {
    const fileVariable = `${variable}_FILE`;
    const path = env[fileVariable];
    if (path === undefined || path === "" || skip.includes(variable)) continue;
    if (env[variable] !== undefined && env[variable] !== "")
      throw new ConfigError(fileVariable, `is set, and so is ${variable}: set only one of them`);
    let content: string;
    try {
      content = readFileSync(path, "utf8").replace(/\r?\n$/, "");
    } catch (error) {
      throw new ConfigError(fileVariable, `cannot read ${path}: ${(error as Error).message}`);
    }
    if (content === "") throw new ConfigError(fileVariable, `${path} is empty`);
    result[variable] = content;
  }
  return result;
}

/**
 * Reads options from environment variables (DATABASE_URL, PORT, WORKER_COUNT, ...: each
 * property's `env` in {@link CONFIG_SCHEMA}), then resolves them. `overrides` (e.g. CLI flags)
 * win over the environment. The variables of `unused` options (say, {@link API_ONLY_OPTIONS} for
 * a worker) are not read: their defaults stand, whatever they hold.
 * @throws {ConfigError} naming the environment variable at fault.
 */
export function configFromEnv(
  environment: NodeJS.ProcessEnv = process.env,
  overrides: TaskQueueOptions = {},
  unused: readonly (keyof ResolvedConfig)[] = [],
): ResolvedConfig {
  const options: Record<string, unknown> = {};
  const given = stripUndefined(overrides);
  const env = withSecretFiles(
    environment,
    FIELDS.filter((field) => field in given || unused.includes(field)).map((field) => PROPERTIES[field].env),
  );
  try {
    return configFromVariables(env, options, given, unused);
  } catch (error) {
    // A value read from `<VARIABLE>_FILE` is named by that variable.
    if (!(error instanceof ConfigError)) throw error;
    const fileVariable = `${error.field}_FILE`;
    if (!environment[fileVariable] || environment[error.field]) throw error;
    throw new ConfigError(fileVariable, error.message.slice(error.field.length + 2));
  }
}

function configFromVariables(
  env: NodeJS.ProcessEnv,
  options: Record<string, unknown>,
  given: TaskQueueOptions,
  unused: readonly (keyof ResolvedConfig)[],
): ResolvedConfig {
  for (const field of FIELDS) {
    const schema = PROPERTIES[field];
    const raw = env[schema.env];
    // A variable that an override replaces is not read: its value, good or bad, is not used.
    if (
      raw === undefined ||
      (raw === "" && (field === "databaseUrl" || field === "allowedJobTypes")) ||
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
