/**
 * Every wait on a pool from createPool is bounded (db/pool.ts): opening a connection, waiting for a
 * free one, the server's statement_timeout and the client's query deadline; a connection whose
 * query passed its deadline is closed, never handed out again. Cut-offs go through the test proxy
 * (test/helpers/tcp-proxy.ts) in front of the test database; the server itself is left alone.
 */
import assert from "node:assert/strict";
import { after, before, beforeEach, it } from "node:test";
import type pg from "pg";
import { createPool, queryDeadlineMs } from "../../src/db/pool.js";
import { DatabaseUnavailableError, PoolTimeoutError } from "../../src/errors.js";
import { DATABASE_URL } from "../helpers/db.js";
import { TcpProxy } from "../helpers/tcp-proxy.js";

const target = new URL(DATABASE_URL);
const proxy = new TcpProxy(target.hostname, Number(target.port || 5432));
const pools: pg.Pool[] = [];
before(() => proxy.start());
beforeEach(() => proxy.set({ kind: "forward" }));
after(async () => {
  await proxy.stop();
  await Promise.all(pools.map((pool) => pool.end().catch(() => undefined)));
});

function pool(options: Partial<Parameters<typeof createPool>[0]> = {}): pg.Pool {
  const created = createPool({ connectionString: proxy.url(DATABASE_URL), ...options });
  created.on("error", () => undefined);
  pools.push(created);
  return created;
}

/** Runs `action`, answering what it threw (or null) and how long it took, ms. */
async function timed(action: () => Promise<unknown>): Promise<{ error: unknown; ms: number }> {
  const started = Date.now();
  try {
    await action();
    return { error: null, ms: Date.now() - started };
  } catch (error) {
    return { error, ms: Date.now() - started };
  }
}

it("the query deadline is the statement timeout plus a margin of a tenth, 250 ms to 2 s", () => {
  assert.equal(queryDeadlineMs(30), 32_000);
  assert.equal(queryDeadlineMs(4), 4400);
  assert.equal(queryDeadlineMs(1), 1250);
});

it("sets TCP keepalive and the server's statement_timeout on each connection", {
  timeout: 20_000,
}, async () => {
  const bounded = pool({ statementTimeoutSeconds: 7 });
  const { rows } = await bounded.query<{ timeout: string }>(
    "SELECT current_setting('statement_timeout') AS timeout",
  );
  assert.equal(rows[0]?.timeout, "7s");
  const client = await bounded.connect();
  try {
    // pg calls socket.setKeepAlive(true, delay) on connect when its connection carries these.
    const connection = (
      client as unknown as { connection: { _keepAlive?: boolean; _keepAliveInitialDelayMillis?: number } }
    ).connection;
    assert.equal(connection._keepAlive, true);
    assert.equal(connection._keepAliveInitialDelayMillis, 10_000);
  } finally {
    client.release();
  }
});

it("a statement past statement_timeout is cancelled by the server (57014) within the bound", {
  timeout: 20_000,
}, async () => {
  const bounded = pool({ statementTimeoutSeconds: 0.5 });
  const { error, ms } = await timed(() => bounded.query("SELECT pg_sleep(5)"));
  assert.equal((error as { code?: string }).code, "57014", String(error));
  assert.ok(ms < 3000, `cancelled after ${ms} ms`);
});

it("a blackholed query fails at the query deadline, and its connection is never handed out again", {
  timeout: 20_000,
}, async () => {
  const bounded = pool({ max: 1, statementTimeoutSeconds: 1 });
  const client = await bounded.connect();
  await client.query("SELECT 1");
  proxy.set({ kind: "blackhole" });
  const { error, ms } = await timed(() => client.query("SELECT 1"));
  assert.ok(error instanceof DatabaseUnavailableError, String(error));
  assert.equal(error.code, "database_unavailable");
  assert.ok(ms >= 1000 && ms < 3000, `deadline after ${ms} ms (query deadline ${queryDeadlineMs(1)} ms)`);
  // Released without an error, as a transaction's `finally` does: the pool must not keep it.
  client.release();
  proxy.set({ kind: "forward" });
  const accepted = proxy.accepted;
  const again = await timed(() => bounded.query("SELECT 1"));
  assert.equal(again.error, null, String(again.error));
  assert.ok(again.ms < 1000, `the next query took ${again.ms} ms`);
  assert.equal(proxy.accepted, accepted + 1, "the next query ran on a new connection");
});

it("waiting for a free connection ends after connectTimeoutSeconds with a PoolTimeoutError naming the size", {
  timeout: 20_000,
}, async () => {
  const bounded = pool({ max: 2, connectTimeoutSeconds: 0.5 });
  const held = await Promise.all([bounded.connect(), bounded.connect()]);
  try {
    const { error, ms } = await timed(() => bounded.query("SELECT 1"));
    assert.ok(error instanceof PoolTimeoutError, String(error));
    assert.equal(error.code, "pool_timeout");
    assert.equal(error.poolSize, 2);
    assert.match(error.message, /size 2/);
    assert.match(error.message, /\{client\}/);
    assert.match(error.message, /POOL_SIZE/);
    assert.ok(ms >= 450 && ms < 2000, `gave up after ${ms} ms`);
    await assert.rejects(bounded.connect(), PoolTimeoutError);
  } finally {
    for (const client of held) client.release();
  }
});

it("a connection that does not open within connectTimeoutSeconds fails with DatabaseUnavailableError", {
  timeout: 20_000,
}, async () => {
  const bounded = pool({ connectTimeoutSeconds: 0.5 });
  proxy.set({ kind: "blackhole" });
  const { error, ms } = await timed(() => bounded.query("SELECT 1"));
  assert.ok(error instanceof DatabaseUnavailableError, String(error));
  assert.match(error.message, /could not connect/);
  assert.ok(ms < 2000, `gave up after ${ms} ms`);
});
