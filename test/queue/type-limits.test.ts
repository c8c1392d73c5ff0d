/**
 * Global limits per type (issue 13, item 3) on the ledger: the limited claim (sql/claim-limited.ts)
 * keeps at most `max_running` jobs of a type held across lock sessions claiming at once, its token
 * bucket gives at most `burst` at once and refills at its rate, a paused limited type gives
 * nothing, the ordinary claim never takes a limited type and takes it again once the limit is
 * removed; run-alone jobs ignore limits.
 */
import assert from "node:assert/strict";
import { after, before, beforeEach, describe, it } from "node:test";
import pg from "pg";
import { JobValidationError } from "../../src/errors.js";
import { lockClassFor } from "../../src/queue/lock-class.js";
import { lockSessionSettings } from "../../src/queue/sql/claim.js";
import { claimLimitedJobs } from "../../src/queue/sql/claim-limited.js";
import { createTestDb, DATABASE_URL, type TestDb, type TestLockSession } from "../helpers/db.js";

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
  await db.sql("DELETE FROM type_limits");
  await db.sql("DELETE FROM paused_types");
});

/** Jobs of `type` held now (claimed or running), as the ledger says. */
async function held(type: string): Promise<number> {
  const [row] = await db.sql<{ n: number }>(
    "SELECT count(*)::int AS n FROM jobs WHERE type = $1 AND status IN ('claimed', 'running')",
    [type],
  );
  return row?.n ?? -1;
}

async function addJobs(type: string, n: number): Promise<void> {
  await db.ledger.addJobs(Array.from({ length: n }, () => ({ type })));
}

