/**
 * The two TypeBox kinds of taskqueue's API schemas, and their registration.
 *
 * TypeBox keeps custom kinds and formats in process-wide registries that the host application
 * shares (`TypeRegistry`, `FormatRegistry`). Importing taskqueue registers nothing: a host's own
 * `date-time` format, for one, stays its own. Our checks live under kinds named `TaskQueue:*`,
 * which no one else uses, and are registered by {@link registerApiKinds} when `buildApp` runs,
 * before any schema is compiled (TypeBox's compiler refuses a schema of an unknown kind).
 * test/api/registries.test.ts checks both halves.
 */
import { Kind, type SchemaOptions, type TUnsafe, Type, TypeRegistry } from "@sinclair/typebox";
import { isOffsetDateTime } from "../queue/validate.js";

/** Kind of a string that is one of a list (`enum`). */
export const STRING_ENUM_KIND = "TaskQueue:StringEnum";

/** Kind of an ISO-8601 date-time with a UTC offset (`format: "date-time"` in the OpenAPI document). */
export const OFFSET_DATE_TIME_KIND = "TaskQueue:OffsetDateTime";

/**
 * A string that is one of `values`, as a plain JSON-schema `enum` (Swagger UI shows a drop-down;
 * a union of literals would show `anyOf`).
 */
export function StringEnum<T extends readonly string[]>(
  values: T,
  options: SchemaOptions = {},
): TUnsafe<T[number]> {
  return Type.Unsafe<T[number]>({ ...options, [Kind]: STRING_ENUM_KIND, type: "string", enum: [...values] });
}

/**
 * An ISO-8601 date-time that carries a UTC offset (`Z`, `+02:00` or `+0200`): RFC 3339, plus what
 * the ledger also accepts (seconds optional, a space instead of `T`), checked by isOffsetDateTime:
 * a time without offset is refused (ambiguous), so is an impossible date such as 2030-02-30.
 * The OpenAPI document shows it as `format: "date-time"`.
 */
export function OffsetDateTime(options: SchemaOptions = {}): TUnsafe<string> {
  return Type.Unsafe<string>({
    examples: ["2030-01-01T12:00:00Z"],
    ...options,
    [Kind]: OFFSET_DATE_TIME_KIND,
    type: "string",
    format: "date-time",
  });
}

/**
 * Registers the checks of {@link STRING_ENUM_KIND} and {@link OFFSET_DATE_TIME_KIND} in TypeBox's
 * TypeRegistry (idempotent; nothing else is touched). Called by buildApp.
 */
export function registerApiKinds(): void {
  if (!TypeRegistry.Has(STRING_ENUM_KIND))
    TypeRegistry.Set<{ enum: readonly string[] }>(
      STRING_ENUM_KIND,
      (schema, value) => typeof value === "string" && schema.enum.includes(value),
    );
  if (!TypeRegistry.Has(OFFSET_DATE_TIME_KIND))
    TypeRegistry.Set(
      OFFSET_DATE_TIME_KIND,
      (_schema, value) => typeof value === "string" && isOffsetDateTime(value),
    );
}
