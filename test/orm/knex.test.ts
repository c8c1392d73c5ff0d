/** taskqueue/knex (issue 13 item 6): enqueue inside a Knex transaction; see support.ts. */
import knex from "knex";
import { knexClient } from "../../src/orm/knex.js";
import { DATABASE_URL } from "../helpers/db.js";
import { describeOrmAdapter } from "./support.js";

describeOrmAdapter("knex", async (db) => {
  const k = knex({ client: "pg", connection: DATABASE_URL, pool: { min: 0, max: 2 } });
  return {
    transaction: (fn) =>
      k.transaction((trx) =>
        fn(knexClient(trx), async (ref) => {
          await trx.withSchema(db.schema).insert({ ref }).into("orders");
        }),
      ),
    close: () => k.destroy(),
  };
});
