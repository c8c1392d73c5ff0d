/**
 * The job-shape table (src/queue/job-shape.ts) against the migrated schema: the migrations keep
 * their own literals (immutable history), so this is what keeps the two from drifting apart. It
 * reads the live `jobs` and `dead_letter_jobs` tables from the catalogue: their columns, the
 * defaults of priority and max_retries, and the CHECK constraints that bound a field.
 */
import assert from "node:assert/strict";
import { after, before, describe, it } from "node:test";
import { toJobResponse } from "../../src/api/job-response.js";
import { BatchTooLargeError } from "../../src/errors.js";
import {
  CLAIMED_FIELDS,
  DEAD_LETTER_FIELDS,
  INTERNAL_JOB_COLUMNS,
  JOB_CONSTRAINTS,
  JOB_FIELDS,
  LIMITS,
  newJob,
} from "../../src/queue/job-shape.js";
import type { ClaimedJob as LockSessionClaimedJob } from "../../src/queue/lock-session.js";
import type { ClaimedJob, Job } from "../../src/queue/types.js";
import { createTestDb, type TestDb } from "../helpers/db.js";

// The lock session's ClaimedJob (lock-session.ts) must be types.ts's: each assignable to the other.
type Same<A, B> = [A] extends [B] ? ([B] extends [A] ? true : false) : false;
const claimedJobIsOne: Same<LockSessionClaimedJob, ClaimedJob> = true;
void claimedJobIsOne;

let db: TestDb;
before(async () => {
  db = await createTestDb();
});
after(async () => {
  await db.drop();
});

/** Columns of a table of the test schema, in table order, with type, nullability and default. */
async function columns(table: string) {
  return db.sql<{ name: string; type: string; nullable: boolean; default: string | null }>(
    `SELECT a.attname AS name, format_type(a.atttypid, a.atttypmod) AS type, NOT a.attnotnull AS nullable,
            pg_get_expr(d.adbin, d.adrelid) AS default
     FROM pg_attribute a LEFT JOIN pg_attrdef d ON d.adrelid = a.attrelid AND d.adnum = a.attnum
     WHERE a.attrelid = format('%I.%I', $1::text, $2::text)::regclass AND a.attnum > 0 AND NOT a.attisdropped
     ORDER BY a.attnum`,
    [db.schema, table],
  );
}

/** The `BETWEEN min AND max` of a CHECK constraint's definition, as PostgreSQL prints it back. */
function bounds(definition: string): { min: number; max: number } {
  const m = /CHECK \(\(\(?(.+?)\)? >= (-?\d+)\) AND \(\(?\1\)? <= (-?\d+)\)\)\)/.exec(definition);
  assert.ok(m, `a range check: ${definition}`);
  return { min: Number(m[2]), max: Number(m[3]) };
}

