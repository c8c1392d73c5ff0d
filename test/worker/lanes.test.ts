/**
 * Several lock sessions in one worker process (config `lockSessions`): each lane claims and
 * writes its own batches, and together they keep every guarantee of one worker.
 */
import assert from "node:assert/strict";
import { randomBytes } from "node:crypto";
import { after, before, it } from "node:test";
import type { ResolvedConfig } from "../../src/config.js";
import { createPool } from "../../src/db/pool.js";
import { SchemaVersionError } from "../../src/errors.js";
import { createLogger } from "../../src/log.js";
import { Ledger } from "../../src/queue/ledger.js";
import { migrate } from "../../src/queue/migrate.js";
import { resolvePooling } from "../../src/queue/pooling.js";
import { HandlerRegistry } from "../../src/worker/registry.js";
import { Worker } from "../../src/worker/worker.js";
import { createTestDb, type TestDb } from "../helpers/db.js";
import { waitForEvent, waitForEvents } from "../helpers/events.js";
import { startWorker } from "../helpers/worker.js";

let db: TestDb;
before(async () => {
  db = await createTestDb();
});
after(async () => {
  await db.drop();
});

it("two lock sessions run each of 2,000 jobs exactly once, each lane writing what it claimed", async () => {
  const runs = new Map<number, number>();
  const worker = await startWorker(db, {
    handlers: {
      count: (job) => {
        runs.set(job.id, (runs.get(job.id) ?? 0) + 1);
        return null;
      },
    },
    config: { lockSessions: 2, workerCount: 8, prefetch: 200 },
  });
  try {
    const allDone = waitForEvents(worker, "job:completed", 2000);
    await db.ledger.addJobs(Array.from({ length: 2000 }, () => ({ type: "count" })));
    await allDone;
    assert.equal(runs.size, 2000);
    assert.ok(
      [...runs.values()].every((n) => n === 1),
      "no job ran twice",
    );
    const lanes = await db.sql<{ worker_id: string; n: number }>(
      "SELECT worker_id, count(*)::int AS n FROM jobs WHERE status = 'done' GROUP BY worker_id ORDER BY worker_id",
    );
    assert.deepEqual(
      lanes.map((l) => l.worker_id),
      [`${worker.id}/1`, `${worker.id}/2`],
      "both lanes claimed and completed jobs, under their own ids",
    );
    assert.equal(
      lanes.reduce((sum, l) => sum + l.n, 0),
      2000,
    );
    const sessions = await db.sql<{ n: number }>(
      "SELECT count(*)::int AS n FROM pg_stat_activity WHERE application_name LIKE 'taskqueue lock session ' || $1 || '/%'",
      [worker.id],
    );
    assert.equal(sessions[0]?.n, 2, "one connection per lock session");
  } finally {
    const report = await worker.stop();
    assert.deepEqual(report, { releasedJobIds: [], abandonedJobIds: [] });
  }
  assert.deepEqual(await db.ledger.heldJobLocks(), [], "no advisory lock outlives the worker");
  assert.equal((await db.ledger.metrics(30)).activeWorkers, 0, "both lanes deleted their worker rows");
});

it("stopping a worker with two lock sessions gives back what each lane holds", async () => {
  const worker = await startWorker(db, {
    config: { lockSessions: 2, workerCount: 2, prefetch: 10, shutdownGraceSeconds: 0.2 },
  });
  let claimed = 0;
  const allClaimed = waitForEvent<[{ jobs: unknown[] }]>(worker, "job:claimed", (e) => {
    claimed += e.jobs.length;
    return claimed >= 10;
  });
  const jobs = await db.ledger.addJobs(
    Array.from({ length: 10 }, () => ({ type: "slow", payload: { sleep_seconds: 30 } })),
  );
  await allClaimed;
  const report = await worker.stop();
  assert.equal(report.abandonedJobIds.length, 2, "one running job per lane, aborted at the grace deadline");
  assert.deepEqual(
    [...report.releasedJobIds, ...report.abandonedJobIds].sort((a, b) => a - b),
    jobs.map((j) => j.id).sort((a, b) => a - b),
  );
  const pending = await db.sql<{ n: number }>("SELECT count(*)::int AS n FROM jobs WHERE status = 'pending'");
  assert.equal(pending[0]?.n, 10);
  assert.deepEqual(await db.ledger.heldJobLocks(), []);
  await db.sql("DELETE FROM jobs");
});

