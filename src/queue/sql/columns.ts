/**
 * Select lists derived from the job-shape tables (../job-shape.ts): each column aliased to its
 * library field name (`max_retries AS "maxRetries"`), so that node-postgres builds rows that are
 * already {@link Job}s (or claimed jobs, or dead-letter entries) and nothing maps them again.
 * A quoted alias keeps its case; a column whose name is its field's is left as it is.
 */
import {
  CLAIMED_FIELDS,
  DEAD_LETTER_FIELDS,
  type DeadLetterField,
  JOB_FIELDS,
  type JobField,
} from "../job-shape.js";

/** `column` or `column AS "field"`, optionally qualified by `table`. */
function selectItem(column: string, field: string, table?: string): string {
  const source = table === undefined ? column : `${table}.${column}`;
  return column === field && table === undefined ? column : `${source} AS "${field}"`;
}

/** Column of a job field. */
export function jobColumn(field: JobField): string {
  return (JOB_FIELDS.find((f) => f.field === field) as { column: string }).column;
}

/** Select list of the given job fields (all by default), each named as its field. */
export function jobSelectList(
  fields: readonly JobField[] = JOB_FIELDS.map((f) => f.field),
  table?: string,
): string {
  return fields.map((field) => selectItem(jobColumn(field), field, table)).join(", ");
}

/** Every field of a job, as every read of whole jobs returns them. */
export const JOB_SELECT_LIST = jobSelectList();

/** The fields of a claimed job (types.ts `ClaimedJob`). */
export const CLAIMED_SELECT_LIST = jobSelectList(CLAIMED_FIELDS);

/** Select list of the given dead-letter fields (all by default), each named as its field. */
export function deadLetterSelectList(
  fields: readonly DeadLetterField[] = DEAD_LETTER_FIELDS.map((f) => f.field),
): string {
  return DEAD_LETTER_FIELDS.filter((f) => fields.includes(f.field))
    .map((f) => selectItem(f.column, f.field))
    .join(", ");
}

/** Every field of a dead-letter entry (types.ts `DeadLetterJob`). */
export const DEAD_LETTER_SELECT_LIST = deadLetterSelectList();
