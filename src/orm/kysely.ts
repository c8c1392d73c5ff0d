/**
 * `taskqueue/kysely`: enqueue inside a Kysely transaction.
 *
 * ```ts
 * import { kyselyClient } from "taskqueue/kysely";
 * await db.transaction().execute(async (trx) => {
 *   await trx.insertInto("orders").values(order).execute();
 *   await queue.addJob({ type: "send_receipt", payload: { orderId: order.id } }, { client: kyselyClient(trx) });
 * }); // the job exists only if this commits
 * ```
 * Kysely must use its PostgreSQL dialect on the database of the queue's schema.
 */
import { CompiledQuery, type Kysely } from "kysely";
import type { Queryable } from "../db/pool.js";
import { rawClient } from "./raw-client.js";

/**
 * A client for `addJob`/`addJobs` (`{ client }`) that runs the insert on `db`: a Kysely
 * transaction (`trx`) to enqueue atomically with it, or a `Kysely` instance (autocommit).
 */
// biome-ignore lint/suspicious/noExplicitAny: any database interface; the statements are raw SQL
export function kyselyClient(db: Kysely<any>): Queryable {
  return rawClient(async (text, values) => {
    const result = await db.executeQuery<Record<string, unknown>>(CompiledQuery.raw(text, [...values]));
    return result.rows as Record<string, unknown>[];
  });
}
