/**
 * A completion reads each job's row at the version its claim returned (sql/finish.ts,
 * session/claim-rows.ts), and every job whose row moved since through the primary key: the
 * outcome is the same either way, fenced alike, and the session keeps no version once it holds no
 * job.
 */
import assert from "node:assert/strict";
import { after, before, beforeEach, it } from "node:test";
import pg from "pg";
import { lockSessionSettings } from "../../src/queue/sql/claim.js";
import { writeDone } from "../../src/queue/sql/finish.js";
import { jsonTextArray, numberArray, tidArray } from "../../src/queue/sql/params.js";
import { createTestDb, DATABASE_URL, type TestDb } from "../helpers/db.js";

let db: TestDb;

before(async () => {
  db = await createTestDb();
});
after(async () => {
  await db.drop();
});
beforeEach(async () => {
  await db.closeLockSessions();
  await db.sql("DELETE FROM jobs");
});

/** Each job's status and result, by id. */
async function outcomes(): Promise<Map<number, { status: string; result: unknown }>> {
  const rows = await db.sql<{ id: number; status: string; result: unknown }>(
    "SELECT id, status, result FROM jobs ORDER BY id",
  );
  return new Map(rows.map((r) => [r.id, { status: r.status, result: r.result }]));
}

it("a batch completes whether its rows stayed at their claimed versions or moved since", async () => {
  const jobs = await db.ledger.addJobs(
    Array.from({ length: 4 }, (_, i) => ({ type: "noop", payload: { i } })),
  );
  const session = await db.openLockSession("w1");
  const claimed = await session.claim(["noop"], 10);
  assert.equal(claimed.length, 4);
  assert.equal(session.rowVersionsKept, 4, "one version per claimed job");
  const [stays, marked, touched, another] = claimed.map((j) => j.id) as [number, number, number, number];
  // Two rows get new versions after the claim: a running mark, and a write of another process.
  assert.deepEqual([...(await session.markRunning([{ id: marked, attempt: 0 }]))], [marked]);
  await db.sql("UPDATE jobs SET heartbeat_at = now() WHERE id = $1", [touched]);
  const refused = await session.complete(
    [stays, marked, touched, another].map((id) => ({ id, attempt: 0, resultJson: `{"id":${id}}`, runMs: 1 })),
  );
  assert.deepEqual(refused, []);
  const after = await outcomes();
  for (const job of jobs) assert.deepEqual(after.get(job.id), { status: "done", result: { id: job.id } });
  assert.equal(session.rowVersionsKept, 0, "the versions go with the locks");
  const [counted] = await db.sql<{ n: string }>(
    "SELECT coalesce(sum(count), 0)::text AS n FROM job_counts WHERE status = 'done'",
  );
  assert.equal(counted?.n, "4", "each job is counted once, whichever step completed it");
});

it("a version that holds another job's row completes neither job by mistake: the fence decides", async () => {
  await db.ledger.addJobs([{ type: "noop" }, { type: "noop" }, { type: "other" }]);
  const session = await db.openLockSession("w1");
  const [a, b] = await session.claim(["noop"], 10);
  const otherSession = await db.openLockSession("w2");
  const [c] = await otherSession.claim(["other"], 10);
  assert.ok(a && b && c);
  const versions = await db.sql<{ id: number; ctid: string }>("SELECT id, ctid::text AS ctid FROM jobs");
  const versionOf = (id: number) => versions.find((v) => v.id === id)?.ctid ?? null;
  const client = new pg.Client({ connectionString: DATABASE_URL });
  await client.connect();
  try {
    await client.query(lockSessionSettings);
    // a's version slot holds b's version, b's holds c's (c is held by w2): the TID scan reaches
    // rows b and c; b is matched to its own id, c to none, and a is found by its id.
    const ids = [a.id, b.id];
    const { rows } = await client.query<{ refused_ids: string[] }>({
      text: writeDone(db.schema).text,
      values: [
        numberArray(ids),
        numberArray([0, 0]),
        jsonTextArray(['"a"', '"b"']),
        numberArray([1, 1]),
        "w1",
        tidArray([versionOf(b.id), versionOf(c.id)]),
      ],
    });
    assert.deepEqual(rows[0]?.refused_ids, []);
  } finally {
    await client.end();
  }
  const after = await outcomes();
  assert.deepEqual(after.get(a.id), { status: "done", result: "a" });
  assert.deepEqual(after.get(b.id), { status: "done", result: "b" });
  assert.deepEqual(
    after.get(c.id),
    { status: "claimed", result: null },
    "the other worker's job is untouched",
  );
});

