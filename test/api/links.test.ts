/**
 * The API cut off from PostgreSQL answers within its bound (503 problem+json, Retry-After, naming
 * the database) and recovers by itself. The API's pool is built as the service builds it
 * (`createApiPool`, default timeouts) and reaches the test database through the test proxy
 * (test/helpers/tcp-proxy.ts), which the test switches between forward, blackhole, drop and slow.
 * Also: GET /ready reports the worker's health and is 503 when a lock session or the listener is down.
 */
import assert from "node:assert/strict";
import { after, before, beforeEach, describe, it } from "node:test";
import type { FastifyInstance, InjectOptions, LightMyRequestResponse } from "fastify";
import type pg from "pg";
import { buildApp } from "../../src/api/app.js";
import { READY_TIMEOUT_MS, type WorkerHealth } from "../../src/api/routes/health.js";
import { createApiPool } from "../../src/cli/service.js";
import { createPool } from "../../src/db/pool.js";
import { Ledger } from "../../src/queue/ledger.js";
import { createTestDb, DATABASE_URL, type TestDb } from "../helpers/db.js";
import { TcpProxy } from "../helpers/tcp-proxy.js";
import { assertProblem, JSON_HEADERS } from "./support.js";

/** What the README promises: a cut-off API answers within this, ms. */
const ANSWER_BOUND_MS = 5000;

const target = new URL(DATABASE_URL);
const proxy = new TcpProxy(target.hostname, Number(target.port || 5432));
let db: TestDb;
let pool: pg.Pool;
let app: FastifyInstance;

before(async () => {
  db = await createTestDb();
  await proxy.start();
  pool = createApiPool({ ...db.config, databaseUrl: proxy.url(DATABASE_URL) });
  pool.on("error", () => undefined);
  app = await buildApp({ ledger: new Ledger(pool, db.schema), config: db.config });
});
beforeEach(() => proxy.set({ kind: "forward" }));
after(async () => {
  await app.close();
  await proxy.stop();
  await pool.end().catch(() => undefined);
  await db.drop();
});

/** An HTTP call and how long it took to answer, ms. */
async function timed(request: InjectOptions): Promise<{ res: LightMyRequestResponse; ms: number }> {
  const started = Date.now();
  const res = await app.inject(request);
  return { res, ms: Date.now() - started };
}

const postJob = () =>
  timed({
    method: "POST",
    url: "/jobs",
    headers: JSON_HEADERS,
    payload: { type: "echo", payload: { n: 1 } },
  });
const getReady = () => timed({ method: "GET", url: "/ready" });

/** Asserts a 503 naming the database as unavailable, with Retry-After, within the bound. */
function assertUnavailable({ res, ms }: { res: LightMyRequestResponse; ms: number }, what: string): void {
  const body = assertProblem(res, 503);
  assert.equal(body.type, "urn:taskqueue:problem:database-unavailable", what);
  assert.match(
    `${body.title} ${body.detail}`,
    /database (is )?unavailable|database cannot be reached/i,
    what,
  );
  assert.equal(res.headers["retry-after"], "5", what);
  assert.ok(ms < ANSWER_BOUND_MS, `${what} answered after ${ms} ms`);
}

/** Posts until a 201 comes back (the link is back), each answer within the bound; at most `tries`. */
async function untilCreated(tries: number): Promise<number> {
  for (let i = 1; i <= tries; i++) {
    const answer = await postJob();
    assert.ok(answer.ms < ANSWER_BOUND_MS, `answered after ${answer.ms} ms`);
    if (answer.res.statusCode === 201) return i;
    assert.equal(answer.res.statusCode, 503, answer.res.body);
  }
  throw new Error(`no 201 after ${tries} posts`);
}

