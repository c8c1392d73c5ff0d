/**
 * The hot statements stay proportional to the batch, not to the history (DESIGN.md §3): with
 * 200,000 finished jobs in the table, claim and complete never scan it sequentially, and their
 * joins never rescan the batch for every row.
 */
import assert from "node:assert/strict";
import { after, before, it } from "node:test";
import pg from "pg";
import { completeJobs } from "../../bench/compare/adapters/sql-floor-complete.js";
import { lockClassFor } from "../../src/queue/lock-class.js";
import {
  claimJobs,
  lockConnectionSettings,
  lockSessionSettings,
  writeConnectionSettings,
} from "../../src/queue/sql/claim.js";
import { writeDone } from "../../src/queue/sql/finish.js";
import { typeStates } from "../../src/queue/sql/job-types.js";
import { jsonTextArray, numberArray, tidArray } from "../../src/queue/sql/params.js";
import { pruneJobs } from "../../src/queue/sql/retention.js";
import { createTestDb, DATABASE_URL, type TestDb } from "../helpers/db.js";

interface PlanNode {
  "Node Type": string;
  "Relation Name"?: string;
  "Index Name"?: string;
  "Actual Loops"?: number;
  "Actual Rows"?: number;
  "One-Time Filter"?: string;
  "Rows Removed by Filter"?: number;
  "Rows Removed by Index Recheck"?: number;
  Plans?: PlanNode[];
}
const nodes = (plan: PlanNode): PlanNode[] => [plan, ...(plan.Plans ?? []).flatMap(nodes)];
/** Rows each Sort node of a plan was given (its input's rows over their loops), in plan order. */
const sortInputs = (plan: PlanNode[]): number[] =>
  plan
    .filter((n) => n["Node Type"] === "Sort")
    .map((n) =>
      (n.Plans ?? []).reduce((sum, c) => sum + (c["Actual Rows"] ?? 0) * (c["Actual Loops"] ?? 1), 0),
    );

let db: TestDb;
let client: pg.Client;
before(async () => {
  db = await createTestDb();
  await db.sql(
    "INSERT INTO jobs (type, status, started_at, completed_at, result) SELECT 'noop', 'done', now(), now(), 'null' FROM generate_series(1, 200000)",
  );
  await db.sql("INSERT INTO jobs (type) SELECT 'noop' FROM generate_series(1, 500)");
  await db.sql("ANALYZE jobs");
  client = new pg.Client({ connectionString: DATABASE_URL });
  await client.connect();
  await client.query(lockSessionSettings);
});
after(async () => {
  await client.end();
  await db.drop();
});

async function plan(text: string, values: unknown[], on = client): Promise<PlanNode[]> {
  const { rows } = await on.query(`EXPLAIN (ANALYZE, FORMAT JSON) ${text}`, values);
  const [explained] = rows[0]["QUERY PLAN"] as { Plan: PlanNode; JIT?: unknown }[];
  assert.equal(explained?.JIT, undefined, "no statement of the lock session is JIT-compiled");
  return nodes(explained?.Plan as PlanNode);
}

