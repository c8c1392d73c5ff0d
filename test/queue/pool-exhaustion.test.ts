/**
 * Case 12, pool exhaustion, kept as a test: a queue with its default pool (10) and workerCount 10
 * whose handler opens a transaction on a client of `queue.pool` and calls `queue.addJob` without
 * that client. Each such call waits for an eleventh connection. Bounded outcome: the warning at
 * start-up names the fix; every addJob throws a PoolTimeoutError within connectTimeoutSeconds;
 * every job ends; POST /jobs on the same process answers at once through the API's own pool, and
 * within 5 s even on the queue's starved pool.
 */
import assert from "node:assert/strict";
import { after, before, it } from "node:test";
import type { FastifyInstance } from "fastify";
import type pg from "pg";
import { pino } from "pino";
import { buildApp } from "../../src/api/app.js";
import { createApiPool } from "../../src/cli/service.js";
import { PoolTimeoutError } from "../../src/errors.js";
import { TaskQueue } from "../../src/index.js";
import { Ledger } from "../../src/queue/ledger.js";
import type { Worker } from "../../src/worker/worker.js";
import { JSON_HEADERS } from "../api/support.js";
import { createTestDb, type TestDb } from "../helpers/db.js";

const CONNECT_TIMEOUT_SECONDS = 3;
const JOBS = 20;

let db: TestDb;
let queue: TaskQueue;
let worker: Worker | null = null;
let apiPool: pg.Pool;
let separateApi: FastifyInstance;
let sharedApi: FastifyInstance;
const logLines: string[] = [];

before(async () => {
  db = await createTestDb();
  const logger = pino({ level: "warn" }, { write: (line: string) => logLines.push(line) });
  queue = new TaskQueue({
    ...db.config,
    workerCount: 10,
    connectTimeoutSeconds: CONNECT_TIMEOUT_SECONDS,
    logger,
    builtinHandlers: true,
  });
  apiPool = createApiPool({ ...db.config, databaseUrl: db.config.databaseUrl as string });
  separateApi = await buildApp({ ledger: new Ledger(apiPool, db.schema), config: db.config });
  sharedApi = await buildApp({ ledger: queue.ledger, config: db.config });
});
after(async () => {
  await worker?.stop();
  await queue.close();
  await separateApi.close();
  await sharedApi.close();
  await apiPool.end();
  await db.drop();
});

it("handlers holding pooled clients while calling addJob without them: bounded, warned, the API answers", {
  timeout: 120_000,
}, async () => {
  const failures: { error: unknown; ms: number }[] = [];
  /** How long each addJob call of a handler took, ms, whether it succeeded or failed. */
  const waits: number[] = [];
  let inside = 0;
  let allInside: () => void = () => undefined;
  const starved = new Promise<void>((resolve) => {
    allInside = resolve;
  });
  queue.register("enqueue_child", async () => {
    const client = await queue.pool.connect();
    try {
      await client.query("BEGIN");
      const started = Date.now();
      if (++inside === 10) allInside();
      try {
        await queue.addJob({ type: "echo", payload: { child: true } });
      } catch (error) {
        failures.push({ error, ms: Date.now() - started });
        throw error;
      } finally {
        waits.push(Date.now() - started);
      }
      await client.query("COMMIT");
      return { enqueued: true };
    } catch (error) {
      await client.query("ROLLBACK").catch(() => undefined);
      throw error;
    } finally {
      client.release();
    }
  });

  worker = await queue.startWorker({ runReaper: false });
  const warning = logLines
    .map((line) => JSON.parse(line) as { level: number; msg: string })
    .find((l) => /pool/.test(l.msg));
  assert.ok(warning, `a start-up warning about the pool, got ${logLines.join("")}`);
  assert.equal(warning.level, 40, "logged at warn");
  assert.match(warning.msg, /workerCount \(10\) is at least the shared pool's size \(10\)/);
  assert.match(warning.msg, /Pass \{client\} to addJob/);
  assert.match(warning.msg, /POOL_SIZE/);

  const endedIds = new Set<number>();
  const parents: number[] = [];
  let allEnded: () => void = () => undefined;
  const finished = new Promise<void>((resolve) => {
    allEnded = resolve;
  });
  const check = () => {
    if (parents.length === JOBS && parents.every((id) => endedIds.has(id))) allEnded();
  };
  const onEnd = ({ id }: { id: number }) => {
    endedIds.add(id);
    check();
  };
  worker.on("job:completed", onEnd);
  worker.on("job:failed", onEnd);
  parents.push(
    ...(await queue.addJobIds(
      Array.from({ length: JOBS }, () => ({ type: "enqueue_child", maxRetries: 0 })),
    )),
  );
  check();

  await starved;
  // Ten handlers hold the queue's ten connections and wait for an eleventh: the API is not stuck.
  let started = Date.now();
  const viaOwnPool = await separateApi.inject({
    method: "POST",
    url: "/jobs",
    headers: JSON_HEADERS,
    payload: { type: "noop" },
  });
  const ownPoolMs = Date.now() - started;
  assert.equal(viaOwnPool.statusCode, 201, viaOwnPool.body);
  assert.equal(failures.length, 0, "answered while the handlers were still starved");
  assert.ok(ownPoolMs < 2000, `POST /jobs on the API's own pool took ${ownPoolMs} ms`);
  // Even an API sharing the starved pool answers within its bound (503, or 201 once freed).
  started = Date.now();
  const viaSharedPool = await sharedApi.inject({
    method: "POST",
    url: "/jobs",
    headers: JSON_HEADERS,
    payload: { type: "noop" },
  });
  const sharedMs = Date.now() - started;
  assert.ok([201, 503].includes(viaSharedPool.statusCode), viaSharedPool.body);
  assert.ok(sharedMs < 5000, `POST /jobs on the shared pool took ${sharedMs} ms`);

  await Promise.race([
    finished,
    new Promise((_, reject) =>
      setTimeout(
        () => reject(new Error(`${parents.filter((id) => endedIds.has(id)).length} of ${JOBS} jobs ended`)),
        90_000,
      ).unref(),
    ),
  ]);
  // The first calls to give up free their handlers' connections, and the rest then go through.
  assert.ok(failures.length >= 1, "the starvation was ended by an acquisition timeout");
  for (const { error } of failures) {
    assert.ok(error instanceof PoolTimeoutError, String(error));
    assert.equal(error.poolSize, 10);
  }
  const slowest = Math.max(...waits);
  assert.ok(slowest < 2 * CONNECT_TIMEOUT_SECONDS * 1000 + 2000, `an addJob call took ${slowest} ms`);
  assert.ok(
    failures.every(({ ms }) => ms < 2 * CONNECT_TIMEOUT_SECONDS * 1000 + 2000),
    JSON.stringify(failures.map((f) => f.ms)),
  );
  const [counts] = await db.sql<{ ended: number }>(
    "SELECT count(*)::int AS ended FROM jobs WHERE type = 'enqueue_child' AND status IN ('done', 'dead')",
  );
  assert.equal(counts?.ended, JOBS);
});
