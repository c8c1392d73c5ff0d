/** Migrations (DESIGN.md §2): idempotent, safe concurrently, in their own schema, never public. */
import assert from "node:assert/strict";
import { randomBytes } from "node:crypto";
import { after, describe, it } from "node:test";
import { createPool } from "../../src/db/pool.js";
import { DatabaseMetrics } from "../../src/metrics/database.js";
import { Ledger } from "../../src/queue/ledger.js";
import { lockClassFor } from "../../src/queue/lock-class.js";
import { latestSchemaVersion, loadMigrations, migrate } from "../../src/queue/migrate.js";
import { migrationLock } from "../../src/queue/sql/schema.js";
import { DATABASE_URL } from "../helpers/db.js";

/** The versions of the migration files, and those after `version`. */
const VERSIONS = loadMigrations().map((m) => m.version);
const LATEST = latestSchemaVersion();
const since = (version: number) => VERSIONS.filter((v) => v > version);

const pool = createPool({ connectionString: DATABASE_URL, max: 12 });
const schemas: string[] = [];
const fresh = () => {
  const schema = `tq_migrate_${randomBytes(4).toString("hex")}`;
  schemas.push(schema);
  return schema;
};
after(async () => {
  for (const schema of schemas) await pool.query(`DROP SCHEMA IF EXISTS "${schema}" CASCADE`);
  await pool.end();
});

