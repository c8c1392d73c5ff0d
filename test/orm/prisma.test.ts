/**
 * taskqueue/prisma (issue 13 item 6): enqueue inside a Prisma 7 interactive transaction, over
 * `@prisma/adapter-pg` (no query engine binary); see support.ts. The client is generated from
 * test/fixtures/prisma/schema.prisma and committed; regenerate it after changing the schema with
 * `PRISMA_SCHEMA_ENGINE_BINARY=/bin/false npx prisma generate --schema test/fixtures/prisma/schema.prisma`
 * (generating needs no engine, so the variable only stops a download).
 */
import { PrismaPg } from "@prisma/adapter-pg";
import pg from "pg";
import { prismaClient } from "../../src/orm/prisma.js";
import { PrismaClient } from "../fixtures/prisma/generated/client.js";
import { DATABASE_URL } from "../helpers/db.js";
import { describeOrmAdapter } from "./support.js";

describeOrmAdapter("prisma", async (db) => {
  const pool = new pg.Pool({ connectionString: DATABASE_URL, max: 2 });
  // The model's table `orders` is the test schema's.
  const prisma = new PrismaClient({ adapter: new PrismaPg(pool, { schema: db.schema }) });
  return {
    transaction: (fn) =>
      prisma.$transaction((tx) =>
        fn(prismaClient(tx), async (ref) => {
          await tx.order.create({ data: { ref } });
        }),
      ),
    close: async () => {
      await prisma.$disconnect();
      await pool.end();
      // The generated client's `import * as process from "node:process"` reads every property of
      // the namespace, process.stdin included, which opens a pipe nothing reads; the leak guard
      // would report it.
      process.stdin.destroy();
    },
  };
});
