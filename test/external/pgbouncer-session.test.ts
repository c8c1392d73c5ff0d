/**
 * Behind PgBouncer in session mode every client connection has a server session of its own for as
 * long as it is open, which is what a worker's advisory locks and LISTEN need: the exactly-once
 * contention test (../helpers/contention.ts) passes through it, the probe finds a session, and
 * statements stay named.
 */
import assert from "node:assert/strict";
import { after, before, it } from "node:test";
import { probePooling } from "../../src/queue/pooling.js";
import { createExecutionsTable, runContention } from "../helpers/contention.js";
import { createTestDb, type TestDb } from "../helpers/db.js";
import { type PgBouncer, startPgBouncer } from "../helpers/pgbouncer.js";
import { cliEnv } from "../helpers/process.js";

let db: TestDb;
let bouncer: PgBouncer;

before(async () => {
  db = await createTestDb();
  await createExecutionsTable(db);
  // Session mode needs a server connection per client session: 3 workers × (lock session, LISTEN,
  // a pool of 2, the record handler's pool of 4) plus the probe's two at start.
  bouncer = await startPgBouncer(db.config.databaseUrl as string, "session", 30);
});
after(async () => {
  await bouncer?.stop();
  await db?.drop();
});

it("the probe finds a session of its own through a session-mode pooler", async () => {
  const probe = await probePooling({ connectionString: bouncer.url });
  assert.equal(probe.mode, "session", probe.evidence);
});

it("3 worker processes x concurrency 8 through PgBouncer run each of 3,000 jobs exactly once", async () => {
  await runContention(db, {
    env: cliEnv(db, { DATABASE_URL: bouncer.url, POOL_SIZE: "2" }),
    jobs: 3000,
  });
});
