/**
 * Checks a job specification before anything is written (DESIGN.md §3, §8). Shared by the library
 * and the HTTP API, so both refuse the same inputs with the same field names.
 */
import { type FieldProblem, JobValidationError } from "../errors.js";
import { integerRangeMessage, JOB_SPEC_FIELDS, LIMITS, lengthRangeMessage, wireName } from "./job-shape.js";
import type { JobSpec, JsonValue } from "./types.js";

/** Largest payload (and handler result) a job carries, as UTF-8 JSON bytes: 1 MiB (`LIMITS.payloadBytes`). */
export const MAX_PAYLOAD_BYTES = LIMITS.payloadBytes;

/** UTF-8 length of JSON text (cheap when the text is plainly small). */
export function jsonBytes(json: string): number {
  return json.length * 3 <= MAX_PAYLOAD_BYTES ? json.length : Buffer.byteLength(json, "utf8");
}

/** How field names are spelled in errors: the library's (`maxRetries`) or the HTTP API's (`max_retries`). */
export type FieldNaming = "camel" | "snake";

/** Wire (snake_case) name of each spec field, from the job-shape table. */
const SNAKE_NAMES = Object.fromEntries(JOB_SPEC_FIELDS.map((field) => [field, wireName(field)])) as Record<
  keyof JobSpec,
  string
>;
const SPEC_FIELDS = new Set<string>(JOB_SPEC_FIELDS);

/** A spec with every default filled in, ready for the insert statement. */
export interface NormalizedJobSpec {
  type: string;
  /** The payload as JSON text. */
  payloadJson: string;
  priority: number;
  maxRetries: number;
  runAt: Date | null;
  /** The idempotency key, or null (most jobs: see idempotency.ts). */
  idempotencyKey: string | null;
  /** Bound of one attempt's run time, seconds, or null (the worker's default). */
  timeoutSeconds: number | null;
}

/** ISO-8601 date-time with a UTC offset, as the ledger accepts it (seconds optional). */
const OFFSET_DATE_TIME =
  /^(\d{4})-(\d{2})-(\d{2})[Tt ](\d{2}):(\d{2})(?::(\d{2})(?:\.\d{1,9})?)?(?:[Zz]|[+-](\d{2}):?(\d{2}))$/;

/**
 * True if `text` is a real calendar date-time with an explicit UTC offset, e.g.
 * `2030-01-01T12:00:00Z`, `2030-01-01T14:00:00.5+02:00`. Rejects times without offset (ambiguous),
 * impossible dates (`2030-02-30`), hour 24 and leap seconds.
 */
export function isOffsetDateTime(text: string): boolean {
  const m = OFFSET_DATE_TIME.exec(text);
  if (!m) return false;
  const [year, month, day, hour, minute, second, offsetHours, offsetMinutes] = m
    .slice(1)
    .map((part) => (part === undefined ? 0 : Number(part))) as number[] as [
    number,
    number,
    number,
    number,
    number,
    number,
    number,
    number,
  ];
  const daysInMonth = new Date(Date.UTC(year, month, 0)).getUTCDate();
  return (
    month >= 1 &&
    month <= 12 &&
    day >= 1 &&
    day <= daysInMonth &&
    hour <= 23 &&
    minute <= 59 &&
    second <= 59 &&
    offsetHours <= 23 &&
    offsetMinutes <= 59 &&
    !Number.isNaN(new Date(text.replace(" ", "T")).getTime())
  );
}

/** A string PostgreSQL can store in jsonb/text: no NUL character, no unpaired UTF-16 surrogate. */
function storable(text: string): boolean {
  return !text.includes("\u0000") && text.isWellFormed();
}

/**
 * Deepest nesting of arrays and objects a payload or result may have. Deeper values are refused
 * with a clear problem: walking them (here, in PostgreSQL, in the API's serializers) would
 * overflow a call stack somewhere, and nothing real nests that deep.
 */
