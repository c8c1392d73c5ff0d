/**
 * Checks a job specification before anything is written (DESIGN.md §3, §8). Shared by the library
 * and the HTTP API, so both refuse the same inputs with the same field names.
 */
import { type FieldProblem, JobValidationError } from "../errors.js";
import type { JobSpec, JsonValue } from "./types.js";

/** A spec with every default filled in, ready for the insert statement. */
export interface NormalizedJobSpec {
  type: string;
  /** The payload as JSON text. */
  payloadJson: string;
  priority: number;
  maxRetries: number;
  runAt: Date | null;
}

/** ISO-8601 date-time with an explicit UTC offset. A bare local time is ambiguous and refused. */
const OFFSET_DATE_TIME = /^\d{4}-\d{2}-\d{2}[Tt ]\d{2}:\d{2}(:\d{2}(\.\d{1,9})?)?([Zz]|[+-]\d{2}:?\d{2})$/;

/** Path of the first string (value or key) holding a NUL character, or null. */
export function findNulCharacter(value: unknown, path: string): string | null {
  if (typeof value === "string") return value.includes("\u0000") ? path : null;
  if (Array.isArray(value)) {
    for (let i = 0; i < value.length; i++) {
      const found = findNulCharacter(value[i], `${path}/${i}`);
      if (found) return found;
    }
    return null;
  }
  if (value !== null && typeof value === "object") {
    for (const [key, inner] of Object.entries(value)) {
      if (key.includes("\u0000")) return `${path}/${key.replaceAll("\u0000", "\\u0000")}`;
      const found = findNulCharacter(inner, `${path}/${key}`);
      if (found) return found;
    }
  }
  return null;
}

/**
 * Serialises a value as the JSON that jsonb will store, or says why it cannot be stored:
 * not JSON-serialisable (undefined, functions, cycles, BigInt, non-finite numbers) or
 * holding a NUL character.
 */
export function toStorableJson(value: unknown, field: string): { json: string } | { problem: FieldProblem } {
  let json: string | undefined;
  try {
    json = JSON.stringify(value === undefined ? null : value, (_key, inner: unknown) => {
      if (typeof inner === "number" && !Number.isFinite(inner)) throw new Error("non-finite number");
      return inner;
    });
  } catch (error) {
    return { problem: { field, message: `is not JSON-serialisable (${(error as Error).message})` } };
  }
  if (json === undefined) return { problem: { field, message: "is not JSON-serialisable" } };
  if (json.includes("\\u0000")) {
    const at = findNulCharacter(JSON.parse(json), field) ?? field;
    return {
      problem: { field: at, message: "contains a NUL character (\\u0000), which PostgreSQL cannot store" },
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
 * Validates and normalises one spec. `prefix` is put before each field name (e.g. `jobs/3/`).
 * Field names are the API's (snake_case), since both callers report them to people.
 * @throws {JobValidationError} listing every bad field.
 */
export function validateJobSpec(spec: JobSpec, prefix = ""): NormalizedJobSpec {
  const problems: FieldProblem[] = [];
  if (typeof spec !== "object" || spec === null)
    throw new JobValidationError([{ field: prefix || "body", message: "must be an object" }]);
  const { type, priority = 5, maxRetries = 3, runAt } = spec;
  if (typeof type !== "string" || type.length < 1 || type.length > 200) {
    problems.push({ field: `${prefix}type`, message: "must be a string of 1 to 200 characters" });
  } else if (type.includes("\u0000")) {
    problems.push({ field: `${prefix}type`, message: "contains a NUL character" });
  }
  checkInteger(problems, `${prefix}priority`, priority, 1, 10);
  checkInteger(problems, `${prefix}max_retries`, maxRetries, 0, 10);
  let when: Date | null = null;
  if (runAt !== undefined && runAt !== null) {
    if (runAt instanceof Date) {
      if (Number.isNaN(runAt.getTime()))
        problems.push({ field: `${prefix}run_at`, message: "is an invalid date" });
      else when = runAt;
    } else if (typeof runAt !== "string" || !OFFSET_DATE_TIME.test(runAt)) {
      problems.push({
        field: `${prefix}run_at`,
        message:
          "must be an ISO-8601 date-time with a UTC offset, e.g. 2030-01-01T12:00:00Z (a time without offset is ambiguous)",
      });
    } else {
      when = new Date(runAt.replace(" ", "T"));
      if (Number.isNaN(when.getTime()))
        problems.push({ field: `${prefix}run_at`, message: "is not a valid date-time" });
    }
  }
  const payload = toStorableJson(
    spec.payload === undefined ? {} : (spec.payload as JsonValue),
    `${prefix}payload`,
  );
  if ("problem" in payload) problems.push(payload.problem);
  if (problems.length > 0) throw new JobValidationError(problems);
  return {
    type,
    payloadJson: (payload as { json: string }).json,
    priority,
    maxRetries,
    runAt: when,
  };
}