/** A worker on `ledger`'s schema that is not started yet. */
function unstartedWorker(config: Partial<ResolvedConfig>, ledger = db.ledger): Worker {
  return new Worker({
    config: { ...db.config, ...config, databaseUrl: db.config.databaseUrl as string },
    registry: new HandlerRegistry().register("noop", () => null),
    ledger,
    logger: createLogger("silent"),
  });
}

/** Lock sessions of `workerId` (and its lanes) still connected. */
async function openSessions(workerId: string): Promise<number> {
  const rows = await db.sql<{ n: number }>(
    "SELECT count(*)::int AS n FROM pg_stat_activity WHERE application_name LIKE 'taskqueue lock session ' || $1 || '%'",
    [workerId],
  );
  return rows[0]?.n ?? -1;
}

it("with several lanes, every job event comes after start() resolves: listeners attached then see them all", async () => {
  await db.ledger.addJobIds(Array.from({ length: 40 }, () => ({ type: "noop" })));
  const worker = unstartedWorker({ lockSessions: 4, workerCount: 8, prefetch: 8 });
  await worker.start();
  try {
    const completed = new Set<number>();
    const allDone = waitForEvents<[{ id: number }]>(
      worker,
      "job:completed",
      40,
      (e) => completed.add(e.id) !== null,
    );
    await allDone;
    assert.equal(completed.size, 40);
  } finally {
    await worker.stop(0);
  }
  await db.sql("DELETE FROM jobs");
});

it("a stop while the lanes are still starting closes every session and leaves no worker row", async () => {
  const worker = unstartedWorker({ lockSessions: 2, workerCount: 2 });
  const starting = worker.start();
  await worker.stop(0);
  await starting;
  assert.equal(await openSessions(worker.id), 0, "no lock session left open");
  assert.equal((await db.ledger.metrics(30)).activeWorkers, 0, "no worker row left");
});

it("a worker holds at most an eighth of the server's lock table, whatever prefetch asks for", async () => {
  await db.sql("DELETE FROM jobs");
  // PostgreSQL's lock table: max_locks_per_transaction per server process or prepared transaction.
  const [server] = await db.sql<{ slots: number }>(
    `SELECT current_setting('max_locks_per_transaction')::int * (current_setting('max_connections')::int
       + current_setting('autovacuum_max_workers')::int + 1 + current_setting('max_worker_processes')::int
       + current_setting('max_wal_senders')::int + current_setting('max_prepared_transactions')::int) AS slots`,
  );
  const cap = Math.floor((server?.slots ?? 0) / 8);
  assert.ok(cap > 0);
  await db.ledger.addJobIds(
    Array.from({ length: cap + 200 }, () => ({ type: "slow", payload: { sleep_seconds: 30 } })),
  );
  const worker = await startWorker(db, { config: { workerCount: 1, prefetch: 100_000 } });
  try {
    const [first] = await waitForEvent<[{ jobs: unknown[] }]>(worker, "job:claimed");
    assert.equal(first.jobs.length, cap);
    const rows = await db.sql<{ n: number }>(
      "SELECT count(*)::int AS n FROM jobs WHERE status IN ('claimed', 'running')",
    );
    assert.equal(rows[0]?.n, cap);
  } finally {
    await worker.stop(0);
  }
  await db.sql("DELETE FROM jobs");
});

it("never more lanes than jobs to hold: prefetch 2 with four lock sessions runs two lanes", async () => {
  await db.sql("DELETE FROM jobs");
  const worker = await startWorker(db, { config: { lockSessions: 4, workerCount: 4, prefetch: 2 } });
  try {
    let held = 0;
    const claimed = waitForEvent<[{ jobs: unknown[] }]>(worker, "job:claimed", (e) => {
      held += e.jobs.length;
      return held >= 2;
    });
    await db.ledger.addJobs(
      Array.from({ length: 6 }, () => ({ type: "slow", payload: { sleep_seconds: 30 } })),
    );
    await claimed;
    const rows = await db.sql<{ n: number }>(
      "SELECT count(*)::int AS n FROM jobs WHERE status IN ('claimed', 'running')",
    );
    assert.equal(rows[0]?.n, 2, "the process holds at most prefetch jobs");
    assert.equal((await db.ledger.metrics(30)).activeWorkers, 2);
  } finally {
    await worker.stop(0);
  }
  await db.sql("DELETE FROM jobs");
});

/**
 * Starting a worker (one lock session, then two) on `schema` fails with a SchemaVersionError that
 * found `found` and names `taskqueue migrate`, and leaves no lock session open.
 */
