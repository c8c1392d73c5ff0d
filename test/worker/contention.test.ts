/**
 * Exactly-once under contention (DESIGN.md §5): three worker processes with concurrency 8 each
 * drain 3,000 jobs whose handler appends the job id to a table of its own (../helpers/contention.ts;
 * test/external/pgbouncer-session.test.ts runs the same through PgBouncer).
 */
import { after, before, it } from "node:test";
import { createExecutionsTable, runContention } from "../helpers/contention.js";
import { createTestDb, type TestDb } from "../helpers/db.js";
import { cliEnv } from "../helpers/process.js";

let db: TestDb;
before(async () => {
  db = await createTestDb();
  await createExecutionsTable(db);
});
after(async () => {
  await db.drop();
});

it("3 worker processes x concurrency 8 run each of 3,000 jobs exactly once", async () => {
  await runContention(db, { env: cliEnv(db), jobs: 3000 });
});