describe("the API cut off from PostgreSQL", () => {
  it("blackhole: POST /jobs and GET /ready answer 503 within 5 s; then 201 again by itself", {
    timeout: 60_000,
  }, async () => {
    assert.equal((await postJob()).res.statusCode, 201, "a warm pool first");
    proxy.set({ kind: "blackhole" });
    // Alone first, so that it runs on the pool's idle connection, open into the blackhole.
    assertUnavailable(await postJob(), "POST /jobs on an open connection");
    const answers = await Promise.all([postJob(), postJob(), getReady()]);
    for (const [i, answer] of answers.entries())
      assertUnavailable(answer, i === 2 ? "GET /ready" : "POST /jobs");
    const ready = answers[2];
    assert.ok(ready && ready.ms < READY_TIMEOUT_MS + 1000, `GET /ready took ${ready?.ms} ms`);
    // A new connection through the blackhole cannot open either: still bounded.
    assertUnavailable(await postJob(), "POST /jobs once the pool's connections hang");
    proxy.set({ kind: "forward" });
    assert.ok((await untilCreated(5)) <= 5);
    assert.equal((await getReady()).res.statusCode, 200);
    // The hung connections are closed by their query deadline, never reused: their links go away.
    const deadline = Date.now() + 15_000;
    while (proxy.openLinks > pool.totalCount && Date.now() < deadline)
      await new Promise((resolve) => setTimeout(resolve, 100));
    assert.ok(proxy.openLinks <= pool.totalCount, `${proxy.openLinks} links for ${pool.totalCount} clients`);
  });

  it("an API on a pool with the library's default deadlines (30 s) still answers 503 within 5 s", {
    timeout: 60_000,
  }, async () => {
    const libraryPool = createPool({ connectionString: proxy.url(DATABASE_URL) });
    libraryPool.on("error", () => undefined);
    const libraryApp = await buildApp({ ledger: new Ledger(libraryPool, db.schema), config: db.config });
    try {
      const post = async () => {
        const started = Date.now();
        const res = await libraryApp.inject({
          method: "POST",
          url: "/jobs",
          headers: JSON_HEADERS,
          payload: { type: "echo" },
        });
        return { res, ms: Date.now() - started };
      };
      assert.equal((await post()).res.statusCode, 201, "a warm pool first");
      proxy.set({ kind: "blackhole" });
      assertUnavailable(await post(), "POST /jobs past apiTimeoutSeconds");
    } finally {
      proxy.set({ kind: "forward" });
      await libraryApp.close();
      // Its hung connection ends at the pool's query deadline; end() does not wait for it.
      void libraryPool.end().catch(() => undefined);
    }
  });

  it("drop: POST /jobs and GET /ready answer 503 within 5 s; then 201 again by itself", {
    timeout: 60_000,
  }, async () => {
    assert.equal((await postJob()).res.statusCode, 201);
    proxy.set({ kind: "drop" });
    const answers = await Promise.all([postJob(), getReady()]);
    assertUnavailable(answers[0], "POST /jobs");
    assertUnavailable(answers[1], "GET /ready");
    proxy.set({ kind: "forward" });
    await untilCreated(5);
    assert.equal((await getReady()).res.statusCode, 200);
  });

  it("slow below the deadline: 201; slow beyond it: 503 within 5 s; then 201 again", {
    timeout: 60_000,
  }, async () => {
    assert.equal((await postJob()).res.statusCode, 201, "a warm pool first");
    proxy.set({ kind: "slow", delayMs: 200 });
    const slow = await postJob();
    assert.equal(slow.res.statusCode, 201, slow.res.body);
    proxy.set({ kind: "slow", delayMs: 8000 });
    assertUnavailable(await postJob(), "POST /jobs, slow beyond the deadline");
    assertUnavailable(await getReady(), "GET /ready, slow beyond the deadline");
    proxy.set({ kind: "forward" });
    await untilCreated(5);
  });
});

describe("GET /ready and the worker's health", () => {
  const healthy: WorkerHealth = {
    state: "running",
    lockSessions: [
      { id: "lane-0", state: "open" },
      { id: "lane-1", state: "open" },
    ],
    listener: "listening",
    notifyTrigger: true,
  };
  let health: WorkerHealth = healthy;
  let withWorker: FastifyInstance;
  before(async () => {
    withWorker = await buildApp({ ledger: db.ledger, config: db.config, workerHealth: () => health });
  });
  after(() => withWorker.close());

  it("is 200 with the worker's health while every lock session is open and the listener listening", async () => {
    health = healthy;
    const res = await withWorker.inject({ method: "GET", url: "/ready" });
    assert.equal(res.statusCode, 200, res.body);
    assert.deepEqual(res.json(), { status: "ready", worker: healthy });
  });

  it("is 503 naming the lock session that is not open, or the listener not listening", async () => {
    health = {
      ...healthy,
      lockSessions: [healthy.lockSessions[0]!, { id: "lane-1", state: "reconnecting" }],
    };
    let res = await withWorker.inject({ method: "GET", url: "/ready" });
    let body = assertProblem(res, 503);
    assert.equal(body.type, "urn:taskqueue:problem:not-ready");
    assert.match(body.detail ?? "", /lane-1 reconnecting/);
    assert.deepEqual((body as unknown as { worker: WorkerHealth }).worker, health);
    assert.equal(res.headers["retry-after"], "5");
    health = { ...healthy, listener: "reconnecting" };
    res = await withWorker.inject({ method: "GET", url: "/ready" });
    body = assertProblem(res, 503);
    assert.match(body.detail ?? "", /listener reconnecting/);
  });
});
