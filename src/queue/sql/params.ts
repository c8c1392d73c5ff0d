/**
 * Array parameters written as text by hand. node-postgres turns a JavaScript array into an array
 * literal element by element, quoting and escaping each one as a string; for the JSON texts of a
 * batch (payloads, results), whose every quote needs an escape, that was a tenth of the CPU of a
 * 1,000-job POST /jobs/batch. These build the same values directly:
 * - numbers as an array literal `{1,2,3}` (for `bigint[]`, `int[]`, `smallint[]`, `float8[]`);
 * - JSON texts as one JSON array `[…,…]` (read with `jsonb_array_elements($n::jsonb)`).
 * Strings and timestamps are left to node-postgres.
 */

/** `{1,2,3}` for a `bigint[]`, `int[]`, `smallint[]` or `float8[]` parameter. Finite numbers only. */
export const numberArray = (values: readonly number[]): string => `{${values.join(",")}}`;

/** `[a,b]` for a `jsonb` parameter read with `jsonb_array_elements`: each text must be valid JSON. */
export const jsonTextArray = (jsonTexts: readonly string[]): string => `[${jsonTexts.join(",")}]`;