describe("migrate", () => {
  it("creates every table in its own schema and records the version", async () => {
    const schema = fresh();
    const result = await migrate(pool, { schema, notifyChannel: "c1" });
    assert.deepEqual(result, { applied: VERSIONS, version: LATEST });
    const { rows } = await pool.query(
      "SELECT table_name FROM information_schema.tables WHERE table_schema = $1 ORDER BY table_name",
      [schema],
    );
    assert.deepEqual(
      rows.map((r) => r.table_name),
      [
        "dead_letter_jobs",
        "job_counts",
        "job_exec_bins",
        "job_histogram",
        "job_stats",
        "job_totals",
        "jobs",
        "migrations",
        "paused_types",
        "schedules",
        "type_limits",
        "workers",
      ],
    );
  });

  it("says the schema's own version when asked to stop below it", async () => {
    const schema = fresh();
    await migrate(pool, { schema, notifyChannel: "c1", toVersion: 2 });
    assert.deepEqual(await migrate(pool, { schema, notifyChannel: "c1", toVersion: 1 }), {
      applied: [],
      version: 2,
    });
  });

  it("is a no-op when current", async () => {
    const schema = fresh();
    await migrate(pool, { schema, notifyChannel: "c1" });
    assert.deepEqual(await migrate(pool, { schema, notifyChannel: "c1" }), { applied: [], version: LATEST });
  });

  it("ten concurrent runs apply each migration once", async () => {
    const schema = fresh();
    const results = await Promise.all(
      Array.from({ length: 10 }, () => migrate(pool, { schema, notifyChannel: "c1" })),
    );
    assert.equal(results.filter((r) => r.applied.length > 0).length, 1);
    const { rows } = await pool.query(`SELECT count(*)::int AS n FROM "${schema}".migrations`);
    assert.equal(rows[0].n, VERSIONS.length);
  });

  it("a run has its own deadline, not the pool's: it outwaits another run's lock, and fails past migrationTimeoutSeconds", {
    timeout: 20_000,
  }, async () => {
    // The pool's statements have a 0.3 s server timeout and a 0.55 s client deadline.
    const short = createPool({ connectionString: DATABASE_URL, max: 3, statementTimeoutSeconds: 0.3 });
    const holder = await pool.connect();
    try {
      const schema = fresh();
      const holdLock = async () => {
        await holder.query("BEGIN");
        await holder.query({ ...migrationLock(schema), values: [lockClassFor(schema)] });
      };
      await holdLock();
      const started = Date.now();
      const waiting = migrate(short, { schema, notifyChannel: "c1" });
      await new Promise((resolve) => setTimeout(resolve, 1200));
      await holder.query("COMMIT");
      const result = await waiting;
      assert.deepEqual(result.applied, VERSIONS);
      assert.ok(Date.now() - started >= 1200, "the run waited for the lock");
      // Past its own deadline, the run fails with the server's statement timeout (57014).
      await holdLock();
      const failed = Date.now();
      await assert.rejects(migrate(short, { schema, notifyChannel: "c1", migrationTimeoutSeconds: 0.4 }), {
        code: "57014",
      });
      assert.ok(Date.now() - failed < 3000, `gave up after ${Date.now() - failed} ms`);
      // The pool's own deadline is back on that connection afterwards.
      await assert.rejects(short.query("SELECT pg_sleep(2)"), { code: "57014" });
    } finally {
      await holder.query("ROLLBACK").catch(() => undefined);
      holder.release();
      await short.end();
    }
  });

  it("re-points the notify triggers when the channel setting changes", async () => {
    const schema = fresh();
    await migrate(pool, { schema, notifyChannel: "first_channel" });
    await migrate(pool, { schema, notifyChannel: "second_channel" });
    const listener = await pool.connect();
    try {
      const received = new Promise<string>((resolve) =>
        listener.on("notification", (m) => resolve(m.channel)),
      );
      await listener.query("LISTEN second_channel");
      await pool.query(`INSERT INTO "${schema}".jobs (type) VALUES ('noop')`);
      assert.equal(await received, "second_channel");
      // Jobs that become due again without an insert (released, reaped) wake through wake_workers().
      const woken = new Promise<string>((resolve) =>
        listener.once("notification", (m) => resolve(`${m.channel} ${m.payload}`)),
      );
      await pool.query(`SELECT "${schema}".wake_workers('noop')`);
      assert.equal(await woken, "second_channel noop");
    } finally {
      await listener.query("UNLISTEN *");
      listener.release();
    }
  });

  it("upgrading from version 1 keeps the counters exact: held jobs are counted live from then on", async () => {
    const schema = fresh();
    await migrate(pool, { schema, notifyChannel: "c1", toVersion: 1 });
    const jobs = `"${schema}".jobs`;
    await pool.query(`INSERT INTO ${jobs} (type) SELECT 'noop' FROM generate_series(1, 5)`);
    // Version 1's update trigger moves two jobs from pending to claimed and one to done.
    await pool.query(
      `UPDATE ${jobs} SET status = 'claimed', worker_id = 'w', heartbeat_at = now() WHERE id IN (1, 2)`,
    );
    await pool.query(`UPDATE ${jobs} SET status = 'done', completed_at = now() WHERE id = 3`);
    assert.deepEqual(await migrate(pool, { schema, notifyChannel: "c1" }), {
      applied: since(1),
      version: LATEST,
    });
    const metrics = await new Ledger(pool, schema).metrics(30);
    assert.deepEqual(metrics.depth, { pending: 2, claimed: 2, running: 0, done: 1, dead: 0, cancelled: 0 });
  });

  it("upgrading from version 2 keeps the window's rates; only jobs completed since have quantiles", async () => {
    const schema = fresh();
    await migrate(pool, { schema, notifyChannel: "c1", toVersion: 2 });
    await pool.query(
      `INSERT INTO "${schema}".job_stats (bucket, slot, done, failed, exec_seconds)
       VALUES (date_trunc('second', now()), 0, 4, 1, 8)`,
    );
    assert.deepEqual(await migrate(pool, { schema, notifyChannel: "c1" }), {
      applied: since(2),
      version: LATEST,
    });
    const metrics = await new Ledger(pool, schema).metrics(30);
    assert.equal(metrics.jobsPerSecond, 4 / metrics.windowSeconds);
    assert.equal(metrics.errorRate, 1 / 5);
    assert.equal(metrics.averageExecutionSeconds, 2);
    assert.deepEqual(metrics.executionSecondsQuantiles, { p50: null, p90: null, p99: null, samples: 0 });
    const indexes = await pool.query(`SELECT indexname FROM pg_indexes WHERE schemaname = $1 ORDER BY 1`, [
      schema,
    ]);
    assert.ok(
      !indexes.rows.some((r: { indexname: string }) => r.indexname === "jobs_completed_idx"),
      "jobs_completed_idx is gone",
    );
  });

  it("upgrading from version 5: dead letters wait, version 5's statements still run, keys are unique", async () => {
    const schema = fresh();
    await migrate(pool, { schema, notifyChannel: "c1", toVersion: 5 });
    const jobs = `"${schema}".jobs`;
    const { rows } = await pool.query<{ id: string }>(
      `INSERT INTO ${jobs} (type, status, attempt, max_retries, completed_at) VALUES ('v5', 'dead', 1, 0, now()) RETURNING id`,
    );
    const id = Number(rows[0]?.id);
    await pool.query(
      `INSERT INTO "${schema}".dead_letter_jobs (job_id, type, payload, priority, max_retries, error, attempts, errors, created_at)
       VALUES ($1, 'v5', '{}', 5, 0, 'boom', 1, '[]', now())`,
      [id],
    );
    assert.deepEqual(await migrate(pool, { schema, notifyChannel: "c1" }), {
      applied: since(5),
      version: LATEST,
    });
    const ledger = new Ledger(pool, schema);
    const [entry] = await ledger.listDeadLetters({ type: "v5" });
    assert.deepEqual([entry?.jobId, entry?.replayedAt, entry?.replays], [id, null, 0]);
    assert.equal((await ledger.replayDeadLetter(id)).replayed, true);
    // Version 5's insert and dead-letter copy, as that code sends them, still run.
    await pool.query(
      `INSERT INTO ${jobs} (type, payload, priority, max_retries, run_at) VALUES ('v5', '{}', 5, 3, now())`,
    );
    await pool.query(
      `INSERT INTO "${schema}".dead_letter_jobs (job_id, type, payload, priority, max_retries, error, attempts, errors, worker_id, created_at, died_at)
       VALUES ($1, 'v5', '{}', 5, 0, 'again', 1, '[]', NULL, now(), now()) ON CONFLICT (job_id) DO NOTHING`,
      [id],
    );
    await pool.query(`INSERT INTO ${jobs} (type, idempotency_key) VALUES ('k', 'one')`);
    await assert.rejects(
      pool.query(`INSERT INTO ${jobs} (type, idempotency_key) VALUES ('k', 'one')`),
      /jobs_idempotency_key_idx/,
    );
  });

  it("a worker of version 2 still running after the move to version 3 keeps writing its counters", async () => {
    const schema = fresh();
    await migrate(pool, { schema, notifyChannel: "c1" });
    // The counter upserts of version 2's completions and failures, as that code sends them.
    const v2StatsUpsert = `INSERT INTO "${schema}".job_stats AS s (bucket, slot, done, failed, exec_seconds)
       VALUES (date_trunc('second', now()), 3, $1, $2, $3)
       ON CONFLICT (bucket, slot) DO UPDATE
         SET done = s.done + excluded.done, failed = s.failed + excluded.failed,
             exec_seconds = s.exec_seconds + excluded.exec_seconds`;
    await pool.query(v2StatsUpsert, [2, 0, 1]);
    await pool.query(v2StatsUpsert, [1, 1, 0.5]);
    const metrics = await new Ledger(pool, schema).metrics(30);
    assert.equal(metrics.jobsPerSecond, 3 / metrics.windowSeconds);
    assert.equal(metrics.errorRate, 1 / 4);
    assert.equal(metrics.averageExecutionSeconds, 0.5);
  });

  it("upgrading from version 14: the stored enqueued counts go, the summed counter keeps the jobs", async () => {
    const schema = fresh();
    await migrate(pool, { schema, notifyChannel: "c1", toVersion: 14 });
    const ledger = new Ledger(pool, schema);
    const [first] = await ledger.addJobs([{ type: "up" }, { type: "up" }, { type: "up" }]);
    await ledger.cancelPendingJob((first as { id: number }).id);
    const stored = `SELECT coalesce(sum(count), 0)::int AS n FROM "${schema}".job_totals WHERE event = 'enqueued'`;
    assert.equal((await pool.query(stored)).rows[0].n, 3, "version 14's trigger counted the inserts");
    await migrate(pool, { schema, notifyChannel: "c1" });
    assert.equal((await pool.query(stored)).rows[0].n, 0);
    const series = 'taskqueue_jobs_enqueued_total{type="up"} ';
    const value = async () => {
      const line = (await new DatabaseMetrics(ledger, 30).render())
        .split("\n")
        .find((l) => l.startsWith(series));
      return Number(line?.slice(series.length));
    };
    assert.equal(await value(), 3, "two pending and one cancelled");
    await ledger.addJob({ type: "up" });
    assert.equal(await value(), 4, "the new trigger writes no count; the sum sees the job");
    assert.equal((await pool.query(stored)).rows[0].n, 0);
  });

  it("the CHECK constraints hold even for writes that bypass the ledger", async () => {
    const schema = fresh();
    await migrate(pool, { schema, notifyChannel: "c1" });
    for (const [column, value] of [
      ["priority", 0],
      ["priority", 11],
      ["max_retries", 11],
      ["status", "'lost'"],
    ] as const) {
      await assert.rejects(
        pool.query(`INSERT INTO "${schema}".jobs (type, ${column}) VALUES ('noop', ${value})`),
        /violates check constraint/,
      );
    }
  });
});
