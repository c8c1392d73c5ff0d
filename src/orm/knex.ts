/**
 * `taskqueue/knex`: enqueue inside a Knex transaction (the `pg` client).
 *
 * ```ts
 * import { knexClient } from "taskqueue/knex";
 * await knex.transaction(async (trx) => {
 *   await trx("orders").insert(order);
 *   await queue.addJob({ type: "send_receipt", payload: { orderId: order.id } }, { client: knexClient(trx) });
 * }); // the job exists only if this commits
 * ```
 */
import type { Queryable } from "../db/pool.js";
import { rawClient } from "./raw-client.js";

/** What the adapter needs of a Knex instance or transaction: `raw` with positional bindings. */
export interface KnexRaw {
  raw(sql: string, bindings: readonly unknown[]): PromiseLike<unknown>;
}

/**
 * The statement in Knex's binding syntax: each `$n` becomes `?` (its value appended to the
 * bindings, so a parameter used twice is bound twice), and a literal `?` (a jsonb operator) is
 * escaped as `\?`.
 */
function toKnex(text: string, values: readonly unknown[]): { sql: string; bindings: unknown[] } {
  const bindings: unknown[] = [];
  const sql = text.replace(/\?|\$(\d+)/g, (_match, index: string | undefined) => {
    if (index === undefined) return "\\?";
    bindings.push(values[Number(index) - 1]);
    return "?";
  });
  return { sql, bindings };
}

/**
 * A client for `addJob`/`addJobs` (`{ client }`) that runs the insert on `db`: a Knex
 * transaction (`trx`) to enqueue atomically with it, or the Knex instance (autocommit).
 */
export function knexClient(db: KnexRaw): Queryable {
  return rawClient(async (text, values) => {
    const { sql, bindings } = toKnex(text, values);
    const result = (await db.raw(sql, bindings)) as { rows?: Record<string, unknown>[] };
    return result.rows ?? [];
  });
}
