/**
 * Behind PgBouncer in transaction mode (`default_pool_size=3`, the set-up): the API and
 * enqueues inside the application's transaction work, because statements go out unnamed once the
 * probe finds the pooler; a worker refuses to start, naming the pooling mode. The control shows the
 * failure this avoids: named statements of two clients collide on one server session.
 */
import assert from "node:assert/strict";
import { execFile } from "node:child_process";
import { after, before, it } from "node:test";
import { promisify } from "node:util";
import pg from "pg";
import { type RunningService, startService } from "../../src/cli/service.js";
import { resolveConfig } from "../../src/config.js";
import { createPool } from "../../src/db/pool.js";
import { PoolingModeError } from "../../src/errors.js";
import { TaskQueue } from "../../src/index.js";
import { Ledger } from "../../src/queue/ledger.js";
import { createTestDb, type TestDb, testOptions } from "../helpers/db.js";
import { type PgBouncer, startPgBouncer } from "../helpers/pgbouncer.js";
import { CLI, cliEnv } from "../helpers/process.js";

const run = promisify(execFile);
let db: TestDb;
let bouncer: PgBouncer;

before(async () => {
  db = await createTestDb();
  bouncer = await startPgBouncer(db.config.databaseUrl as string, "transaction", 3);
});
after(async () => {
  await bouncer?.stop();
  await db?.drop();
});

it("control: named statements of two clients collide on one server session", async () => {
  const pool = createPool({ connectionString: bouncer.url, max: 2 });
  pool.on("error", () => undefined);
  const ledger = new Ledger(pool, db.schema);
  try {
    const first = await pool.connect();
    const second = await pool.connect();
    try {
      // Each client prepares the same named statement; the pooler hands both the same server session.
      const [job] = await ledger.addJobs([{ type: "noop" }], { client: first });
      await assert.rejects(ledger.addJobs([{ type: "noop" }], { client: second }), /already exists/);
      assert.ok(job);
    } finally {
      first.release();
      second.release();
    }
  } finally {
    await pool.end();
  }
});

it("the API answers 30 concurrent POST /jobs and 20 GETs without a 5xx", async () => {
  const config = resolveConfig({ ...testOptions(db.schema), databaseUrl: bouncer.url, port: 0 });
  let service: RunningService | null = null;
  try {
    service = await startService({ config, api: true, worker: false, allowEmbedded: false });
    const url = service.url as string;
    const seeded = await db.ledger.addJob({ type: "noop", runAt: "2999-01-01T00:00:00Z" });
    const post = (i: number) =>
      fetch(`${url}/jobs`, {
        method: "POST",
        headers: { "content-type": "application/json" },
        body: JSON.stringify({ type: "echo", payload: { i }, run_at: "2999-01-01T00:00:00Z" }),
      });
    const get = (i: number) => fetch(i % 2 === 0 ? `${url}/jobs/${seeded.id}` : `${url}/jobs?limit=5`);
    const responses = await Promise.all([
      ...Array.from({ length: 30 }, (_, i) => post(i)),
      ...Array.from({ length: 20 }, (_, i) => get(i)),
    ]);
    const bodies = await Promise.all(responses.map((r) => r.text()));
    const failed = responses.flatMap((r, i) => (r.status >= 500 ? [`${r.status} ${bodies[i]}`] : []));
    assert.deepEqual(failed, [], "no 5xx");
    assert.deepEqual(
      responses.slice(0, 30).map((r) => r.status),
      Array(30).fill(201),
    );
    assert.deepEqual(
      responses.slice(30).map((r) => r.status),
      Array(20).fill(200),
    );
    const [count] = await db.sql<{ n: number }>("SELECT count(*)::int AS n FROM jobs WHERE type = 'echo'");
    assert.equal(count?.n, 30);
  } finally {
    await service?.stop();
  }
});

it("enqueues inside the application's transactions through the pooler; a rollback leaves nothing", async () => {
  const queue = new TaskQueue({ ...testOptions(db.schema), databaseUrl: bouncer.url });
  // The application's own pool, plain node-postgres, also through the pooler.
  const app = new pg.Pool({ connectionString: bouncer.url, max: 10 });
  app.on("error", () => undefined);
  try {
    assert.equal((await queue.detectPooling()).mode, "transaction");
    const transaction = async (i: number, commit: boolean) => {
      const client = await app.connect();
      try {
        await client.query("BEGIN");
        await queue.addJob({ type: "tx", payload: { i }, runAt: "2999-01-01T00:00:00Z" }, { client });
        await queue.addJobs([{ type: "tx", payload: { i, batch: true }, runAt: "2999-01-01T00:00:00Z" }], {
          client,
        });
        await client.query(commit ? "COMMIT" : "ROLLBACK");
      } catch (error) {
        await client.query("ROLLBACK").catch(() => undefined);
        throw error;
      } finally {
        client.release();
      }
    };
    await Promise.all(Array.from({ length: 20 }, (_, i) => transaction(i, i % 2 === 0)));
    const rows = await db.sql<{ i: number }>(
      "SELECT (payload->>'i')::int AS i FROM jobs WHERE type = 'tx' ORDER BY 1",
    );
    const committed = Array.from({ length: 10 }, (_, k) => [2 * k, 2 * k]).flat();
    assert.deepEqual(
      rows.map((r) => r.i),
      committed,
    );
  } finally {
    await app.end();
    await queue.close();
  }
});

it("a worker refuses to start behind the transaction pooler, naming the mode", async () => {
  const queue = new TaskQueue({ ...testOptions(db.schema), databaseUrl: bouncer.url, builtinHandlers: true });
  try {
    await assert.rejects(
      queue.startWorker(),
      (error: unknown) =>
        error instanceof PoolingModeError &&
        error.code === "pooling_mode_unsupported" &&
        error.mode === "transaction" &&
        /transaction-mode connection pooler/.test(error.message) &&
        /pool_mode=session/.test(error.message),
    );
  } finally {
    await queue.close();
  }
  // The CLI's worker role: exit 1 before migrating or claiming anything, the message on stderr.
  await assert.rejects(
    run(process.execPath, [CLI, "worker"], { env: cliEnv(db, { DATABASE_URL: bouncer.url }) }),
    (error: { code?: number; stderr?: string }) =>
      error.code === 1 && /transaction-mode connection pooler/.test(error.stderr ?? ""),
  );
});

it("DATABASE_POOLING=transaction: unnamed statements and no worker, without a probe", async () => {
  const queue = new TaskQueue({
    ...testOptions(db.schema),
    databasePooling: "transaction",
    builtinHandlers: true,
  });
  try {
    const probe = await queue.detectPooling();
    assert.deepEqual(probe, { mode: "transaction", evidence: "DATABASE_POOLING=transaction" });
    await assert.rejects(queue.startWorker(), /DATABASE_POOLING=transaction/);
  } finally {
    await queue.close();
  }
});