it("claim and complete of 500 jobs use indexes and visit each row once", async () => {
  const lockClass = lockClassFor(db.schema);
  const claim = await plan(claimJobs(db.schema).text, [["noop"], 500, lockClass, "w", "{}"]);
  assert.deepEqual(
    claim.filter((n) => n["Node Type"] === "Seq Scan").map((n) => n["Relation Name"]),
    [],
    "claim scans no table sequentially",
  );
  // The unlocks a claim carries gate the scan for candidates, so they run before any lock is tried.
  const gates = claim.filter((n) => n["One-Time Filter"] !== undefined);
  assert.ok(
    gates.some((gate) => nodes(gate).some((n) => n["Index Name"] === "jobs_claim_idx")),
    "the claim index is scanned only once the carried unlocks have run",
  );
  const claimed = await db.sql<{ id: number; ctid: string }>(
    "SELECT id, ctid::text AS ctid FROM jobs WHERE status = 'claimed' ORDER BY id",
  );
  assert.equal(claimed.length, 500);
  const ids = claimed.map((r) => r.id);
  const complete = await plan(writeDone(db.schema).text, [
    numberArray(ids),
    numberArray(ids.map(() => 0)),
    jsonTextArray(ids.map(() => "null")),
    numberArray(ids.map(() => 1)),
    "w",
    tidArray(claimed.map((r) => r.ctid)),
  ]);
  assert.deepEqual(
    complete.filter((n) => n["Node Type"] === "Seq Scan").map((n) => n["Relation Name"]),
    [],
    "complete scans no table sequentially",
  );
  const rescans = complete.filter((n) => n["Node Type"] === "CTE Scan" && (n["Actual Loops"] ?? 1) > 1);
  assert.deepEqual(rescans, [], "no CTE is rescanned per row");
  // The batch is reached through the primary key, never through jobs_stale_idx, which holds an
  // entry for every job held since the last vacuum (see `fence` in src/queue/sql/statement.ts).
  const indexes = complete.map((n) => n["Index Name"]).filter((name) => name !== undefined);
  assert.ok(indexes.includes("jobs_pkey"), `completion uses the primary key (${indexes.join(", ")})`);
  assert.ok(!indexes.includes("jobs_stale_idx"), "completion does not scan jobs_stale_idx");
  const [done] = await db.sql<{ n: number }>("SELECT count(*)::int AS n FROM jobs WHERE status = 'done'");
  assert.equal(done?.n, 200500);
});

it("right after a burst of inserts, before ANALYZE sees them, a claim still walks the claim index", async () => {
  const fresh = await createTestDb();
  const session = new pg.Client({ connectionString: DATABASE_URL });
  await session.connect();
  try {
    await session.query(lockSessionSettings);
    await fresh.sql("ANALYZE jobs"); // statistics of an empty table
    await fresh.sql("INSERT INTO jobs (type) SELECT 'noop' FROM generate_series(1, 20000)");
    const claim = await plan(
      claimJobs(fresh.schema).text,
      [["noop"], 800, lockClassFor(fresh.schema), "w", "{}"],
      session,
    );
    const jobScans = claim.filter((n) => n["Relation Name"] === "jobs" && n["Node Type"].includes("Scan"));
    assert.equal(
      `${jobScans[0]?.["Node Type"]} ${jobScans[0]?.["Index Name"]}`,
      "Index Scan jobs_claim_idx",
      "candidates are read in claim-index order",
    );
    assert.ok(!jobScans.some((n) => n["Node Type"] === "Seq Scan"), "no sequential scan of jobs");
    assert.deepEqual(
      sortInputs(claim),
      [800, 800],
      "two sorts: the candidates' (per type, at most 800 each) and the claimed rows' final order, never the pending set",
    );
    // Rounds of claims and completions leave dead entries in jobs_stale_idx (no vacuum yet), and a
    // second lock session holds jobs too. (A drain with two lock sessions in this state once planned
    // a nested loop rescanning the batch for every held row; see lockSessionSettings.)
    const lockClass = lockClassFor(fresh.schema);
    for (let round = 0; round < 10; round++) {
      const batch = await fresh.sql<{ id: number; ctid: string }>(
        "SELECT id, ctid::text AS ctid FROM jobs WHERE worker_id = 'w' AND status = 'claimed'",
      );
      const batchIds = batch.map((r) => r.id);
      await session.query(completeJobs(fresh.schema).text, [
        numberArray(batchIds),
        numberArray(batchIds.map(() => 0)),
        jsonTextArray(batchIds.map(() => "null")),
        numberArray(batchIds.map(() => 1)),
        "w",
        tidArray(batch.map((r) => r.ctid)),
        lockClass,
      ]);
      await session.query(claimJobs(fresh.schema).text, [["noop"], 800, lockClass, "w", "{}"]);
    }
    const other = new pg.Client({ connectionString: DATABASE_URL });
    await other.connect();
    try {
      await other.query(lockSessionSettings);
      await other.query(claimJobs(fresh.schema).text, [
        ["noop"],
        800,
        lockClassFor(fresh.schema),
        "w2",
        "{}",
      ]);
    } finally {
      await other.end();
    }
    const held = await fresh.sql<{ id: number; ctid: string }>(
      "SELECT id, ctid::text AS ctid FROM jobs WHERE worker_id = 'w'",
    );
    const ids = held.map((r) => r.id);
    const complete = await plan(
      writeDone(fresh.schema).text,
      [
        numberArray(ids),
        numberArray(ids.map(() => 0)),
        jsonTextArray(ids.map(() => "null")),
        numberArray(ids.map(() => 1)),
        "w",
        tidArray(held.map((r) => r.ctid)),
      ],
      session,
    );
    const rescans = complete.filter((n) => (n["Actual Loops"] ?? 1) > 1);
    assert.deepEqual(rescans, [], "no plan node runs once per row of the batch");
  } finally {
    await session.end();
    await fresh.drop();
  }
});

