/**
 * The shared part of the ORM adapters (kysely.ts, drizzle.ts, knex.ts, prisma.ts): a
 * {@link Queryable} that runs taskqueue's enqueue statements through an ORM's transaction, so a
 * job is inserted, and its workers notified, only if that transaction commits
 * (`queue.addJob(spec, { client: kyselyClient(trx) })`). The statements themselves stay in
 * src/queue; an adapter only carries their text and values.
 *
 * An ORM reads column values its own way, so rows are brought back to what taskqueue's own
 * connections read (src/db/types.ts): int8 as a number (node-postgres answers a string, Prisma a
 * bigint) and timestamps as `Date` (Drizzle answers strings).
 */
import type { Queryable } from "../db/pool.js";

/** Runs one statement with `$n` parameters on the ORM's transaction; answers its rows. */
export type RawRunner = (text: string, values: readonly unknown[]) => Promise<Record<string, unknown>[]>;

/** Row fields of taskqueue's results that are int8 columns (job ids). */
const INT8_FIELDS = new Set(["id", "jobId", "job_id"]);

/** Row fields of taskqueue's results that are timestamptz columns (a job as reads return it). */
const TIMESTAMP_FIELDS = new Set([
  "runAt",
  "claimedAt",
  "startedAt",
  "heartbeatAt",
  "completedAt",
  "createdAt",
  "diedAt",
  "replayedAt",
]);

/** A row as taskqueue's own connections would read it (see the top of this file). Changes `row` in place. */
function normalizeRow(row: Record<string, unknown>): Record<string, unknown> {
  for (const [key, value] of Object.entries(row)) {
    if (typeof value === "bigint") row[key] = Number(value);
    else if (typeof value === "string") {
      if (INT8_FIELDS.has(key)) row[key] = Number.parseInt(value, 10);
      else if (TIMESTAMP_FIELDS.has(key)) row[key] = new Date(value);
    }
  }
  return row;
}

/**
 * A {@link Queryable} over `run`: what the enqueue functions need of a client (`query` with a
 * statement object or a text), answering `{ rows, rowCount }` with normalised rows.
 */
export function rawClient(run: RawRunner): Queryable {
  const query = async (
    config: string | { text: string; values?: readonly unknown[] },
    values?: unknown[],
  ) => {
    const text = typeof config === "string" ? config : config.text;
    const params = (typeof config === "string" ? values : config.values) ?? [];
    const rows = (await run(text, params)).map(normalizeRow);
    return { rows, rowCount: rows.length, command: "", oid: 0, fields: [] };
  };
  return { query } as unknown as Queryable;
}
