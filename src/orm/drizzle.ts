/**
 * `taskqueue/drizzle`: enqueue inside a Drizzle transaction (drizzle-orm's node-postgres or
 * postgres.js driver).
 *
 * ```ts
 * import { drizzleClient } from "taskqueue/drizzle";
 * await db.transaction(async (tx) => {
 *   await tx.insert(orders).values(order);
 *   await queue.addJob({ type: "send_receipt", payload: { orderId: order.id } }, { client: drizzleClient(tx) });
 * }); // the job exists only if this commits
 * ```
 */
import { type SQL, sql } from "drizzle-orm";
import type { Queryable } from "../db/pool.js";
import { rawClient } from "./raw-client.js";

/** What the adapter needs of a Drizzle database or transaction: `execute` of an SQL object. */
export interface DrizzleExecutor {
  execute(query: SQL): PromiseLike<unknown>;
}

/** A `$n` placeholder of a statement's text. */
const PLACEHOLDER = /\$(\d+)/g;

/**
 * The statement as a Drizzle SQL object: the text between placeholders verbatim, each `$n` a
 * bound parameter (`sql.param`, so that an array stays one parameter instead of a list).
 */
function toSql(text: string, values: readonly unknown[]): SQL {
  const chunks: SQL[] = [];
  let last = 0;
  for (const match of text.matchAll(PLACEHOLDER)) {
    chunks.push(sql.raw(text.slice(last, match.index)));
    chunks.push(sql`${sql.param(values[Number(match[1]) - 1])}`);
    last = match.index + match[0].length;
  }
  chunks.push(sql.raw(text.slice(last)));
  return sql.join(chunks);
}

/**
 * A client for `addJob`/`addJobs` (`{ client }`) that runs the insert on `db`: a Drizzle
 * transaction (`tx`) to enqueue atomically with it, or the database object (autocommit).
 */
export function drizzleClient(db: DrizzleExecutor): Queryable {
  return rawClient(async (text, values) => {
    const result = (await db.execute(toSql(text, values))) as { rows?: Record<string, unknown>[] };
    // node-postgres answers a QueryResult; postgres.js an array of rows.
    return Array.isArray(result) ? (result as Record<string, unknown>[]) : (result.rows ?? []);
  });
}