describe("the limited claim", () => {
  it("8 lock sessions claiming at once never hold more than max_running jobs of the type", async () => {
    await db.ledger.setTypeLimit("capped", { maxRunning: 5 });
    await addJobs("capped", 200);
    const sessions: TestLockSession[] = [];
    for (let i = 0; i < 8; i++) sessions.push(await db.openLockSession(`w${i}`));
    const holding = new Map<TestLockSession, { id: number; attempt: number }[]>(sessions.map((s) => [s, []]));
    let maxHeld = 0;
    for (let round = 0; round < 25; round++) {
      // Every session claims at once; then one of them completes what it holds.
      const claims = await Promise.all(sessions.map((s) => s.claimLimited(["capped"], 4)));
      claims.forEach((c, i) => {
        holding
          .get(sessions[i] as TestLockSession)
          ?.push(...c.jobs.map((j) => ({ id: j.id, attempt: j.attempt })));
      });
      const now = await held("capped");
      const inNode = [...holding.values()].reduce((sum, jobs) => sum + jobs.length, 0);
      assert.equal(now, inNode, "the ledger holds what the sessions got");
      assert.ok(now <= 5, `round ${round}: ${now} jobs held, limit 5`);
      maxHeld = Math.max(maxHeld, now);
      const finisher = sessions[round % sessions.length] as TestLockSession;
      const done = holding.get(finisher) ?? [];
      holding.set(finisher, []);
      await finisher.complete(done.map((ref) => ({ ...ref, resultJson: "null", runMs: 1 })));
    }
    assert.equal(maxHeld, 5, "the limit was reached");
  });

  it("reports heldBack while due jobs wait for room, and takes them once held jobs end", async () => {
    await db.ledger.setTypeLimit("capped", { maxRunning: 2 });
    await addJobs("capped", 3);
    const session = await db.openLockSession("w1");
    const first = await session.claimLimited(["capped"], 10);
    assert.equal(first.jobs.length, 2);
    assert.equal(first.heldBack, true);
    assert.equal(first.waitSeconds, null);
    const none = await session.claimLimited(["capped"], 10);
    assert.deepEqual([none.jobs.length, none.heldBack], [0, true]);
    await session.complete(
      first.jobs.map((j) => ({ id: j.id, attempt: j.attempt, resultJson: "null", runMs: 1 })),
    );
    const last = await session.claimLimited(["capped"], 10);
    assert.deepEqual([last.jobs.length, last.heldBack], [1, false], "no due job is left waiting");
  });

  it("the token bucket gives at most burst at once, then one token per 1/rate seconds", async () => {
    await db.ledger.setTypeLimit("rated", { ratePerSecond: 2, burst: 3 });
    await addJobs("rated", 20);
    const session = await db.openLockSession("w1");
    const burst = await session.claimLimited(["rated"], 10);
    assert.equal(burst.jobs.length, 3, "a full bucket: burst");
    assert.ok(
      burst.waitSeconds !== null && burst.waitSeconds > 0 && burst.waitSeconds <= 0.5,
      `${burst.waitSeconds}`,
    );
    const empty = await session.claimLimited(["rated"], 10);
    assert.ok(empty.jobs.length <= 1, `${empty.jobs.length} claimed from an empty bucket`);
    // 2 s later (the bucket's clock moved back rather than waiting): 4 tokens, at most burst 3.
    await db.sql("UPDATE type_limits SET refilled_at = refilled_at - interval '2 seconds', tokens = 0");
    assert.equal((await session.claimLimited(["rated"], 10)).jobs.length, 3);
    await db.sql("UPDATE type_limits SET refilled_at = refilled_at - interval '1 second', tokens = 0");
    assert.equal((await session.claimLimited(["rated"], 10)).jobs.length, 2, "1 s at 2/s: 2 tokens");
    // The tokens never go below zero, however many sessions claim.
    const [bucket] = await db.sql<{ tokens: number }>("SELECT tokens FROM type_limits");
    assert.ok((bucket?.tokens ?? -1) >= 0 && (bucket?.tokens ?? 2) < 1, `tokens ${bucket?.tokens}`);
  });

  it("both limits: the smaller room wins; the claim asks for no more than its limit", async () => {
    await db.ledger.setTypeLimit("both", { maxRunning: 4, ratePerSecond: 100 });
    await addJobs("both", 10);
    const session = await db.openLockSession("w1");
    assert.equal((await session.claimLimited(["both"], 3)).jobs.length, 3, "the claim's own limit");
    assert.equal((await session.claimLimited(["both"], 10)).jobs.length, 1, "max_running");
  });

  it("a paused limited type gives nothing; resumed, it does", async () => {
    await db.ledger.setTypeLimit("p", { maxRunning: 5 });
    await addJobs("p", 3);
    await db.ledger.pauseType("p");
    const session = await db.openLockSession("w1");
    assert.deepEqual((await session.claimLimited(["p"], 10)).jobs, []);
    assert.deepEqual(await session.claim(["p"], 10), []);
    await db.ledger.resumeType("p");
    assert.equal((await session.claimLimited(["p"], 10)).jobs.length, 3);
  });

  it("the ordinary claim never takes a limited type; removing the limit returns the type to it", async () => {
    await db.ledger.setTypeLimit("lim", { maxRunning: 100 });
    await addJobs("lim", 2);
    await addJobs("free", 2);
    const session = await db.openLockSession("w1");
    const mixed = await session.claim(["free", "lim"], 10);
    assert.deepEqual(
      mixed.map((j) => j.type),
      ["free", "free"],
    );
    assert.deepEqual(await session.claim(["lim"], 10), [], "the one-type claim too");
    assert.deepEqual(await session.limitedTypes(["free", "lim", "other"]), ["lim"]);
    const removed = await db.ledger.removeTypeLimit("lim");
    assert.equal(removed?.maxRunning, 100);
    assert.equal(await db.ledger.removeTypeLimit("lim"), null, "idempotent");
    assert.deepEqual(await session.limitedTypes(["free", "lim"]), []);
    assert.equal((await session.claim(["lim"], 10)).length, 2);
  });

  it("run-alone jobs of a limited type are reported and claimed regardless of its limits", async () => {
    await db.ledger.setTypeLimit("lim", { maxRunning: 1 });
    await addJobs("lim", 2);
    const session = await db.openLockSession("w1");
    assert.equal((await session.claimLimited(["lim"], 10)).jobs.length, 1);
    await db.sql("UPDATE jobs SET run_alone = true WHERE status = 'pending'");
    assert.equal((await session.claimLimited(["lim"], 10)).aloneDue, true);
    assert.equal((await session.claimReporting(["lim"], 10)).aloneDue, true);
    assert.ok(await session.claimAlone(["lim"]), "the run-alone claim takes it, beyond max_running");
    assert.equal(await held("lim"), 2);
  });
});

