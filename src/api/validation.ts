/**
 * Request validation with TypeBox's compiled checks: Fastify's TypeBox validator compiler
 * (`TypeBoxValidatorCompiler` of `@fastify/type-provider-typebox`) for path, query and header
 * parameters, wrapped where our rules differ from its defaults, and TypeBox's compiler directly
 * for bodies, whose errors must be read lazily (see bodyValidator).
 *
 * - No coercion. The installed compiler converts every part but the body with TypeBox's
 *   `Value.Convert`, which makes `"2.5"` a number and `"true"` a boolean. Here it is always asked
 *   to check as for a body (as sent); path and query parameters, which are always text, are
 *   converted first, and only a string of digits becomes a number for an integer field (`"2.5"`,
 *   `"1e3"`, `" 7"` stay strings and fail an integer check). Their defaults are then filled in.
 *   Body defaults are not: the ledger applies the same documented defaults (validateJobSpec), and
 *   filling them walked every job of a batch a second time.
 * - Our messages. Every problem is reported once per field (path), at most {@link MAX_ERRORS}, as
 *   an Ajv-compatible error object (`instancePath`, `keyword`, `message`, `params`) whose message
 *   is ours, derived from the schema and the value at that path (`must be an integer from 1 to
 *   10`). TypeBox's own messages come from a process-wide error function a host application may
 *   replace, so they are only a last resort, for a schema our messages do not describe.
 */
import { TypeBoxValidatorCompiler } from "@fastify/type-provider-typebox";
import type { TSchema } from "@sinclair/typebox";
import { TypeCompiler } from "@sinclair/typebox/compiler";
import { Value } from "@sinclair/typebox/value";
import type { FastifySchemaCompiler } from "fastify";
import { integerRangeMessage, LIMITS, lengthRangeMessage } from "../queue/job-shape.js";
import { STORABLE_TEXT_PATTERN } from "./schemas.js";

/** A validation error in the shape Fastify and problem.ts expect (a subset of Ajv's). */
export interface SchemaValidationError {
  /** JSON pointer of the bad value, e.g. `/jobs/3/priority`; for a missing or unknown property, that property. */
  instancePath: string;
  /** Always empty: TypeBox does not report the schema location. */
  schemaPath: string;
  /** What failed: `required`, `additionalProperties`, `pattern` or `type` (any other check of the schema). */
  keyword: string;
  /** Human-readable, starts lower-case, e.g. `must be an integer from 1 to 10`. */
  message: string;
  params: Record<string, unknown>;
}

/** The keywords of a request schema that the messages are made from. */
interface SchemaFields {
  type?: unknown;
  minimum?: number;
  exclusiveMinimum?: number;
  maximum?: number;
  minLength?: number;
  maxLength?: number;
  minItems?: number;
  maxItems?: number;
  pattern?: string;
  format?: string;
  anyOf?: { const?: unknown }[];
  enum?: unknown[];
  properties?: Record<string, SchemaFields>;
  items?: SchemaFields;
}

/** What a value at a schema must be, as a message; null when the schema says nothing usable. */
function describeSchema(schema: SchemaFields): string | null {
  if (Array.isArray(schema.enum)) return `must be one of: ${schema.enum.map(String).join(", ")}`;
  switch (schema.type) {
    case "integer":
      if (schema.minimum !== undefined && schema.maximum !== undefined)
        return integerRangeMessage({ min: schema.minimum, max: schema.maximum });
      if (schema.minimum !== undefined) return `must be an integer of at least ${schema.minimum}`;
      return "must be an integer";
    case "number": {
      // As the ledger words it (type-limits.ts): "must be a number above 0, at most 1,000,000".
      const bounds = [
        schema.exclusiveMinimum !== undefined ? `above ${schema.exclusiveMinimum}` : null,
        schema.minimum !== undefined ? `at least ${schema.minimum.toLocaleString("en")}` : null,
        schema.maximum !== undefined ? `at most ${schema.maximum.toLocaleString("en")}` : null,
      ].filter((b) => b !== null);
      return bounds.length > 0 ? `must be a number ${bounds.join(", ")}` : "must be a number";
    }
    case "string":
      if (schema.format === "date-time")
        return "must be a real date and time in ISO-8601 with a UTC offset and a 4-digit year, e.g. 2030-01-01T12:00:00Z (a time without offset is ambiguous)";
      if (schema.minLength !== undefined && schema.maxLength !== undefined)
        return lengthRangeMessage({ min: schema.minLength, max: schema.maxLength });
      return "must be a string";
    case "array":
      if (schema.minItems !== undefined && schema.maxItems !== undefined)
        return `must be an array of ${schema.minItems} to ${schema.maxItems} items`;
      return "must be an array";
    case "object":
      return "must be a JSON object";
  }
  if (schema.anyOf?.every((branch) => branch.const !== undefined)) {
    return `must be one of: ${schema.anyOf.map((branch) => String(branch.const)).join(", ")}`;
  }
  return null;
}

function unescapePointer(segment: string): string {
  return segment.replaceAll("~1", "/").replaceAll("~0", "~");
}

