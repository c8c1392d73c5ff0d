/**
 * Array parameters written as text by hand. node-postgres turns a JavaScript array into an array
 * literal element by element, quoting and escaping each one as a string; for the JSON texts of a
 * batch (payloads, results), whose every quote needs an escape, that was a tenth of the CPU of a
 * 1,000-job POST /jobs/batch. These build the same values directly:
 * - numbers as an array literal `{1,2,3}` (for `bigint[]`, `int[]`, `smallint[]`, `float8[]`);
 * - JSON texts as one JSON array `[…,…]`, read with `jsonb_array_elements($n::jsonb)`; or, when
 *   the array is large, with `json_array_elements($n::json)` and each element cast to jsonb
 *   ({@link jsonArrayType}).
 * Strings and timestamps are left to node-postgres.
 */

/** `{1,2,3}` for a `bigint[]`, `int[]`, `smallint[]` or `float8[]` parameter. Finite numbers only. */
export const numberArray = (values: readonly number[]): string => `{${values.join(",")}}`;

/**
 * `{"(0,1)",NULL}` for a `tid[]` parameter: row versions as PostgreSQL prints a `ctid`
 * (`(block,offset)`, as a claim returns them), null as NULL.
 */
export const tidArray = (versions: readonly (string | null)[]): string =>
  `{${versions.map((v) => (v === null ? "NULL" : `"${v}"`)).join(",")}}`;

/** `[a,b]` for a JSON array parameter (see {@link jsonArrayType}): each text must be valid JSON. */
export const jsonTextArray = (jsonTexts: readonly string[]): string => `[${jsonTexts.join(",")}]`;

/** How a statement reads a JSON array parameter: as one `jsonb` value, or as one `json` value. */
export type JsonArrayType = "jsonb" | "json";

/**
 * Above this many characters a JSON array parameter is read as `json`. PostgreSQL caps one jsonb
 * value at 256 MiB, and jsonb can take several times the text's size (small numbers), while
 * 10,000 payloads (or a batch of results) of up to 1 MiB each can add up to gigabytes; a `json`
 * value goes to 1 GB, like an array of texts. Below it, `jsonb` is read about 6 % faster (a `json`
 * array is parsed once to split it and again for each element).
 */
export const JSONB_ARRAY_MAX_CHARS = 16 * 1024 * 1024;

/** The type to read the JSON array `text` (from {@link jsonTextArray}) as. */
export const jsonArrayType = (text: string): JsonArrayType =>
  text.length <= JSONB_ARRAY_MAX_CHARS ? "jsonb" : "json";

/** `jsonb_array_elements($param::jsonb)` or `json_array_elements($param::json)`. */
export const jsonArrayElements = (param: string, type: JsonArrayType): string =>
  `${type}_array_elements(${param}::${type})`;
