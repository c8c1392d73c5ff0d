/**
 * Sandboxed handlers (src/worker/sandbox): a handler that exits, throws from a timer or leaves a
 * rejection unhandled in its child process fails only its own job, which dead-letters after its
 * retries with the crash named; the jobs sharing the worker finish on their first attempt. Aborts
 * reach the child with their reason; a child that does not answer is SIGKILLed; results cross as
 * JSON; no child outlives the worker.
 */
import assert from "node:assert/strict";
import { after, before, describe, it } from "node:test";
import type { FailedStatus } from "../../src/queue/lock-session.js";
import type { HandlerJob } from "../../src/worker/registry.js";
import type { Worker } from "../../src/worker/worker.js";
import { fixture, isAlive, scratch, startSandboxWorker, until } from "../fixtures/sandbox-worker.js";
import { createTestDb, type TestDb } from "../helpers/db.js";
import { waitForEvent, waitForEvents } from "../helpers/events.js";

let db: TestDb;
const files = scratch();
before(async () => {
  db = await createTestDb({ backoffBaseSeconds: 0 });
});
after(async () => {
  await db.drop();
  files.remove();
});

/** An in-process handler that sleeps `ms` honouring its signal. */
const inProcessSleep = async (job: HandlerJob, signal: AbortSignal) => {
  const ms = (job.payload as { ms?: number }).ms ?? 300;
  await new Promise<void>((resolve, reject) => {
    const timer = setTimeout(resolve, ms);
    signal.addEventListener("abort", () => {
      clearTimeout(timer);
      reject(signal.reason);
    });
  });
  return { pid: process.pid };
};

/** Every pid a fixture noted in `name` is gone. */
function assertChildrenGone(name: string): void {
  const pids = [...new Set(files.read(name).map((line) => line.pid))];
  assert.ok(pids.length > 0, "the fixture noted its processes");
  for (const pid of pids) {
    assert.notEqual(pid, process.pid, "sandboxed handlers run in another process");
    assert.equal(isAlive(pid), false, `child process ${pid} outlived the worker`);
  }
}

describe("a crashing sandboxed handler fails only its own job", () => {
  for (const [poison, crash] of [
    ["exits", /^handler process \(pid \d+\) exited with code 1 while running job \d+$/],
    [
      "throwsFromTimer",
      /^handler process \(pid \d+\) exited with code 1 while running job \d+: uncaught exception: boom from a timer$/,
    ],
    [
      "rejectsUnhandled",
      /^handler process \(pid \d+\) exited with code 1 while running job \d+: unhandled rejection: rejected and never handled$/,
    ],
  ] as const)
    it(`${poison}: the poison job dead-letters after its retries; its 6 neighbours are done on attempt 0`, async () => {
      const log = `${poison}.jsonl`;
      const worker: Worker = await startSandboxWorker(
        db,
        { poison: fixture(poison), sandboxed_ok: fixture("default"), in_process_ok: inProcessSleep },
        { workerCount: 4 },
      );
      try {
        const file = files.file(log);
        const poisonJob = await db.ledger.addJob({ type: "poison", payload: { file }, maxRetries: 2 });
        const innocent = await db.ledger.addJobs([
          ...Array.from({ length: 3 }, () => ({
            type: "sandboxed_ok",
            payload: { file, ms: 400 },
            maxRetries: 2,
          })),
          ...Array.from({ length: 3 }, () => ({
            type: "in_process_ok",
            payload: { ms: 400 },
            maxRetries: 2,
          })),
        ]);
        const ids = new Set(innocent.map((j) => j.id));
        const done = waitForEvents<[{ id: number }]>(
          worker,
          "job:completed",
          6,
          (e) => ids.has(e.id),
          60_000,
        );
        const dead = waitForEvent<[{ id: number; status: FailedStatus }]>(
          worker,
          "job:failed",
          (e) => e.id === poisonJob.id && e.status === "dead",
          60_000,
        );
        worker.wake();
        await Promise.all([done, dead]);
        for (const job of innocent) {
          const row = await db.ledger.getJob(job.id);
          assert.equal(row?.status, "done", `innocent job ${job.id}`);
          assert.equal(row?.attempt, 0, `innocent job ${job.id} lost no retry`);
        }
        const letter = await db.ledger.getDeadLetter(poisonJob.id);
        assert.equal(letter?.attempts, 3, "the poison job ran 1 + maxRetries times");
        for (const attempt of letter?.errors ?? []) assert.match(attempt.error, crash);
        assert.match(letter?.error ?? "", new RegExp(`job ${poisonJob.id}\\b`));
      } finally {
        await worker.stop();
      }
      assertChildrenGone(log);
    });
});

