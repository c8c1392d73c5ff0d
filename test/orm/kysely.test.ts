/** taskqueue/kysely (issue 13 item 6): enqueue inside a Kysely transaction; see support.ts. */
import { Kysely, PostgresDialect } from "kysely";
import pg from "pg";
import { kyselyClient } from "../../src/orm/kysely.js";
import { DATABASE_URL } from "../helpers/db.js";
import { describeOrmAdapter } from "./support.js";

interface Database {
  orders: { ref: string };
}

describeOrmAdapter("kysely", async (db) => {
  const kysely = new Kysely<Database>({
    dialect: new PostgresDialect({ pool: new pg.Pool({ connectionString: DATABASE_URL, max: 2 }) }),
  });
  return {
    transaction: (fn) =>
      kysely.transaction().execute((trx) =>
        fn(kyselyClient(trx), async (ref) => {
          await trx.withSchema(db.schema).insertInto("orders").values({ ref }).execute();
        }),
      ),
    close: () => kysely.destroy(),
  };
});
