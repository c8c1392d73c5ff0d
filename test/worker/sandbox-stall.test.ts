/**
 * Sandboxed handlers, the worker's side: a sandboxed handler that blocks its process's event loop
 * for seconds does not stall the worker (another job of the same worker completes at once, and the
 * heartbeat keeps touching the blocked job); a handler that keeps crashing its process has its
 * restarts delayed by a doubling backoff, and the crash is logged a few times with a count.
 */
import assert from "node:assert/strict";
import { after, before, describe, it } from "node:test";
import { pino } from "pino";
import type { FailedStatus } from "../../src/queue/lock-session.js";
import { SandboxPool } from "../../src/worker/sandbox/pool.js";
import {
  capturingLogger,
  fixture,
  isAlive,
  scratch,
  startSandboxWorker,
  until,
} from "../fixtures/sandbox-worker.js";
import { createTestDb, type TestDb } from "../helpers/db.js";
import { waitForEvent } from "../helpers/events.js";

let db: TestDb;
const files = scratch();
before(async () => {
  db = await createTestDb({ backoffBaseSeconds: 0 });
});
after(async () => {
  await db.drop();
  files.remove();
});

describe("sandboxed handlers and the worker's event loop", () => {
  it("a 5 s busy loop in a sandboxed handler: a job beside it completes at once, heartbeats go on", async () => {
    const log = "busy.jsonl";
    const worker = await startSandboxWorker(
      db,
      { spin: fixture("busy"), quick: async () => ({ quick: true }) },
      { workerCount: 2, heartbeatIntervalSeconds: 0.2 },
    );
    try {
      const spin = await db.ledger.addJob({ type: "spin", payload: { file: files.file(log), ms: 5000 } });
      const spun = waitForEvent<[{ id: number }]>(worker, "job:completed", (e) => e.id === spin.id, 30_000);
      worker.wake();
      await until(() => files.read(log).length > 0, "the busy loop to start");
      const loopStartedAt = files.read(log)[0]?.at ?? 0;

      const quick = await db.ledger.addJob({ type: "quick" });
      const enqueuedAt = Date.now();
      await waitForEvent<[{ id: number }]>(worker, "job:completed", (e) => e.id === quick.id, 10_000);
      const quickMs = Date.now() - enqueuedAt;
      assert.ok(quickMs < 2000, `the job beside the busy loop took ${quickMs} ms`);

      // While the loop spins (until loopStartedAt + 5 s), the held job's heartbeat stays fresh.
      const ages: number[] = [];
      while (Date.now() < loopStartedAt + 4000) {
        const [row] = await db.sql<{ age_ms: number; status: string }>(
          "SELECT (extract(epoch FROM now() - heartbeat_at) * 1000)::float8 AS age_ms, status FROM jobs WHERE id = $1",
          [spin.id],
        );
        assert.equal(row?.status, "running");
        ages.push(row?.age_ms ?? Number.POSITIVE_INFINITY);
        await new Promise((resolve) => setTimeout(resolve, 100));
      }
      assert.ok(ages.length >= 5, `sampled the heartbeat ${ages.length} times during the loop`);
      assert.ok(
        Math.max(...ages) < 1500,
        `heartbeat ages during the busy loop: ${ages.map(Math.round).join(", ")} ms`,
      );

      await spun;
      const result = (await db.ledger.getJob(spin.id))?.result as { spunMs?: number } | undefined;
      assert.ok((result?.spunMs ?? 0) >= 5000, "the busy loop ran to its end and its result was stored");
    } finally {
      await worker.stop();
    }
    for (const pid of new Set(files.read(log).map((l) => l.pid))) assert.equal(isAlive(pid), false);
  });

  it("a handler that keeps crashing: restarts back off 100, 200, 400, 800 ms; the crash is logged at counts 1, 2, 4", async () => {
    const log = "crashes.jsonl";
    const { logger, lines } = capturingLogger();
    const worker = await startSandboxWorker(db, { poison: fixture("exits") }, { workerCount: 1 }, logger);
    try {
      const poison = await db.ledger.addJob({
        type: "poison",
        payload: { file: files.file(log) },
        maxRetries: 4,
      });
      const dead = waitForEvent<[{ id: number; status: FailedStatus }]>(
        worker,
        "job:failed",
        (e) => e.id === poison.id && e.status === "dead",
        60_000,
      );
      worker.wake();
      await dead;
      const crashes = files.read(log).sort((a, b) => a.attempt - b.attempt);
      assert.deepEqual(
        crashes.map((c) => c.attempt),
        [0, 1, 2, 3, 4],
      );
      const restartsMs = crashes.slice(1).map((c, i) => c.startedAt - (crashes[i]?.at ?? 0));
      restartsMs.forEach((ms, i) => {
        const backoffMs = [100, 200, 400, 800][i] ?? 0;
        // The crash is noted just before the exit, so the delay measured here is a little longer.
        assert.ok(
          ms >= backoffMs - 5,
          `restart ${i + 1} came ${Math.round(ms)} ms after the crash (backoff ${backoffMs})`,
        );
      });
      const logged = lines.filter((l) => l.msg.includes("sandboxed handler crashed"));
      assert.deepEqual(
        logged.map((l) => l.crashes),
        [1, 2, 4],
        "5 identical crashes are logged 3 times, with their count",
      );
      assert.match(logged[0]?.msg ?? "", /handler process exited with code 1$/);
    } finally {
      await worker.stop();
    }
  });

  it("the pool forks at most its size of children, one job each at a time, and reuses them", async () => {
    const log = "pool.jsonl";
    const pool = new SandboxPool({ size: 2, killGraceMs: 1000, logger: pino({ level: "silent" }) });
    const signal = new AbortController().signal;
    let most = 0;
    const sample = setInterval(() => {
      most = Math.max(most, pool.childCount);
    }, 5);
    try {
      const outcomes = await Promise.all(
        Array.from({ length: 6 }, (_, i) =>
          pool.run(
            fixture("default"),
            {
              id: i + 1,
              type: "sleepy",
              payload: { file: files.file(log), ms: 100 },
              attempt: 0,
              maxRetries: 0,
            },
            signal,
          ),
        ),
      );
      for (const outcome of outcomes) assert.ok("json" in outcome, JSON.stringify(outcome));
    } finally {
      clearInterval(sample);
      await pool.close();
    }
    const noted = files.read(log);
    assert.equal(noted.length, 6);
    assert.equal(new Set(noted.map((l) => l.pid)).size, 2, "6 jobs ran in 2 reused children");
    assert.ok(most <= 2, `at most 2 children at once (saw ${most})`);
    assert.equal(pool.childCount, 0);
    for (const pid of new Set(noted.map((l) => l.pid))) assert.equal(isAlive(pid), false);
  });
});
