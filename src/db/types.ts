/**
 * How taskqueue reads column values: int8 (bigint) and int8[] as JS numbers (job ids and counts
 * stay far below 2^53), every other type as node-postgres reads it by default.
 *
 * This is attached to each of taskqueue's own queries (`Statement.types`, the per-query `types` of
 * node-postgres, which a query's result uses instead of its client's parsers) and to the
 * connections taskqueue opens. It is never installed globally with `pg.types.setTypeParser`: an
 * application that imports taskqueue keeps reading int8 as strings from its own queries, while
 * taskqueue's queries read numbers on any client, the application's own included (a transactional
 * enqueue with `{client}`, a pool passed to `TaskQueue`).
 */
import pg from "pg";

/** Type OIDs of pg_type. */
const INT8 = 20;
const INT8_ARRAY = 1016;

/** An int8 array as parsed by node-postgres (strings, nulls, nested for more dimensions) → numbers. */
type Int8Array = ReadonlyArray<string | null | Int8Array>;
type NumberArray = Array<number | null | NumberArray>;

function int8ArrayToNumbers(values: Int8Array): NumberArray {
  return values.map((value) =>
    value === null
      ? null
      : typeof value === "string"
        ? Number.parseInt(value, 10)
        : int8ArrayToNumbers(value),
  );
}

/** node-postgres's parser of a type (its declared OIDs are an enum that lacks the array types). */
const defaultParser = pg.types.getTypeParser as (oid: number, format?: string) => (value: string) => unknown;

const parseInt8 = (value: string): number => Number.parseInt(value, 10);
const parseInt8Array = (value: string): NumberArray | null => {
  const parsed = defaultParser(INT8_ARRAY, "text")(value) as Int8Array | null;
  return parsed === null ? null : int8ArrayToNumbers(parsed);
};

/**
 * The type parsers of taskqueue's queries and connections (node-postgres `CustomTypesConfig`):
 * int8 and int8[] as numbers in text format, anything else as `pg.types` parses it.
 *
 * It has no `length`: node-postgres also hands a query's `types` to the Parse message as the
 * parameter types, and an object without a length declares none (the server infers them).
 */
export const TASKQUEUE_TYPES: pg.CustomTypesConfig = {
  getTypeParser: ((oid: number, format?: "text" | "binary") => {
    if (format !== "binary") {
      if (oid === INT8) return parseInt8;
      if (oid === INT8_ARRAY) return parseInt8Array;
    }
    return defaultParser(oid, format);
  }) as pg.CustomTypesConfig["getTypeParser"],
};