export const MAX_JSON_DEPTH = LIMITS.jsonDepth;

/** True if the JSON `text` nests arrays and objects deeper than `maxDepth`. One pass, no recursion. */
export function nestsDeeperThan(text: string, maxDepth: number): boolean {
  // Each level costs at least two characters, so a short text cannot be too deep.
  if (text.length <= 2 * maxDepth) return false;
  let depth = 0;
  let inString = false;
  for (let i = 0; i < text.length; i++) {
    const c = text.charCodeAt(i);
    if (inString) {
      if (c === 0x5c /* \ */) i++;
      else if (c === 0x22 /* " */) inString = false;
    } else if (c === 0x22) inString = true;
    else if (c === 0x5b /* [ */ || c === 0x7b /* { */) {
      if (++depth > maxDepth) return true;
    } else if (c === 0x5d /* ] */ || c === 0x7d /* } */) depth--;
  }
  return false;
}

/**
 * True if the JSON text (as JSON.stringify writes it) holds a string PostgreSQL cannot store: an
 * escaped NUL (`\u0000`) or an escaped UTF-16 surrogate, which JSON.stringify writes only for an
 * unpaired one. Escaped backslashes are skipped, so `\\u0000` (a backslash, then "u0000") is fine.
 */
function hasUnstorableEscape(json: string): boolean {
  for (let i = json.indexOf("\\"); i !== -1; i = json.indexOf("\\", i + 2)) {
    if (json[i + 1] !== "u") continue;
    const hex = json.slice(i + 2, i + 6).toLowerCase();
    if (hex === "0000" || /^d[89a-f]/.test(hex)) return true;
  }
  return false;
}

/**
 * Path of the first string (value or key, in document order) PostgreSQL cannot store (see
 * `storable`), in `value` as JSON.stringify sees it (after each `toJSON`), or null. Iterative, and
 * visits each object once, so neither nesting nor a cycle behind a `toJSON` can make it run away.
 */
export function findUnstorableString(value: unknown, path: string): string | null {
  type Item =
    | { value: unknown; path: string; key: string }
    | { entryKey: string; value: unknown; path: string };
  const stack: Item[] = [{ value, path, key: "" }];
  const seen = new Set<object>();
  while (stack.length > 0) {
    const item = stack.pop() as Item;
    if ("entryKey" in item) {
      if (!storable(item.entryKey))
        return `${item.path}/${item.entryKey.replaceAll("\u0000", "\\u0000").toWellFormed()}`;
      stack.push({ value: item.value, path: `${item.path}/${item.entryKey}`, key: item.entryKey });
      continue;
    }
    let current = item.value;
    if (
      current !== null &&
      typeof current === "object" &&
      typeof (current as { toJSON?: unknown }).toJSON === "function"
    )
      current = (current as { toJSON(key: string): unknown }).toJSON(item.key);
    if (typeof current === "string") {
      if (!storable(current)) return item.path;
    } else if (current !== null && typeof current === "object") {
      if (seen.has(current)) continue;
      seen.add(current);
      if (Array.isArray(current)) {
        for (let i = current.length - 1; i >= 0; i--)
          stack.push({ value: current[i], path: `${item.path}/${i}`, key: String(i) });
      } else {
        const entries = Object.entries(current);
        for (let i = entries.length - 1; i >= 0; i--) {
          const [entryKey, inner] = entries[i] as [string, unknown];
          stack.push({ entryKey, value: inner, path: item.path });
        }
      }
    }
  }
  return null;
}

/**
 * True if JSON.stringify would meet NaN or ±Infinity in `value` (after toJSON, as it does).
 * Iterative, so no nesting overflows the stack.
 */
