/**
 * Checks a job specification before anything is written (DESIGN.md §3, §8). Shared by the library
 * and the HTTP API, so both refuse the same inputs with the same field names.
 */
import { type FieldProblem, JobValidationError } from "../errors.js";
import type { JobSpec, JsonValue } from "./types.js";

/** Largest payload (and handler result) a job carries, as UTF-8 JSON bytes: 1 MiB. */
export const MAX_PAYLOAD_BYTES = 1024 * 1024;

/** UTF-8 length of JSON text (cheap when the text is plainly small). */
export function jsonBytes(json: string): number {
  return json.length * 3 <= MAX_PAYLOAD_BYTES ? json.length : Buffer.byteLength(json, "utf8");
}

/** How field names are spelled in errors: the library's (`maxRetries`) or the HTTP API's (`max_retries`). */
export type FieldNaming = "camel" | "snake";

const SNAKE_NAMES: Record<keyof JobSpec, string> = {
  type: "type",
  payload: "payload",
  priority: "priority",
  maxRetries: "max_retries",
  runAt: "run_at",
};
const JOB_SPEC_FIELDS = new Set(Object.keys(SNAKE_NAMES));

/** A spec with every default filled in, ready for the insert statement. */
export interface NormalizedJobSpec {
  type: string;
  /** The payload as JSON text. */
  payloadJson: string;
  priority: number;
  maxRetries: number;
  runAt: Date | null;
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

/** Path of the first string (value or key) PostgreSQL cannot store (see `storable`), or null. */
export function findUnstorableString(value: unknown, path: string): string | null {
  if (typeof value === "string") return storable(value) ? null : path;
  if (Array.isArray(value)) {
    for (let i = 0; i < value.length; i++) {
      const found = findUnstorableString(value[i], `${path}/${i}`);
      if (found) return found;
    }
    return null;
  }
  if (value !== null && typeof value === "object") {
    for (const [key, inner] of Object.entries(value)) {
      if (!storable(key)) return `${path}/${key.replaceAll("\u0000", "\\u0000").toWellFormed()}`;
      const found = findUnstorableString(inner, `${path}/${key}`);
      if (found) return found;
    }
  }
  return null;
}

/** True if JSON.stringify would meet NaN or ±Infinity in `value` (after toJSON, as it does). */
function hasNonFiniteNumber(value: unknown, key: string): boolean {
  let inner = value;
  if (
    inner !== null &&
    typeof inner === "object" &&
    typeof (inner as { toJSON?: unknown }).toJSON === "function"
  )
    inner = (inner as { toJSON(key: string): unknown }).toJSON(key);
  if (typeof inner === "number") return !Number.isFinite(inner);
  if (Array.isArray(inner)) return inner.some((item, i) => hasNonFiniteNumber(item, String(i)));
  if (inner !== null && typeof inner === "object") {
    const record = inner as Record<string, unknown>;
    return Object.keys(record).some((k) => hasNonFiniteNumber(record[k], k));
  }
  return false;
}

/**
 * Serialises a value as the JSON that jsonb will store, or says why it cannot be stored:
 * not JSON-serialisable (undefined, functions, cycles, BigInt, non-finite numbers) or
 * holding a NUL character.
 */
export function toStorableJson(value: unknown, field: string): { json: string } | { problem: FieldProblem } {
  let json: string | undefined;
  try {
    json = JSON.stringify(value === undefined ? null : value);
  } catch (error) {
    return { problem: { field, message: `is not JSON-serialisable (${(error as Error).message})` } };
  }
  if (json === undefined) return { problem: { field, message: "is not JSON-serialisable" } };
  // JSON.stringify writes NaN and ±Infinity as null without a word: only where the text has a null
  // is the value walked for them (a replacer function would have cost every key of every payload).
  if (json.includes("null") && hasNonFiniteNumber(value, ""))
    return { problem: { field, message: "is not JSON-serialisable (non-finite number)" } };
  // Cheap pre-filter on the JSON text (escaped NUL or surrogate), confirmed by walking the value.
  if (/\\u(0000|d[89a-f])/i.test(json)) {
    const at = findUnstorableString(value, field);
    if (at)
      return {
        problem: {
          field: at,
          message:
            "contains a NUL character (\\u0000) or an unpaired UTF-16 surrogate, which PostgreSQL cannot store",
        },
      };
  }
  return { json };
}

function checkInteger(
  problems: FieldProblem[],
  field: string,
  value: unknown,
  min: number,
  max: number,
): void {
  if (typeof value !== "number" || !Number.isInteger(value) || value < min || value > max) {
    problems.push({ field, message: `must be an integer from ${min} to ${max}` });
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
    throw new JobValidationError([{ field: prefix || "job", message: "must be an object" }]);
  const name = (field: keyof JobSpec) => `${prefix}${naming === "snake" ? SNAKE_NAMES[field] : field}`;
  for (const key of Object.keys(spec))
    if (!JOB_SPEC_FIELDS.has(key))
      problems.push({
        field: `${prefix}${key}`,
        message: `is not a job field (expected ${[...JOB_SPEC_FIELDS].map((f) => name(f as keyof JobSpec).slice(prefix.length)).join(", ")})`,
      });
  const { type, priority = 5, maxRetries = 3, runAt } = spec;
  if (typeof type !== "string" || type.length < 1 || type.length > 200) {
    problems.push({ field: `${prefix}type`, message: "must be a string of 1 to 200 characters" });
  } else if (!storable(type)) {
    problems.push({
      field: `${prefix}type`,
      message: "contains a NUL character or an unpaired UTF-16 surrogate",
    });
  }
  checkInteger(problems, name("priority"), priority, 1, 10);
  checkInteger(problems, name("maxRetries"), maxRetries, 0, 10);
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
          "must be an ISO-8601 date-time with a UTC offset, e.g. 2030-01-01T12:00:00Z (a time without offset is ambiguous)",
      });
    } else {
      when = new Date(runAt.replace(" ", "T"));
      if (Number.isNaN(when.getTime()))
        problems.push({ field: name("runAt"), message: "is not a valid date-time" });
    }
  }
  const payload = toStorableJson(
    spec.payload === undefined ? {} : (spec.payload as JsonValue),
    `${prefix}payload`,
  );
  if ("problem" in payload) problems.push(payload.problem);
  else if (jsonBytes(payload.json) > MAX_PAYLOAD_BYTES)
    problems.push({
      field: `${prefix}payload`,
      message: `is ${jsonBytes(payload.json)} bytes as JSON; the most a job carries is ${MAX_PAYLOAD_BYTES} (1 MiB)`,
    });
  if (problems.length > 0) throw new JobValidationError(problems);
  return {
    type,
    payloadJson: (payload as { json: string }).json,
    priority,
    maxRetries,
    runAt: when,
  };
}