describe("the job-shape table matches the migrated schema", () => {
  it("JOB_FIELDS names every column of jobs but the internal ones, in table order, timestamps and nullability as stored", async () => {
    const live = await columns("jobs");
    assert.deepEqual(
      JOB_FIELDS.map((f) => f.column),
      live.map((c) => c.name).filter((name) => !(INTERNAL_JOB_COLUMNS as readonly string[]).includes(name)),
    );
    for (const field of JOB_FIELDS) {
      const column = live.find((c) => c.name === field.column);
      assert.equal(column?.type === "timestamp with time zone", field.timestamp, `${field.column} timestamp`);
      assert.equal(column?.nullable, field.nullable, `${field.column} nullable`);
    }
  });

  it("DEAD_LETTER_FIELDS names every column of dead_letter_jobs, in table order", async () => {
    assert.deepEqual(
      DEAD_LETTER_FIELDS.map((f) => f.column),
      (await columns("dead_letter_jobs")).map((c) => c.name),
    );
  });

  it("the CHECK constraints bounding job fields enforce LIMITS, and nothing bounds one unseen", async () => {
    const checks = await db.sql<{ name: string; definition: string }>(
      `SELECT conname AS name, pg_get_constraintdef(oid) AS definition FROM pg_constraint
       WHERE conrelid = format('%I.jobs', $1::text)::regclass AND contype = 'c' ORDER BY conname`,
      [db.schema],
    );
    for (const [name, { field, limit }] of Object.entries(JOB_CONSTRAINTS)) {
      const check = checks.find((c) => c.name === name);
      assert.ok(check, `constraint ${name} exists`);
      const column = JOB_FIELDS.find((f) => f.field === field)?.column as string;
      assert.match(check.definition, new RegExp(`\\b${column}\\b`), `${name} checks ${column}`);
      assert.deepEqual(bounds(check.definition), { min: limit.min, max: limit.max }, name);
    }
    // Every other range check of the table would be a limit the table does not know.
    const unknown = checks.filter((c) => !(c.name in JOB_CONSTRAINTS) && /<=/.test(c.definition));
    assert.deepEqual(unknown, []);
  });

  it("the column defaults of priority and max_retries are LIMITS' defaults", async () => {
    const live = await columns("jobs");
    assert.equal(live.find((c) => c.name === "priority")?.default, String(LIMITS.priority.default));
    assert.equal(live.find((c) => c.name === "max_retries")?.default, String(LIMITS.maxRetries.default));
  });

  it("a claim returns exactly CLAIMED_FIELDS", async () => {
    const job = await db.ledger.addJob({
      type: "shape",
      payload: { a: 1 },
      priority: 7,
      maxRetries: 2,
      timeoutSeconds: 9,
    });
    const session = await db.openLockSession("shape-worker");
    const [claimed] = await session.claim(["shape"], 1);
    assert.deepEqual(Object.keys(claimed ?? {}).sort(), [...CLAIMED_FIELDS].sort());
    assert.deepEqual(claimed, {
      id: job.id,
      type: "shape",
      payload: { a: 1 },
      priority: 7,
      attempt: 0,
      maxRetries: 2,
      timeoutSeconds: 9,
    });
    await db.closeLockSessions();
  });

  it("a new job holds each field's initial value, and the wire shape each table field under its wire name", async () => {
    const runAt = new Date("2030-01-02T03:04:05.678Z");
    const createdAt = new Date("2030-01-01T00:00:00.001Z");
    const job = newJob({
      id: 7,
      type: "t",
      payload: { a: 1 },
      priority: 9,
      maxRetries: 2,
      runAt,
      createdAt,
      idempotencyKey: null,
      timeoutSeconds: null,
    });
    for (const f of JOB_FIELDS)
      if ("initial" in f)
        assert.deepEqual(job[f.field], f.initial === "[]" ? [] : f.initial, `initial value of ${f.field}`);
    assert.deepEqual(
      Object.keys(job),
      JOB_FIELDS.map((f) => f.field),
    );
    // Every field set to a value of its own, so that a wire field fed from the wrong field shows.
    const distinct: Job = {
      ...job,
      status: "running",
      attempt: 3,
      claimedAt: new Date("2030-01-03T00:00:00Z"),
      startedAt: new Date("2030-01-04T00:00:00Z"),
      heartbeatAt: new Date("2030-01-05T00:00:00Z"),
      completedAt: new Date("2030-01-06T00:00:00Z"),
      result: { r: true },
      error: "e",
      errors: [{ attempt: 0, error: "x", worker_id: "w", failed_at: "2030-01-01T00:00:00Z" }],
      workerId: "worker-1",
    };
    const wire = toJobResponse(distinct) as Record<string, unknown>;
    assert.deepEqual(
      Object.keys(wire),
      JOB_FIELDS.map((f) => f.wire),
    );
    for (const f of JOB_FIELDS) {
      const value = distinct[f.field];
      assert.deepEqual(wire[f.wire], f.timestamp ? (value as Date).toISOString() : value, f.wire);
    }
  });

  it("a read returns a Job with every field and nothing else", async () => {
    const job = await db.ledger.addJob({ type: "shape" });
    const read = await db.ledger.getJob(job.id);
    assert.deepEqual(Object.keys(read ?? {}).sort(), JOB_FIELDS.map((f) => f.field).sort());
  });
});

describe("batch size", () => {
  it(`more than ${LIMITS.batchJobs} jobs in one batch is a BatchTooLargeError; nothing is written`, async () => {
    const specs = Array.from({ length: LIMITS.batchJobs + 1 }, () => ({ type: "too-many" }));
    await assert.rejects(db.ledger.addJobs(specs), (error: unknown) => {
      assert.ok(error instanceof BatchTooLargeError);
      assert.equal(error.size, LIMITS.batchJobs + 1);
      assert.equal(error.max, LIMITS.batchJobs);
      return true;
    });
    await assert.rejects(db.ledger.addJobIds(specs), BatchTooLargeError);
    assert.deepEqual(await db.ledger.listJobs({ type: "too-many" }), []);
  });
});