it("cached plans built on an empty table still walk the claim index, and update claimed rows where they were locked", async () => {
  const fresh = await createTestDb();
  const lock = new pg.Client({ connectionString: DATABASE_URL });
  const writes = new pg.Client({ connectionString: DATABASE_URL });
  await Promise.all([lock.connect(), writes.connect()]);
  try {
    await lock.query(lockConnectionSettings);
    await writes.query(writeConnectionSettings);
    await fresh.sql("ANALYZE jobs"); // statistics of an empty table
    const lockClass = Number(lockClassFor(fresh.schema));
    await lock.query(`PREPARE claim(text[], int, int4, text, bigint[]) AS ${claimJobs(fresh.schema).text}`);
    await writes.query(
      `PREPARE done(bigint[], int[], jsonb, float8[], text, tid[]) AS ${writeDone(fresh.schema).text}`,
    );
    const claim = `EXECUTE claim('{noop}', 800, ${lockClass}, 'w', '{}')`;
    await lock.query(claim); // the plans are cached now, for a table with no rows
    await writes.query("EXECUTE done('{}', '{}', '[]', '{}', 'w', '{}')");
    const explain = async (on: pg.Client, text: string) => {
      const { rows } = await on.query(`EXPLAIN (ANALYZE, FORMAT JSON) ${text}`);
      const [explained] = rows[0]["QUERY PLAN"] as { Plan: PlanNode }[];
      return nodes(explained?.Plan as PlanNode);
    };
    // Index scans in plan order (a bitmap scan of the primary key is as good as an index scan of
    // it: PostgreSQL 16 picks one, 15 the other); and no sequential scan of jobs anywhere.
    const scansOfJobs = (plan: PlanNode[]) => {
      assert.ok(
        !plan.some((n) => n["Node Type"] === "Seq Scan" && n["Relation Name"] === "jobs"),
        "no sequential scan of jobs",
      );
      return plan
        .filter(
          (n) =>
            (n["Index Name"]?.startsWith("jobs_") && n["Node Type"] !== "Bitmap Heap Scan") ||
            (n["Node Type"] === "Tid Scan" && n["Relation Name"] === "jobs"),
        )
        .map((n) =>
          n["Node Type"] === "Tid Scan"
            ? "Tid Scan jobs"
            : `${n["Node Type"] === "Bitmap Index Scan" ? "Index Scan" : n["Node Type"]} ${n["Index Name"]}`,
        );
    };
    for (const history of [0, 200_000]) {
      if (history > 0) {
        await fresh.sql(
          "INSERT INTO jobs (type, status, started_at, completed_at, result) SELECT 'noop', 'done', now(), now(), 'null' FROM generate_series(1, $1::int)",
          [history],
        );
        await fresh.sql("ANALYZE jobs");
      }
      await fresh.sql("INSERT INTO jobs (type) SELECT 'noop' FROM generate_series(1, 20000)");
      const claimPlan = await explain(lock, claim);
      // The update finds the locked rows where the candidates' scan locked them (a TID scan); the
      // primary key is walked only for rows that moved since (none here: it reads no row). The
      // report of due run-alone jobs probes jobs_alone_idx, which cannot serve the claim (nor
      // jobs_claim_idx the probe: their predicates exclude each other).
      assert.deepEqual(scansOfJobs(claimPlan), [
        "Index Scan jobs_claim_idx",
        "Tid Scan jobs",
        "Index Scan jobs_pkey",
        "Index Scan jobs_alone_idx",
      ]);
      const rowsOf = (scan: string) =>
        claimPlan.find(
          (n) =>
            (n["Node Type"] === "Tid Scan" ? "Tid Scan jobs" : `${n["Node Type"]} ${n["Index Name"]}`) ===
            scan,
        )?.["Actual Rows"];
      assert.equal(rowsOf("Tid Scan jobs"), 800, "every claimed row found where it was locked");
      assert.equal(rowsOf("Index Scan jobs_pkey"), 0, "no walk of the primary key when no row moved");
      assert.deepEqual(
        sortInputs(claimPlan),
        [800, 800],
        "only the candidates and the claimed rows are sorted",
      );
      const held = await fresh.sql<{ id: number; ctid: string }>(
        "SELECT id, ctid::text AS ctid FROM jobs WHERE status = 'claimed' ORDER BY id",
      );
      assert.equal(held.length, 800);
      const ids = held.map((r) => r.id);
      const donePlan = await explain(
        writes,
        `EXECUTE done('${numberArray(ids)}', '${numberArray(ids.map(() => 0))}', '${jsonTextArray(ids.map(() => "null"))}', '${numberArray(ids.map(() => 1))}', 'w', '${tidArray(held.map((r) => r.ctid))}')`,
      );
      // The batch is read at the row versions its claim returned (a TID scan), never by a walk of
      // the whole primary key; the ids not found there (none here) through the primary key.
      assert.deepEqual(
        scansOfJobs(donePlan),
        ["Tid Scan jobs", "Index Scan jobs_pkey"],
        `completion, ${history} finished jobs`,
      );
      assert.equal(
        donePlan.find((n) => n["Node Type"] === "Tid Scan")?.["Actual Rows"],
        800,
        "every row is found at its claimed version",
      );
      // With every row found, the ids left for the primary key are not even computed.
      const leftovers = donePlan.filter((n) => n["Node Type"] === "SetOp");
      assert.equal(leftovers.length, 1, "one set operation computes the ids left over");
      assert.equal(leftovers[0]?.["Actual Loops"], 0, "the left-over ids are not computed");
      assert.deepEqual(
        donePlan.filter((n) => (n["Actual Loops"] ?? 1) > 1).map((n) => n["Node Type"]),
        [],
        "no plan node runs once per row of the batch",
      );
      await lock.query("SELECT pg_advisory_unlock_all()");
      await fresh.sql("DELETE FROM jobs WHERE status <> 'done'");
    }
  } finally {
    await Promise.all([lock.end(), writes.end()]);
    await fresh.drop();
  }
});