describe("the limited claim's plan", () => {
  interface PlanNode {
    "Node Type": string;
    "Relation Name"?: string;
    "Index Name"?: string;
    "Index Cond"?: string;
    Plans?: PlanNode[];
  }
  const nodes = (plan: PlanNode): PlanNode[] => [plan, ...(plan.Plans ?? []).flatMap(nodes)];

  it("reads only its own types' pending jobs through the claim index, and no table sequentially", async () => {
    await db.ledger.setTypeLimit("lim", { maxRunning: 50, ratePerSecond: 100 });
    await addJobs("lim", 20);
    await addJobs("other", 3000);
    const client = new pg.Client({ connectionString: DATABASE_URL });
    await client.connect();
    try {
      await client.query(lockSessionSettings);
      const { rows } = await client.query(
        `EXPLAIN (ANALYZE, FORMAT JSON) ${claimLimitedJobs(db.schema).text}`,
        [["lim"], 10, lockClassFor(db.schema), "w", "{}"],
      );
      const plan = nodes((rows[0]["QUERY PLAN"] as { Plan: PlanNode }[])[0]?.Plan as PlanNode);
      assert.deepEqual(
        plan.filter((n) => n["Node Type"] === "Seq Scan").map((n) => n["Relation Name"]),
        [],
        "no sequential scan",
      );
      const claimIndex = plan.filter((n) => n["Index Name"] === "jobs_claim_idx");
      assert.ok(claimIndex.length >= 2, "candidates and the due probe walk the claim index");
      for (const scan of claimIndex)
        assert.match(
          scan["Index Cond"] ?? "",
          /hashtext\(type\)\)? = hashtext\(/,
          "each walk of the claim index is led by the type's hash",
        );
    } finally {
      await client.end();
    }
    assert.equal(await held("lim"), 10);
  });
});

describe("setting limits", () => {
  it("stores, replaces and lists limits; a new bucket starts full", async () => {
    const set = await db.ledger.setTypeLimit("t", { maxRunning: 3, ratePerSecond: 2.5 });
    assert.deepEqual(
      { ...set, updatedAt: null },
      { type: "t", maxRunning: 3, ratePerSecond: 2.5, burst: null, updatedAt: null },
    );
    const [row] = await db.sql<{ tokens: number }>("SELECT tokens FROM type_limits");
    assert.equal(row?.tokens, 3, "ceil(2.5)");
    await db.ledger.setTypeLimit("t", { ratePerSecond: 1, burst: 2 });
    assert.deepEqual(
      (await db.ledger.typeLimits()).map((l) => [l.type, l.maxRunning, l.ratePerSecond, l.burst]),
      [["t", null, 1, 2]],
    );
    const [replaced] = await db.sql<{ tokens: number }>("SELECT tokens FROM type_limits");
    assert.equal(replaced?.tokens, 2, "the tokens kept, at most the new burst");
    const [state] = (await db.ledger.listTypes(30)).filter((s) => s.type === "t");
    assert.deepEqual(state?.limit, { maxRunning: null, ratePerSecond: 1, burst: 2 });
  });

  it("refuses bad limits naming each field, and writes nothing", async () => {
    const cases: [Parameters<typeof db.ledger.setTypeLimit>[1], string[]][] = [
      [{}, ["maxRunning"]],
      [{ maxRunning: 0 }, ["maxRunning"]],
      [{ maxRunning: 1.5, ratePerSecond: -1 }, ["maxRunning", "ratePerSecond"]],
      [{ ratePerSecond: Number.POSITIVE_INFINITY }, ["ratePerSecond"]],
      [{ maxRunning: 2, burst: 3 }, ["burst"]],
      [{ ratePerSecond: 1, burst: 0 }, ["burst"]],
    ];
    for (const [limit, fields] of cases)
      await assert.rejects(db.ledger.setTypeLimit("t", limit), (error: unknown) => {
        assert.ok(error instanceof JobValidationError);
        assert.deepEqual(
          error.problems.map((p) => p.field),
          fields,
          JSON.stringify(limit),
        );
        return true;
      });
    await assert.rejects(db.ledger.setTypeLimit("x".repeat(201), { maxRunning: 1 }), JobValidationError);
    assert.deepEqual(await db.sql("SELECT type FROM type_limits"), []);
  });
});
