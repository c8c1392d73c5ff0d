import { createHash } from "node:crypto";
import type pg from "pg";
import { TASKQUEUE_TYPES } from "../../db/types.js";
import { JOB_SELECT_LIST } from "./columns.js";

/**
 * A named SQL statement. `name` doubles as the prepared-statement name and includes a tag of the schema,
 * so one connection can serve several schemas (as graphile-worker and pg-boss name theirs). Every value is a `$n` parameter;
 * the schema identifier is the only text spliced in, quoted once by {@link quoteIdentifier}.
 */
export interface Statement {
  readonly name: string;
  readonly text: string;
  /**
   * How the result's columns are parsed (node-postgres per-query `types`): int8 and int8[] as
   * numbers, so that taskqueue's queries read numbers on any client, a host application's included,
   * without a global type parser (src/db/types.ts). Set by {@link statement}; a hand-written
   * statement that returns no int8 may leave it out.
   */
  readonly types?: pg.CustomTypesConfig;
}

/** Quotes an SQL identifier (doubling embedded quotes). The config already restricts the characters. */
export function quoteIdentifier(identifier: string): string {
  return `"${identifier.replaceAll('"', '""')}"`;
}

/** Quotes an SQL string literal (doubling embedded single quotes). */
export function quoteLiteral(value: string): string {
  return `'${value.replaceAll("'", "''")}'`;
}

const schemaTags = new Map<string, string>();

/**
 * A short, stable tag of a schema name for statement names: PostgreSQL truncates identifiers, and
 * so prepared-statement names, at 63 bytes, and two long schema names sharing a prefix would
 * otherwise collide on one connection.
 */
function schemaTag(schema: string): string {
  let tag = schemaTags.get(schema);
  if (!tag) {
    tag = createHash("sha256").update(schema).digest("hex").slice(0, 12);
    schemaTags.set(schema, tag);
  }
  return tag;
}

/**
 * Builds a statement for `schema`: `$S` in `text` becomes the quoted schema identifier; the name
 * is `taskqueue_<name>_<schema tag>`, well under PostgreSQL's 63-byte limit; `types` reads int8 as
 * numbers (see {@link Statement.types}).
 */
export function statement(schema: string, name: string, text: string): Statement {
  return {
    name: `taskqueue_${name}_${schemaTag(schema)}`,
    text: text.replaceAll("$S", quoteIdentifier(schema)),
    types: TASKQUEUE_TYPES,
  };
}

/**
 * The fence of every write after a claim: this job (`i.id`, reached through the primary key with
 * `id = ANY(idsParam)`), this attempt, this worker, still in one of `heldStatuses`.
 *
 * The status test is written so that the planner cannot answer it with jobs_stale_idx. That index
 * keeps an entry for every job that was held since the last vacuum, and a bitmap scan never marks
 * the dead ones: after a drain of 100,000 jobs each completion of 400 scanned 100,000 entries
 * (measured: 3–7 ms of a 13 ms statement, growing with throughput). Through the primary key a
 * write costs its batch, whatever the history. `test/queue/plans.test.ts` checks the plan.
 */
export const fence = (p: {
  idsParam: string;
  workerParam: string;
  heldStatuses: string;
  /** How the rows are found instead of `j.id = ANY(idsParam)` (the completion's TID scan, finish.ts). */
  locate?: string;
}): string =>
  `${p.locate ?? `j.id = ANY(${p.idsParam}::bigint[])`} AND j.id = i.id AND j.attempt = i.attempt
       AND j.worker_id = ${p.workerParam} AND coalesce(j.status, '') IN (${p.heldStatuses})`;

/**
 * The second step of a write that first finds its rows by version (a TID scan, CTE `found`) and
 * then by id the rows that moved since (the claim and the completion): the ids of relation `all`
 * (a CTE with an `id` column) that `found` did not return, as a `bigint[]`. When `found` returned
 * as many rows as `all` holds, none, without computing the difference (the common case).
 */
export const idsNotFound = (all: string, found: string): string =>
  `CASE WHEN (SELECT count(*) FROM ${found}) = (SELECT count(*) FROM ${all}) THEN '{}'::bigint[]
        ELSE ARRAY(SELECT id FROM ${all} EXCEPT ALL SELECT id FROM ${found}) END::bigint[]`;

/**
 * Columns of a job as every read returns them, each named as its field of `Job` (derived from
 * ../job-shape.ts by columns.ts), so a row is a `Job` as it arrives.
 */
export const JOB_COLUMNS = JOB_SELECT_LIST;

/**
 * Advisory-lock key of a job, as two int4 halves: the lock class (a per-schema constant passed as
 * `$lockClass`) and the job id modulo 2^31. The two-key form (`objsubid = 2` in `pg_locks`) never
 * meets single-bigint-key users of advisory locks. See docs/architecture.md, "Advisory lock keys".
 */
export const lockKey = (lockClassParam: string, idExpr: string) =>
  `${lockClassParam}::int4, (${idExpr} % 2147483648)::int4`;
