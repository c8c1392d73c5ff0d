/**
 * A worker and type limits (issue 13, item 3; DESIGN.md §4 "Type limits"), with a poll interval of
 * 30 s so that nothing here can be the poll's doing: a claim held back by a type's rate claims
 * again when the next token is due; one held back by `max_running` claims again once the worker's
 * own jobs end; a worker learns a limit's removal from its NOTIFY, not only from its heartbeat; and
 * a worker of a limited and an unlimited type claims both.
 */
import assert from "node:assert/strict";
import { after, before, beforeEach, it } from "node:test";
import type { Worker } from "../../src/worker/worker.js";
import { createTestDb, type TestDb } from "../helpers/db.js";
import { waitForEvents } from "../helpers/events.js";
import { startWorker } from "../helpers/worker.js";

let db: TestDb;
before(async () => {
  db = await createTestDb();
});
after(async () => {
  await db.drop();
});
beforeEach(async () => {
  await db.sql("DELETE FROM jobs");
  await db.sql("DELETE FROM type_limits");
});

/** No poll within the test; heartbeats (which re-read the limits) every 10 s. */
const SLOW_POLL = { pollIntervalSeconds: 30, heartbeatIntervalSeconds: 10, staleThresholdSeconds: 60 };

/** Starts a worker of `types` whose handlers each take `ms`, and records when each job started. */
async function worker(
  types: string[],
  ms: number,
): Promise<{ worker: Worker; started: Map<string, number[]> }> {
  const started = new Map<string, number[]>();
  const handler = async (job: { type: string }) => {
    started.set(job.type, [...(started.get(job.type) ?? []), performance.now()]);
    await new Promise((resolve) => setTimeout(resolve, ms));
    return null;
  };
  const handlers = Object.fromEntries(types.map((t) => [t, handler]));
  return { worker: await startWorker(db, { builtins: false, handlers, types, config: SLOW_POLL }), started };
}

it("a claim held back by the rate claims again when the next token is due, not at the poll", async () => {
  await db.ledger.setTypeLimit("rated", { ratePerSecond: 10, burst: 1 });
  const { worker: w, started } = await worker(["rated"], 1);
  try {
    const done = waitForEvents(w, "job:completed", 8, () => true, 10_000);
    const t0 = performance.now();
    await db.ledger.addJobs(Array.from({ length: 8 }, () => ({ type: "rated" })));
    await done;
    const elapsed = performance.now() - t0;
    // One token per 100 ms: 8 jobs take about 0.7 s; far less than one poll interval.
    assert.ok(elapsed < 3000, `8 jobs at 10/s took ${elapsed.toFixed(0)} ms`);
    const times = started.get("rated") ?? [];
    const gaps = times.slice(1).map((t, i) => t - (times[i] as number));
    assert.ok(
      gaps.every((gap) => gap > 60),
      `starts at least ~100 ms apart (burst 1): ${gaps.map((g) => g.toFixed(0))}`,
    );
  } finally {
    await w.stop();
  }
});

it("a claim held back by max_running claims again once the worker's own job ends", async () => {
  await db.ledger.setTypeLimit("capped", { maxRunning: 1 });
  const { worker: w } = await worker(["capped"], 20);
  try {
    const done = waitForEvents(w, "job:completed", 5, () => true, 10_000);
    await db.ledger.addJobs(Array.from({ length: 5 }, () => ({ type: "capped" })));
    await done;
    const [row] = await db.sql<{ max_overlap: number }>(
      `SELECT max((SELECT count(*) FROM jobs AS o WHERE o.started_at < j.completed_at AND o.completed_at > j.started_at))::int
         AS max_overlap FROM jobs AS j`,
    );
    assert.equal(row?.max_overlap, 1, "one at a time");
  } finally {
    await w.stop();
  }
});

it("a worker of a limited and an unlimited type claims both; removing the limit is learnt from its NOTIFY", async () => {
  await db.ledger.setTypeLimit("lim", { maxRunning: 1 });
  const { worker: w, started } = await worker(["free", "lim"], 5);
  try {
    const first = waitForEvents(w, "job:completed", 6, () => true, 10_000);
    await db.ledger.addJobs([
      ...Array.from({ length: 3 }, () => ({ type: "free" })),
      ...Array.from({ length: 3 }, () => ({ type: "lim" })),
    ]);
    await first;
    assert.deepEqual([started.get("free")?.length, started.get("lim")?.length], [3, 3]);
    // Removed: the limited claim finds no row for `lim` and would claim nothing until the next
    // heartbeat (10 s); the NOTIFY makes the worker claim it the ordinary way at once.
    await db.ledger.removeTypeLimit("lim");
    const second = waitForEvents(w, "job:completed", 4, () => true, 5000);
    await db.ledger.addJobs(Array.from({ length: 4 }, () => ({ type: "lim" })));
    await second;
    const [row] = await db.sql<{ n: number }>("SELECT count(*)::int AS n FROM jobs WHERE status = 'done'");
    assert.equal(row?.n, 10);
  } finally {
    await w.stop();
  }
});

it("a rate whose next token is beyond a timer's range does not make the worker spin (shared case: tiny rate)", async () => {
  // 1e-300/s: the first job takes the bucket's one token; the next is due in ~1e300 s, far past the
  // ~24.8 days a Node timer can wait (a longer delay fires after 1 ms: a claim every millisecond).
  await db.ledger.setTypeLimit("glacial", { ratePerSecond: 1e-300 });
  const warnings: string[] = [];
  const onWarning = (warning: Error) => warnings.push(warning.name);
  process.on("warning", onWarning);
  const { worker: w } = await worker(["glacial"], 1);
  try {
    const first = waitForEvents(w, "job:completed", 1, () => true, 10_000);
    await db.ledger.addJobs([{ type: "glacial" }, { type: "glacial" }]);
    await first;
    let claims = 0;
    const count = () => claims++;
    w.on("claim:returned", count);
    await new Promise((resolve) => setTimeout(resolve, 500));
    w.off("claim:returned", count);
    assert.ok(claims <= 2, `${claims} claims in 500 ms while the only job waits for a token`);
    assert.deepEqual(warnings, [], "no TimeoutOverflowWarning");
    const [row] = await db.sql<{ n: number }>("SELECT count(*)::int AS n FROM jobs WHERE status = 'pending'");
    assert.equal(row?.n, 1, "the second job waits");
  } finally {
    process.off("warning", onWarning);
    await w.stop();
  }
});