it("a completion the fence refuses is refused, whether its row is found at its version or by id", async () => {
  await db.ledger.addJobs([{ type: "noop" }, { type: "noop" }]);
  const session = await db.openLockSession("w1");
  const [moved, stayed] = await session.claim(["noop"], 2);
  assert.ok(moved && stayed);
  // Another worker's claim now owns `moved` (a new row version; this worker's is stale), and
  // `stayed` is completed for an attempt it is not at (its row found at its version).
  await db.sql("UPDATE jobs SET worker_id = 'w2', attempt = attempt + 1 WHERE id = $1", [moved.id]);
  const refused = await session.complete([
    { id: moved.id, attempt: moved.attempt, resultJson: "1", runMs: 1 },
    { id: stayed.id, attempt: stayed.attempt + 1, resultJson: "1", runMs: 1 },
  ]);
  assert.deepEqual(refused.sort(), [moved.id, stayed.id].sort());
  const after = await outcomes();
  assert.deepEqual(after.get(moved.id), { status: "claimed", result: null });
  assert.deepEqual(after.get(stayed.id), { status: "claimed", result: null });
  assert.equal(session.rowVersionsKept, 0);
});

it("a job updated after a claim's snapshot and before its row lock (still pending) is claimed, and its lock released with it", async () => {
  // The row lock follows a job updated meanwhile to its newest version, which the statement's
  // snapshot does not see, so the claim's update by the candidates' ctid (claimed_found) finds
  // nothing there; its second step (claimed_rest) reaches the job through the primary key.
  // Without that step the job stayed unclaimed under a fresh advisory lock. The limited claim
  // (which shares that update with every claim, CLAIM_TAIL) makes the window deterministic: it
  // takes its snapshot, then waits for the type's limit row, which this test holds while the job
  // is updated.
  await db.sql("DELETE FROM type_limits");
  await db.ledger.setTypeLimit("capped", { maxRunning: 5 });
  const job = await db.ledger.addJob({ type: "capped" });
  const holder = new pg.Client({ connectionString: DATABASE_URL });
  await holder.connect();
  try {
    await holder.query("BEGIN");
    await holder.query(`SELECT * FROM "${db.schema}".type_limits FOR UPDATE`);
    const session = await db.openLockSession("w1");
    const claiming = session.claimLimited(["capped"], 10);
    const waiting = async () =>
      (
        await db.sql<{ n: number }>(
          "SELECT count(*)::int AS n FROM pg_stat_activity WHERE wait_event_type = 'Lock' AND query LIKE '%type_limit_room%'",
        )
      )[0]?.n ?? 0;
    for (let i = 0; (await waiting()) === 0; i++) {
      assert.ok(i < 1000, "the claim waits for the limit row");
      await new Promise((resolve) => setTimeout(resolve, 10));
    }
    await db.sql("UPDATE jobs SET watched = true WHERE id = $1", [job.id]); // still pending
    await holder.query("COMMIT");
    const { jobs } = await claiming;
    assert.deepEqual(
      jobs.map((j) => j.id),
      [job.id],
    );
    assert.deepEqual(await session.complete([{ id: job.id, attempt: 0, resultJson: "null", runMs: 1 }]), []);
    assert.equal((await db.ledger.getJob(job.id))?.status, "done");
    assert.deepEqual(await db.ledger.heldJobLocks(), [], "no advisory lock outlives the job");
  } finally {
    await holder.query("ROLLBACK").catch(() => undefined);
    await holder.end();
    await db.sql("DELETE FROM type_limits");
  }
});