function hasNonFiniteNumber(value: unknown): boolean {
  const stack: { value: unknown; key: string }[] = [{ value, key: "" }];
  while (stack.length > 0) {
    const { value: current, key } = stack.pop() as { value: unknown; key: string };
    let inner = current;
    if (
      inner !== null &&
      typeof inner === "object" &&
      typeof (inner as { toJSON?: unknown }).toJSON === "function"
    )
      inner = (inner as { toJSON(key: string): unknown }).toJSON(key);
    if (typeof inner === "number") {
      if (!Number.isFinite(inner)) return true;
    } else if (Array.isArray(inner)) {
      inner.forEach((item, i) => {
        stack.push({ value: item, key: String(i) });
      });
    } else if (inner !== null && typeof inner === "object") {
      const record = inner as Record<string, unknown>;
      for (const k of Object.keys(record)) stack.push({ value: record[k], key: k });
    }
  }
  return false;
}

/**
 * Serialises a value as the JSON that jsonb will store, or says why it cannot be stored:
 * not JSON-serialisable (undefined, functions, cycles, BigInt, non-finite numbers, a `toJSON`
 * that throws), nested deeper than {@link MAX_JSON_DEPTH}, or holding a NUL character or an
 * unpaired surrogate. Never throws.
 */
export function toStorableJson(value: unknown, field: string): { json: string } | { problem: FieldProblem } {
  try {
    return storableJson(value, field);
  } catch (error) {
    const reason = error instanceof Error ? error.message : "it threw while being read";
    return { problem: { field, message: `is not JSON-serialisable (${reason})` } };
  }
}

function tooDeep(field: string): { problem: FieldProblem } {
  return { problem: { field, message: `nests arrays and objects deeper than ${MAX_JSON_DEPTH} levels` } };
}

function storableJson(value: unknown, field: string): { json: string } | { problem: FieldProblem } {
  let json: string | undefined;
  try {
    json = JSON.stringify(value === undefined ? null : value);
  } catch (error) {
    // JSON.stringify recurses: a value nested deep enough overflows the stack on the way.
    if (error instanceof RangeError && /call stack/i.test(error.message)) return tooDeep(field);
    return { problem: { field, message: `is not JSON-serialisable (${(error as Error).message})` } };
  }
  if (json === undefined) return { problem: { field, message: "is not JSON-serialisable" } };
  if (nestsDeeperThan(json, MAX_JSON_DEPTH)) return tooDeep(field);
  // JSON.stringify writes NaN and ±Infinity as null without a word: only where the text has a null
  // is the value walked for them (a replacer function would have cost every key of every payload).
  if (json.includes("null") && hasNonFiniteNumber(value))
    return { problem: { field, message: "is not JSON-serialisable (non-finite number)" } };
  // The JSON text says whether a string cannot be stored; the walk then finds which one (or, for a
  // value it cannot see into, the field itself).
  if (hasUnstorableEscape(json))
    return {
      problem: {
        field: findUnstorableString(value, field) ?? field,
        message:
          "contains a NUL character (\\u0000) or an unpaired UTF-16 surrogate, which PostgreSQL cannot store",
      },
    };
  return { json };
}

function checkInteger(
  problems: FieldProblem[],
  field: string,
  value: unknown,
  limit: { readonly min: number; readonly max: number },
): void {
  if (typeof value !== "number" || !Number.isInteger(value) || value < limit.min || value > limit.max) {
    problems.push({ field, message: integerRangeMessage(limit) });
  }
}

/**
 * Validates and normalises one spec. `prefix` is put before each field name (e.g. `jobs/3/`);
 * `naming` spells them as the caller knows them. Unknown keys are refused (a misspelt
 * `prority` must not silently become the default).
 * @throws {JobValidationError} listing every bad field.
 */