describe("aborts and results cross to the child process", () => {
  it("a claim lost mid-job aborts the child's signal with a JobAbortedError of reason claim_lost", async () => {
    const log = "abort.jsonl";
    const worker = await startSandboxWorker(db, { waits: fixture("waitsForAbort") }, { workerCount: 1 });
    try {
      const job = await db.ledger.addJob({ type: "waits", payload: { file: files.file(log) } });
      worker.wake();
      await until(() => files.read(log).some((l) => l.what === "start"), "the handler to start");
      const fenced = waitForEvent<[{ id: number; reason: string }]>(
        worker,
        "job:fenced",
        (e) => e.id === job.id,
      );
      await db.sql("UPDATE jobs SET worker_id = 'someone-else' WHERE id = $1", [job.id]);
      assert.equal((await fenced)[0].reason, "claim_lost");
      const aborted = files.read(log).find((l) => l.what === "aborted");
      assert.equal(aborted?.reason, "claim_lost");
      assert.equal(aborted?.name, "JobAbortedError");
      assert.match(aborted?.message ?? "", /no longer owns the job's claim/);
    } finally {
      await worker.stop();
    }
    assertChildrenGone(log);
  });

  it("a child that does not answer the abort is SIGKILLed after the kill grace, and replaced", async () => {
    const log = "kill.jsonl";
    const worker = await startSandboxWorker(
      db,
      { spin: fixture("busy"), sandboxed_ok: fixture("default") },
      { workerCount: 1, handlerKillGraceSeconds: 0.3 },
    );
    try {
      const file = files.file(log);
      const job = await db.ledger.addJob({ type: "spin", payload: { file, ms: 20_000 } });
      worker.wake();
      await until(() => files.read(log).some((l) => l.job === job.id), "the busy loop to start");
      const spinner = files.read(log)[0]?.pid ?? 0;
      const fenced = waitForEvent<[{ id: number }]>(worker, "job:fenced", (e) => e.id === job.id, 10_000);
      const abortedAt = Date.now();
      await db.sql("UPDATE jobs SET worker_id = 'someone-else' WHERE id = $1", [job.id]);
      await fenced;
      assert.ok(Date.now() - abortedAt < 8000, "the blocked child was killed long before its loop ended");
      assert.equal(isAlive(spinner), false, "the blocked child is gone");
      // The next sandboxed job gets a new child.
      const next = await db.ledger.addJob({ type: "sandboxed_ok", payload: { file, ms: 1 } });
      await waitForEvent<[{ id: number }]>(worker, "job:completed", (e) => e.id === next.id, 20_000);
      const row = await db.ledger.getJob(next.id);
      assert.notEqual((row?.result as { pid?: number } | undefined)?.pid, spinner);
    } finally {
      await worker.stop();
    }
    assertChildrenGone(log);
  });

  it("a result JSON cannot store fails the attempt naming why; a JSON result is stored as is", async () => {
    const worker = await startSandboxWorker(
      db,
      { bigint: fixture("returnsBigInt"), noop: fixture("noop") },
      { workerCount: 2 },
    );
    try {
      const bad = await db.ledger.addJob({ type: "bigint", maxRetries: 0 });
      const good = await db.ledger.addJob({ type: "noop", maxRetries: 0 });
      const failed = waitForEvent<[{ id: number; error: string }]>(
        worker,
        "job:failed",
        (e) => e.id === bad.id,
      );
      const completed = waitForEvent<[{ id: number }]>(worker, "job:completed", (e) => e.id === good.id);
      worker.wake();
      assert.match(
        (await failed)[0].error,
        /^handler result cannot be stored: result is not JSON-serialisable/,
      );
      await completed;
      const pid = ((await db.ledger.getJob(good.id))?.result as { pid?: number } | undefined)?.pid;
      assert.equal(typeof pid, "number");
      assert.notEqual(pid, process.pid);
    } finally {
      await worker.stop();
    }
  });

  it("stop during a sandboxed job ends its child (grace 0: aborted, then killed): no process is left", async () => {
    const log = "stop.jsonl";
    const worker = await startSandboxWorker(
      db,
      { spin: fixture("busy"), sleepy: fixture("default") },
      { workerCount: 3, handlerKillGraceSeconds: 0.5 },
    );
    const file = files.file(log);
    const jobs = await db.ledger.addJobs([
      { type: "spin", payload: { file, ms: 30_000 } },
      { type: "sleepy", payload: { file, ms: 30_000 } },
      { type: "sleepy", payload: { file, ms: 1 } },
    ]);
    const quickDone = waitForEvent<[{ id: number }]>(worker, "job:completed", (e) => e.id === jobs[2]?.id);
    worker.wake();
    await quickDone;
    await until(() => new Set(files.read(log).map((l) => l.job)).size === 3, "the three jobs to start");
    const stoppedAt = Date.now();
    const report = await worker.stop(0);
    assert.ok(Date.now() - stoppedAt < 10_000, "stop is bounded by the kill grace");
    const [spin, sleepy] = jobs.map((job) => job.id);
    assert.deepEqual(report.abandonedJobIds.sort(), [spin, sleepy].sort());
    assertChildrenGone(log);
    for (const job of jobs.slice(0, 2)) assert.equal((await db.ledger.getJob(job.id))?.status, "pending");
  });
});