it("a pruning batch reads the history through the primary key, one batch of rows, on a plain pool connection", async () => {
  const plain = new pg.Client({ connectionString: DATABASE_URL });
  await plain.connect();
  try {
    // Retentions 0: nothing is due, so nothing is deleted; the shorter retention 1 s for the frontier.
    const prune = await plan(pruneJobs(db.schema).text, [0, 1000, 0, 0, 1], plain);
    const jobScans = prune.filter((n) => n["Relation Name"] === "jobs");
    assert.deepEqual(
      jobScans.filter((n) => n["Node Type"] === "Seq Scan"),
      [],
      "no sequential scan of jobs",
    );
    assert.ok(
      jobScans.some((n) => n["Index Name"] === "jobs_pkey" && (n["Actual Rows"] ?? 0) <= 1000),
      `the batch is read through jobs_pkey, 1,000 rows (${jobScans.map((n) => `${n["Node Type"]} ${n["Index Name"]} ${n["Actual Rows"]}`).join("; ")})`,
    );
  } finally {
    await plain.end();
  }
});

it("a claim reads only its own types' pending jobs, whatever other types' backlog, and skips paused types unread", async () => {
  const fresh = await createTestDb();
  const lock = new pg.Client({ connectionString: DATABASE_URL });
  await lock.connect();
  try {
    await lock.query(lockConnectionSettings);
    // 200,000 pending `b` (a backlog ahead of every `a` in claim order: higher priority, older),
    // 100,000 pending `c`, paused; 20 pending `a`, 20 pending `d`.
    await fresh.sql(
      "INSERT INTO jobs (type, priority, run_at) SELECT 'b', 9, now() - interval '1 hour' FROM generate_series(1, 200000)",
    );
    await fresh.sql(
      "INSERT INTO jobs (type, priority, run_at) SELECT 'c', 10, now() - interval '2 hours' FROM generate_series(1, 100000)",
    );
    await fresh.sql(
      "INSERT INTO jobs (type) SELECT t FROM unnest('{a,d}'::text[]) AS t, generate_series(1, 20)",
    );
    await fresh.sql("INSERT INTO paused_types (type) VALUES ('c')");
    await fresh.sql("ANALYZE jobs");
    const lockClass = Number(lockClassFor(fresh.schema));
    await lock.query(`PREPARE claim(text[], int, int4, text, bigint[]) AS ${claimJobs(fresh.schema).text}`);
    /** Rows the claim read from jobs (every scan node's rows over its loops), its indexes, and what it claimed. */
    const claimReads = async (types: string[], limit: number) => {
      const { rows } = await lock.query(
        `EXPLAIN (ANALYZE, FORMAT JSON) EXECUTE claim('{${types.join(",")}}', ${limit}, ${lockClass}, 'w', '{}')`,
      );
      const [explained] = rows[0]["QUERY PLAN"] as { Plan: PlanNode }[];
      const scans = nodes(explained?.Plan as PlanNode).filter(
        (n) => n["Relation Name"] === "jobs" || n["Index Name"]?.startsWith("jobs_"),
      );
      const read = scans.reduce(
        (sum, n) =>
          sum +
          ((n["Actual Rows"] ?? 0) +
            (n["Rows Removed by Filter"] ?? 0) +
            (n["Rows Removed by Index Recheck"] ?? 0)) *
            (n["Actual Loops"] ?? 1),
        0,
      );
      const claimed = await fresh.sql<{ type: string; n: number }>(
        "SELECT type, count(*)::int AS n FROM jobs WHERE status = 'claimed' GROUP BY type ORDER BY type",
      );
      await lock.query("SELECT pg_advisory_unlock_all()");
      await fresh.sql(
        "UPDATE jobs SET status = 'pending', worker_id = NULL, claimed_at = NULL WHERE status = 'claimed'",
      );
      return { read, indexes: new Set(scans.map((n) => n["Index Name"])), claimed };
    };
    const one = await claimReads(["a"], 10);
    assert.deepEqual(one.claimed, [{ type: "a", n: 10 }]);
    assert.ok(one.indexes.has("jobs_claim_idx"), "the claim walks jobs_claim_idx");
    assert.ok(one.read <= 50, `a claim of 10 \`a\` jobs read ${one.read} rows of jobs`);
    // A worker of many types, one of them paused with a backlog ahead of all others: the paused
    // type's jobs are never read, the others give at most `limit` rows each.
    const many = await claimReads(["a", "c", "d", "e", "f"], 30);
    assert.deepEqual(many.claimed, [
      { type: "a", n: 20 },
      { type: "d", n: 10 },
    ]);
    assert.ok(many.read <= 150, `a claim of 30 jobs of 5 types read ${many.read} rows of jobs`);
    // A worker of one type claims with the one-type statement: the same rows, no paused type.
    await lock.query(
      `PREPARE claim_one(text[], int, int4, text, bigint[]) AS ${claimJobs(fresh.schema, true).text}`,
    );
    for (const [type, expected] of [
      ["a", [{ type: "a", n: 10 }]],
      ["c", []],
    ] as const) {
      const { rows } = await lock.query(
        `EXPLAIN (ANALYZE, FORMAT JSON) EXECUTE claim_one('{${type}}', 10, ${lockClass}, 'w', '{}')`,
      );
      const [explained] = rows[0]["QUERY PLAN"] as { Plan: PlanNode }[];
      const scans = nodes(explained?.Plan as PlanNode).filter((n) => n["Index Name"]?.startsWith("jobs_"));
      const read = scans.reduce(
        (sum, n) =>
          sum + ((n["Actual Rows"] ?? 0) + (n["Rows Removed by Filter"] ?? 0)) * (n["Actual Loops"] ?? 1),
        0,
      );
      assert.ok(read <= 50, `a one-type claim of \`${type}\` read ${read} rows of jobs`);
      const claimed = await fresh.sql(
        "SELECT type, count(*)::int AS n FROM jobs WHERE status = 'claimed' GROUP BY type",
      );
      assert.deepEqual(claimed, expected, `one-type claim of ${type}`);
      await lock.query("SELECT pg_advisory_unlock_all()");
      await fresh.sql(
        "UPDATE jobs SET status = 'pending', worker_id = NULL, claimed_at = NULL WHERE status = 'claimed'",
      );
    }
    // The guard can fail: without the type-led index the same claim reads the whole backlog.
    await fresh.sql("DROP INDEX jobs_claim_idx");
    await lock.query("DEALLOCATE claim");
    await lock.query(`PREPARE claim(text[], int, int4, text, bigint[]) AS ${claimJobs(fresh.schema).text}`);
    const unindexed = await claimReads(["a"], 10);
    assert.deepEqual(unindexed.claimed, [{ type: "a", n: 10 }]);
    assert.ok(unindexed.read > 200_000, `without jobs_claim_idx the claim read ${unindexed.read} rows`);
  } finally {
    await lock.end();
    await fresh.drop();
  }
});

it("per-type pending counts (GET /types) read the pending jobs from the claim index alone, not the history", async () => {
  // The index is led by hashtext(type) since schema version 14; the type is an INCLUDE column of
  // it, so these counts still need no row of the table (200,000 finished jobs here).
  await db.sql("VACUUM ANALYZE jobs");
  const plain = new pg.Client({ connectionString: DATABASE_URL });
  await plain.connect();
  try {
    const states = await plan(typeStates(db.schema).text, [60, 1000], plain);
    const jobScans = states.filter((n) => n["Relation Name"] === "jobs");
    assert.deepEqual(
      jobScans
        .filter((n) => !["Index Only Scan", "Index Scan"].includes(n["Node Type"]))
        .map((n) => n["Node Type"]),
      [],
      "jobs is read through its pending-only indexes",
    );
    assert.ok(
      jobScans.some((n) => n["Node Type"] === "Index Only Scan" && n["Index Name"] === "jobs_claim_idx"),
      `the ordinary pending jobs come from jobs_claim_idx alone (${jobScans.map((n) => `${n["Node Type"]} ${n["Index Name"]}`).join("; ")})`,
    );
  } finally {
    await plain.end();
  }
});