/** True if `value` is a string within the length bounds of `schema` that fails its pattern. */
function failsOnlyPattern(schema: SchemaFields, value: unknown): boolean {
  if (schema.pattern === undefined || typeof value !== "string") return false;
  if (schema.minLength !== undefined && value.length < schema.minLength) return false;
  if (schema.maxLength !== undefined && value.length > schema.maxLength) return false;
  // As TypeBox's compiler builds it: no flags.
  return !new RegExp(schema.pattern).test(value);
}

/**
 * Our error for the value at `path` (a JSON pointer TypeBox reported) of `input` checked against
 * `root`: an unknown field (no schema there), a missing one (no value there), a string failing only
 * its pattern, or else what the schema there asks for.
 */
function errorAt(root: SchemaFields, input: unknown, path: string, fallback: string): SchemaValidationError {
  const base = { instancePath: path, schemaPath: "", params: {} };
  let schema: SchemaFields | undefined = root;
  let value: unknown = input;
  const segments = path === "" ? [] : path.split("/").slice(1).map(unescapePointer);
  for (const segment of segments) {
    if (schema === undefined) break;
    schema = schema.type === "array" ? schema.items : schema.properties?.[segment];
    value =
      value !== null && typeof value === "object" ? (value as Record<string, unknown>)[segment] : undefined;
  }
  if (schema === undefined)
    return {
      ...base,
      keyword: "additionalProperties",
      message: "is not a known field (unknown fields are rejected)",
    };
  if (value === undefined && segments.length > 0)
    return { ...base, keyword: "required", message: "is required" };
  if (failsOnlyPattern(schema, value))
    return {
      ...base,
      keyword: "pattern",
      message:
        schema.pattern === STORABLE_TEXT_PATTERN
          ? "must not contain a NUL character (\\u0000) or an unpaired surrogate"
          : `must match the pattern ${schema.pattern}`,
    };
  return {
    ...base,
    keyword: "type",
    message: describeSchema(schema) ?? fallback.replace(/^Expected/, "must be"),
  };
}

/** Most errors reported for one request: enough to name every field of a large bad batch. */
const MAX_ERRORS = LIMITS.fieldProblems;

/** One error per path, in the order reported, at most MAX_ERRORS. */
function describeErrors(
  errors: readonly { instancePath: string; message?: string }[],
  schema: SchemaFields,
  value: unknown,
): SchemaValidationError[] {
  const seen = new Set<string>();
  const out: SchemaValidationError[] = [];
  for (const error of errors) {
    if (seen.has(error.instancePath)) continue;
    seen.add(error.instancePath);
    out.push(errorAt(schema, value, error.instancePath, error.message ?? "is invalid"));
    if (out.length >= MAX_ERRORS) break;
  }
  return out;
}

/** Integer fields of a flat object schema (path and query parameters). */
function integerFields(schema: TSchema): string[] {
  const properties = (schema as SchemaFields).properties ?? {};
  return Object.entries(properties)
    .filter(([, property]) => property.type === "integer")
    .map(([key]) => key);
}

const DIGITS = /^-?\d{1,20}$/;

/**
 * Bodies: TypeBox's compiled check, and on failure its errors read lazily, only until
 * {@link MAX_ERRORS} fields are named. TypeBoxValidatorCompiler lists every error of a value before
 * it answers, which for a body is unbounded: a 5 MB batch with 500,000 unknown fields took 540 ms
 * and 175 MB to refuse that way, 1 ms this way, and a 32 MiB body could exhaust the heap.
 */
function bodyValidator(schema: TSchema) {
  const check = TypeCompiler.Compile(schema);
  return (value: unknown) => {
    if (check.Check(value)) return { value };
    const errors: { instancePath: string; message: string }[] = [];
    const seen = new Set<string>();
    for (const error of check.Errors(value)) {
      if (seen.has(error.path)) continue;
      seen.add(error.path);
      errors.push({ instancePath: error.path, message: error.message });
      if (errors.length >= MAX_ERRORS) break;
    }
    return { error: describeErrors(errors, schema as SchemaFields, value) };
  };
}

/**
 * Fastify validator compiler (see the top of this file): bodies checked as sent, with at most
 * MAX_ERRORS errors read ({@link bodyValidator}); path, query and header parameters through
 * TypeBoxValidatorCompiler, checked as sent after digit strings became numbers for integer
 * fields, then their defaults filled in. Every error carries our message.
 */
export const typeBoxValidatorCompiler: FastifySchemaCompiler<TSchema> = (route) => {
  const { schema, httpPart } = route;
  if (httpPart === "body") return bodyValidator(schema);
  // Asked as for a body: checked as sent, no Value.Convert (our conversion is done first).
  const check = TypeBoxValidatorCompiler({ ...route, httpPart: "body" });
  const convertible = integerFields(schema);
  return (input: unknown) => {
    let value = input;
    if (convertible.length > 0 && value !== null && typeof value === "object") {
      const converted: Record<string, unknown> = { ...(value as Record<string, unknown>) };
      for (const key of convertible) {
        const raw = converted[key];
        if (typeof raw === "string" && DIGITS.test(raw)) converted[key] = Number(raw);
      }
      value = converted;
    }
    // The installed compiler answers synchronously, always with `{ value }` or `{ error: [...] }`.
    const result = check(value) as { error?: { instancePath: string; message?: string }[] };
    if (!result.error) return { value: Value.Default(schema, value) };
    return { error: describeErrors(result.error, schema as SchemaFields, value) };
  };
};