export function validateJobSpec(
  spec: JobSpec,
  prefix = "",
  naming: FieldNaming = "camel",
): NormalizedJobSpec {
  const problems: FieldProblem[] = [];
  if (typeof spec !== "object" || spec === null || Array.isArray(spec))
    throw new JobValidationError([
      { field: prefix.replace(/\/$/, "") || "job", message: "must be an object" },
    ]);
  const name = (field: keyof JobSpec) => `${prefix}${naming === "snake" ? SNAKE_NAMES[field] : field}`;
  for (const key of Object.keys(spec))
    if (!SPEC_FIELDS.has(key))
      problems.push({
        field: `${prefix}${key}`,
        message: `is not a job field (expected ${JOB_SPEC_FIELDS.map((f) => name(f).slice(prefix.length)).join(", ")})`,
      });
  const { type, priority = LIMITS.priority.default, maxRetries = LIMITS.maxRetries.default, runAt } = spec;
  if (
    typeof type !== "string" ||
    type.length < LIMITS.typeLength.min ||
    type.length > LIMITS.typeLength.max
  ) {
    problems.push({ field: name("type"), message: lengthRangeMessage(LIMITS.typeLength) });
  } else if (!storable(type)) {
    problems.push({
      field: name("type"),
      message: "contains a NUL character or an unpaired UTF-16 surrogate",
    });
  }
  checkInteger(problems, name("priority"), priority, LIMITS.priority);
  checkInteger(problems, name("maxRetries"), maxRetries, LIMITS.maxRetries);
  let when: Date | null = null;
  if (runAt !== undefined && runAt !== null) {
    if (runAt instanceof Date) {
      if (Number.isNaN(runAt.getTime()))
        problems.push({ field: name("runAt"), message: "is an invalid date" });
      else when = runAt;
    } else if (typeof runAt !== "string" || !isOffsetDateTime(runAt)) {
      problems.push({
        field: name("runAt"),
        message:
          "must be a real date and time in ISO-8601 with a UTC offset and a 4-digit year, e.g. 2030-01-01T12:00:00Z (a time without offset is ambiguous)",
      });
    } else {
      when = new Date(runAt.replace(" ", "T"));
      if (Number.isNaN(when.getTime()))
        problems.push({ field: name("runAt"), message: "is not a valid date-time" });
    }
  }
  const { idempotencyKey } = spec;
  if (idempotencyKey !== undefined && idempotencyKey !== null) {
    if (
      typeof idempotencyKey !== "string" ||
      idempotencyKey.length < LIMITS.idempotencyKeyLength.min ||
      idempotencyKey.length > LIMITS.idempotencyKeyLength.max
    )
      problems.push({
        field: name("idempotencyKey"),
        message: lengthRangeMessage(LIMITS.idempotencyKeyLength),
      });
    else if (!storable(idempotencyKey))
      problems.push({
        field: name("idempotencyKey"),
        message: "contains a NUL character or an unpaired UTF-16 surrogate",
      });
  }
  const { timeoutSeconds } = spec;
  if (timeoutSeconds !== undefined && timeoutSeconds !== null)
    checkInteger(problems, name("timeoutSeconds"), timeoutSeconds, LIMITS.timeoutSeconds);
  const payload = toStorableJson(
    spec.payload === undefined ? {} : (spec.payload as JsonValue),
    name("payload"),
  );
  if ("problem" in payload) problems.push(payload.problem);
  else if (jsonBytes(payload.json) > MAX_PAYLOAD_BYTES)
    problems.push({
      field: name("payload"),
      message: `is ${jsonBytes(payload.json)} bytes as JSON; the most a job carries is ${MAX_PAYLOAD_BYTES} (${MAX_PAYLOAD_BYTES / 1024 / 1024} MiB)`,
    });
  if (problems.length > 0) throw new JobValidationError(problems);
  return {
    type,
    payloadJson: (payload as { json: string }).json,
    priority,
    maxRetries,
    runAt: when,
    idempotencyKey: typeof idempotencyKey === "string" ? idempotencyKey : null,
    timeoutSeconds: typeof timeoutSeconds === "number" ? timeoutSeconds : null,
  };
}
