/**
 * Sandboxed handlers (src/worker/sandbox): a handler that exits, throws from a timer or leaves a
 * rejection unhandled in its child process fails only its own job, which dead-letters after its
 * retries with the crash named; the jobs sharing the worker finish on their first attempt. Aborts
 * reach the child with their reason; a child that does not answer is SIGKILLed; results cross as
 * JSON; no child outlives the worker. `job.progress()` in the child is written by the worker (row
 * and waiters), refused as in the worker's process; `job.complete()` is refused.
 */
import assert from "node:assert/strict";
import { writeFileSync } from "node:fs";
import { after, before, describe, it } from "node:test";
import { JobClaimLostError } from "../../src/errors.js";
import { storableJson } from "../../src/queue/handler-writes.js";
import { LIMITS } from "../../src/queue/job-shape.js";
import type { FailedStatus } from "../../src/queue/lock-session.js";
import type { JsonValue } from "../../src/queue/types.js";
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

describe("job.progress() in a sandboxed handler", () => {
  /** How the worker's own process refuses `value` as progress: name, code and message. */
  function inProcessRefusal(value: unknown): { name: string; code: string; message: string } {
    try {
      storableJson(value, "progress", LIMITS.progressBytes);
    } catch (error) {
      const { name, code, message } = error as Error & { code: string };
      return { name, code, message };
    }
    return assert.fail("the worker's process stored it");
  }

  it("is written on the job's row and pushed to its waiter; each call resolves once written", async () => {
    const log = "progress.jsonl";
    const worker = await startSandboxWorker(db, { progress: fixture("reportsProgress") }, { workerCount: 1 });
    try {
      const gate = files.file("progress-gate");
      const job = await db.ledger.addJob({ type: "progress", payload: { file: files.file(log), gate } });
      const seen: JsonValue[] = [];
      const waiting = db.ledger.waitForJob(job.id, { timeoutMs: 30_000, onProgress: (v) => seen.push(v) });
      await until(async () => {
        const rows = await db.sql<{ watched: boolean }>("SELECT watched FROM jobs WHERE id = $1", [job.id]);
        return rows[0]?.watched === true;
      }, "the wait to watch the job");
      worker.wake();
      for (const done of [1, 2]) {
        await until(
          () => files.read(log).some((l) => l.what === "progressed" && l.done === done),
          `progress ${done} to resolve in the child`,
        );
        assert.deepEqual((await db.ledger.getJob(job.id))?.progress, { done, of: 2 });
        await until(
          () => seen.some((v) => (v as { done?: number }).done === done),
          `the waiter to hear progress ${done}`,
        );
        writeFileSync(`${gate}.${done}`, "");
      }
      const finished = await waiting;
      assert.equal(finished.status, "done");
      assert.deepEqual(finished.progress, { done: 2, of: 2 });
      assert.deepEqual(seen, [
        { done: 1, of: 2 },
        { done: 2, of: 2 },
      ]);
    } finally {
      await worker.stop();
    }
    assertChildrenGone(log);
  });

  it("a value that cannot be stored rejects as in the worker's process; the handler that catches it completes", async () => {
    const worker = await startSandboxWorker(
      db,
      { unstorable: fixture("reportsUnstorable") },
      { workerCount: 1 },
    );
    try {
      const job = await db.ledger.addJob({ type: "unstorable", maxRetries: 0 });
      const completed = waitForEvent<[{ id: number }]>(worker, "job:completed", (e) => e.id === job.id);
      worker.wake();
      await completed;
      const row = await db.ledger.getJob(job.id);
      assert.equal(row?.status, "done");
      assert.equal(row?.progress, null, "nothing was written");
      const { complete, ...refusals } = (row?.result ?? {}) as Record<string, { message: string }>;
      assert.deepEqual(refusals, {
        // Refused in the child: JSON cannot carry them to the worker.
        bigint: inProcessRefusal({ n: 10n }),
        nan: inProcessRefusal({ ratio: Number.NaN }),
        // Refused by the worker (over 8 KiB), answered to the child.
        tooLarge: inProcessRefusal("x".repeat(9000)),
      });
      assert.equal(refusals.bigint?.message.includes("BigInt"), true);
      assert.match(
        complete?.message ?? "",
        /^job\.complete\(\) is not available in a sandboxed handler: it needs the worker's database connection/,
      );
    } finally {
      await worker.stop();
    }
  });

  it("progress after the claim was lost rejects with JobClaimLostError and writes nothing", async () => {
    const log = "progress-lost.jsonl";
    const worker = await startSandboxWorker(db, { lost: fixture("progressAfterAbort") }, { workerCount: 1 });
    try {
      const job = await db.ledger.addJob({ type: "lost", payload: { file: files.file(log) } });
      worker.wake();
      await until(() => files.read(log).some((l) => l.what === "start"), "the handler to start");
      await db.sql("UPDATE jobs SET worker_id = 'someone-else' WHERE id = $1", [job.id]);
      await until(
        () => files.read(log).some((l) => l.what === "progress after abort"),
        "the late progress to settle",
      );
      const line = files.read(log).find((l) => l.what === "progress after abort");
      assert.deepEqual(line?.outcome, {
        name: "JobClaimLostError",
        code: "job_claim_lost",
        message: new JobClaimLostError(job.id, "progress").message,
      });
      assert.equal((await db.ledger.getJob(job.id))?.progress, null);
    } finally {
      await worker.stop();
    }
    assertChildrenGone(log);
  });
});