async function refusesToStart(schema: string, found: number): Promise<void> {
  for (const lockSessions of [1, 2]) {
    const worker = unstartedWorker(
      { schema, notifyChannel: `${schema}_jobs`, lockSessions, workerCount: 2 },
      new Ledger(db.pool, schema),
    );
    await assert.rejects(
      worker.start(),
      (error: unknown) =>
        error instanceof SchemaVersionError &&
        error.found === found &&
        error.required >= 2 &&
        /taskqueue migrate/.test(error.message),
    );
    await worker.stop(0);
    assert.equal(await openSessions(worker.id), 0, "nothing was left open");
  }
}

it("a worker refuses to start on a schema older than it needs, and says what to run", async () => {
  const schema = `tq_test_v1_${randomBytes(4).toString("hex")}`;
  await migrate(db.pool, { schema, notifyChannel: `${schema}_jobs`, toVersion: 1 });
  try {
    await refusesToStart(schema, 1);
  } finally {
    await db.pool.query(`DROP SCHEMA "${schema}" CASCADE`);
  }
});

it("a worker refused for its schema says so, even while its pooling probe still runs on its lock session", async () => {
  const schema = `tq_test_v1_${randomBytes(4).toString("hex")}`;
  await migrate(db.pool, { schema, notifyChannel: `${schema}_jobs`, toVersion: 1 });
  const config = {
    ...db.config,
    schema,
    notifyChannel: `${schema}_jobs`,
    databaseUrl: db.config.databaseUrl as string,
  };
  const worker = new Worker({
    config,
    registry: new HandlerRegistry().register("noop", () => null),
    ledger: new Ledger(db.pool, schema),
    logger: createLogger("silent"),
    // A slow probe (fault injected): the schema check refuses first, while the probe has yet to run
    // on the first lane's session. Its statements must not meet a session closed under them.
    pooling: async (connections) => {
      await new Promise((resolve) => setTimeout(resolve, 300));
      return resolvePooling({ ...config, databasePooling: "auto" }, connections);
    },
  });
  try {
    await assert.rejects(worker.start(), (error: unknown) => error instanceof SchemaVersionError);
    await worker.stop(0);
    assert.equal(await openSessions(worker.id), 0, "nothing was left open");
  } finally {
    await db.pool.query(`DROP SCHEMA "${schema}" CASCADE`);
  }
});

it("a NOTIFY during a slow schema check starts no claim: a worker refused for its schema has run nothing", async () => {
  const schema = `tq_test_slow_${randomBytes(4).toString("hex")}`;
  const channel = `${schema}_jobs`;
  await migrate(db.pool, { schema, notifyChannel: channel, toVersion: 2 });
  // The worker's pool has one connection, held here: its schema check waits until it is let go.
  const busy = createPool({ connectionString: db.config.databaseUrl as string, max: 1 });
  const held = await busy.connect();
  const worker = unstartedWorker(
    { schema, notifyChannel: channel, workerCount: 2 },
    new Ledger(busy, schema),
  );
  const claims: unknown[] = [];
  worker.on("claim:returned", (e) => claims.push(e));
  try {
    const started = worker.start().then(
      () => null,
      (error: unknown) => error,
    );
    // Its LISTEN connection is up while the check still waits; then a job arrives, with its NOTIFY.
    for (let i = 0; i < 250; i++) {
      const [row] = await db.sql<{ n: number }>(
        "SELECT count(*)::int AS n FROM pg_stat_activity WHERE application_name = 'taskqueue listener' AND query = 'LISTEN \"' || $1 || '\"'",
        [channel],
      );
      if (row?.n === 1) break;
      await new Promise((resolve) => setTimeout(resolve, 20));
    }
    await new Ledger(db.pool, schema).addJob({ type: "noop" });
    // No event marks a claim that did not happen: give one a few round trips' time.
    await new Promise((resolve) => setTimeout(resolve, 200));
    held.release();
    assert.ok((await started) instanceof SchemaVersionError);
    assert.deepEqual(claims, [], "nothing was claimed");
    const [job] = await db.sql<{ status: string; claimed_at: Date | null }>(
      `SELECT status, claimed_at FROM "${schema}".jobs`,
    );
    assert.deepEqual([job?.status, job?.claimed_at], ["pending", null]);
    assert.equal(await openSessions(worker.id), 0, "nothing was left open");
  } finally {
    await worker.stop(0);
    await busy.end();
    await db.pool.query(`DROP SCHEMA "${schema}" CASCADE`);
  }
});

it("a worker on a schema never migrated says what to run, instead of a missing table", async () => {
  await refusesToStart(`tq_test_none_${randomBytes(4).toString("hex")}`, 0);
});
