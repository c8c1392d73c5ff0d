/**
 * Request validation from the TypeBox schemas in schemas.ts, compiled with TypeBox's own compiler.
 *
 * Why not Fastify's default Ajv set-up: it coerces types in every part of the request, so a body
 * `{"max_retries": null}` would become `0` and `{"type": 5}` would become `"5"`. Here bodies are
 * checked as sent (no coercion), and only path and query parameters, which are always text, are
 * converted: a string of digits becomes a number for an integer field, nothing else is converted
 * (`"2.5"`, `"1e3"`, `" 7"` stay strings and fail an integer check).
 *
 * Every problem is reported (not just the first), one per field, as an Ajv-compatible error object
 * (`instancePath`, `keyword`, `message`, `params`), which problem.ts turns into RFC 9457 `errors`.
 */
import { FormatRegistry, type TSchema } from "@sinclair/typebox";
import { TypeCompiler } from "@sinclair/typebox/compiler";
import { type ValueError, ValueErrorType } from "@sinclair/typebox/errors";
import { Value } from "@sinclair/typebox/value";
import type { FastifySchemaCompiler } from "fastify";
import { isOffsetDateTime } from "../queue/validate.js";

// TypeBox keeps formats in one process-wide registry; "date-time" is defined here, once, for
// every schema the API compiles (request bodies and query strings alike).
FormatRegistry.Set("date-time", isOffsetDateTime);

/** A validation error in the shape Fastify and problem.ts expect (a subset of Ajv's). */
export interface SchemaValidationError {
  /** JSON pointer of the bad value, e.g. `/jobs/3/priority`; for a missing or unknown property, that property. */
  instancePath: string;
  /** Always empty: TypeBox does not report the schema location. */
  schemaPath: string;
  /** What failed: `required`, `additionalProperties`, `type`, `minimum`, `format`, ... */
  keyword: string;
  /** Human-readable, starts lower-case, e.g. `must be an integer from 1 to 10`. */
  message: string;
  params: Record<string, unknown>;
}

type SchemaFields = {
  type?: unknown;
  minimum?: number;
  maximum?: number;
  minLength?: number;
  maxLength?: number;
  minItems?: number;
  maxItems?: number;
  format?: string;
  anyOf?: { const?: unknown }[];
  enum?: unknown[];
};

function describeSchema(schema: SchemaFields): string | null {
  if (Array.isArray(schema.enum)) return `must be one of: ${schema.enum.map(String).join(", ")}`;
  switch (schema.type) {
    case "integer":
      if (schema.minimum !== undefined && schema.maximum !== undefined)
        return `must be an integer from ${schema.minimum} to ${schema.maximum}`;
      if (schema.minimum !== undefined) return `must be an integer of at least ${schema.minimum}`;
      return "must be an integer";
    case "string":
      if (schema.format === "date-time")
        return "must be an ISO-8601 date-time with a UTC offset, e.g. 2030-01-01T12:00:00Z (a time without offset is ambiguous)";
      if (schema.minLength !== undefined && schema.maxLength !== undefined)
        return `must be a string of ${schema.minLength} to ${schema.maxLength} characters`;
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

function toSchemaError(error: ValueError): SchemaValidationError {
  const base = { instancePath: error.path, schemaPath: "", params: {} };
  const schema = error.schema as SchemaFields;
  switch (error.type) {
    case ValueErrorType.ObjectRequiredProperty:
      return { ...base, keyword: "required", message: "is required" };
    case ValueErrorType.ObjectAdditionalProperties:
      return {
        ...base,
        keyword: "additionalProperties",
        message: "is not a known field (unknown fields are rejected)",
      };
    case ValueErrorType.StringPattern:
      return {
        ...base,
        keyword: "pattern",
        message: "must not contain a NUL character (\\u0000) or an unpaired surrogate",
      };
  }
  const message = describeSchema(schema) ?? error.message.replace(/^Expected/, "must be");
  const keyword = ValueErrorType[error.type] ?? "type";
  return { ...base, keyword, message };
}

/** Most errors reported for one request: enough to name every field of a large bad batch. */
const MAX_ERRORS = 1000;

/** Every problem of `value` against the compiled schema, at most one per path, at most MAX_ERRORS. */
function collectErrors(errors: Iterable<ValueError>): SchemaValidationError[] {
  const seen = new Set<string>();
  const out: SchemaValidationError[] = [];
  for (const error of errors) {
    if (seen.has(error.path)) continue;
    seen.add(error.path);
    out.push(toSchemaError(error));
    if (out.length >= MAX_ERRORS) break;
  }
  return out;
}

/** Integer fields of a flat object schema (path and query parameters). */
function numericFields(schema: TSchema): Set<string> {
  const properties = (schema as { properties?: Record<string, { type?: unknown }> }).properties ?? {};
  return new Set(
    Object.entries(properties)
      .filter(([, property]) => property.type === "integer")
      .map(([key]) => key),
  );
}

const DIGITS = /^-?\d{1,20}$/;

/**
 * Fastify validator compiler: TypeBox checks with every error listed, no coercion of bodies; digit
 * strings of path and query parameters become numbers for integer fields, and their defaults are
 * filled in. Body defaults are not filled in here: the ledger applies the same documented defaults
 * (validateJobSpec), and filling them walked every job of a batch a second time.
 */
export const typeBoxValidatorCompiler: FastifySchemaCompiler<TSchema> = ({ schema, httpPart }) => {
  const check = TypeCompiler.Compile(schema);
  const convertible = httpPart === "body" ? new Set<string>() : numericFields(schema);
  return (input: unknown) => {
    let value = input;
    if (convertible.size > 0 && value !== null && typeof value === "object") {
      const converted: Record<string, unknown> = { ...(value as Record<string, unknown>) };
      for (const key of convertible) {
        const raw = converted[key];
        if (typeof raw === "string" && DIGITS.test(raw)) converted[key] = Number(raw);
      }
      value = converted;
    }
    if (check.Check(value)) return { value: httpPart === "body" ? value : Value.Default(schema, value) };
    return { error: collectErrors(check.Errors(value)) };
  };
};
