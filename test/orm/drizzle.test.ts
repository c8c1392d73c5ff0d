/** taskqueue/drizzle (issue 13 item 6): enqueue inside a Drizzle transaction; see support.ts. */

import { drizzle } from "drizzle-orm/node-postgres";
import { pgSchema, text } from "drizzle-orm/pg-core";
import pg from "pg";
import { drizzleClient } from "../../src/orm/drizzle.js";
import { DATABASE_URL } from "../helpers/db.js";
import { describeOrmAdapter } from "./support.js";

describeOrmAdapter("drizzle", async (db) => {
  const orders = pgSchema(db.schema).table("orders", { ref: text().primaryKey() });
  const pool = new pg.Pool({ connectionString: DATABASE_URL, max: 2 });
  const orm = drizzle(pool);
  return {
    transaction: (fn) =>
      orm.transaction((tx) =>
        fn(drizzleClient(tx), async (ref) => {
          await tx.insert(orders).values({ ref });
        }),
      ),
    close: () => pool.end(),
  };
});
