/**
 * Array parameters written as text by hand. node-postgres turns a JavaScript array into an array
 * literal element by element, quoting and escaping each one as a string; for the JSON texts of a
 * batch (payloads, results), whose every quote needs an escape, that was a tenth of the CPU of a
 * 1,000-job POST /jobs/batch. These build the same values directly:
 * - numbers as an array literal `{1,2,3}` (for `bigint[]`, `int[]`, `smallint[]`, `float8[]`);
 * - JSON texts as one JSON array `[…,…]`, read with `json_array_elements($n::json)` and each element
 *   cast to jsonb. Not one `jsonb` value: PostgreSQL caps a jsonb at 256 MiB, and 10,000 payloads
 *   (or a batch of results) of up to 1 MiB each can be more; a `json` value, like the array of
 *   texts before it, goes up to 1 GB.
 * Strings and timestamps are left to node-postgres.
 */

/** `{1,2,3}` for a `bigint[]`, `int[]`, `smallint[]` or `float8[]` parameter. Finite numbers only. */
export const numberArray = (values: readonly number[]): string => `{${values.join(",")}}`;

/** `[a,b]` for a `json` parameter read with `json_array_elements`: each text must be valid JSON. */
export const jsonTextArray = (jsonTexts: readonly string[]): string => `[${jsonTexts.join(",")}]`;
