/**
 * Cancelling running jobs and per-job timeouts (issue 14, items 3 and 4), on real PostgreSQL:
 * - a running job cancelled through another ledger (its own pool) is aborted through NOTIFY, its
 *   handler sees a `JobCancelledError`, it ends `cancelled`, and its late result is refused;
 * - without the NOTIFY the heartbeat finds the cancelled job and aborts it the same way;
 * - a handler that ignores the abort gives up its slot after the grace, counted once;
 * - a claimed job not started yet leaves the buffer;
 * - a timed-out attempt fails with an error saying so and is retried; a handler that ignores the
 *   timeout cannot hold its slot past deadline + grace;
 * - a sandboxed handler gets the typed abort in its child process.
 */
import assert from "node:assert/strict";
import { after, before, describe, it } from "node:test";
import { createPool } from "../../src/db/pool.js";
import { JobCancelledError, JobTimeoutError } from "../../src/errors.js";
import { Ledger } from "../../src/queue/ledger.js";
import { fixture, scratch, startSandboxWorker, until } from "../fixtures/sandbox-worker.js";
import { createTestDb, DATABASE_URL, type TestDb } from "../helpers/db.js";
import { waitForEvent } from "../helpers/events.js";
import { startWorker } from "../helpers/worker.js";

let db: TestDb;
/** A second ledger on a pool of its own: what another process (an API host) cancels through. */
let other: Ledger;
let otherPool: ReturnType<typeof createPool>;
before(async () => {
  db = await createTestDb({ backoffBaseSeconds: 0 });
  otherPool = createPool({ connectionString: DATABASE_URL, max: 2 });
  other = new Ledger(otherPool, db.schema);
});
after(async () => {
  await otherPool.end();
  await db.drop();
});

/** A promise with its resolve function outside. */
function deferred<T>(): { promise: Promise<T>; resolve: (value: T) => void } {
  let resolve: (value: T) => void = () => undefined;
  const promise = new Promise<T>((r) => {
    resolve = r;
  });
  return { promise, resolve };
}

/** The database's job_totals count of `event` for `type`. */
async function total(type: string, event: string): Promise<number> {
  const figures = await db.ledger.typeFigures();
  return figures.totals.filter((t) => t.type === type && t.event === event).reduce((n, t) => n + t.count, 0);
}

/** No heartbeat in the test's time: an abort can only come from the NOTIFY. */
const NO_HEARTBEAT = { heartbeatIntervalSeconds: 60, staleThresholdSeconds: 120 };

describe("cancelling a running job", () => {
  it("another ledger cancels it: NOTIFY aborts the handler with JobCancelledError, it ends cancelled, its late result is refused", async () => {
    const started = deferred<void>();
    const seen = deferred<unknown>();
    const worker = await startWorker(db, {
      builtins: false,
      config: NO_HEARTBEAT,
      handlers: {
        cancel_me: async (_job, signal) => {
          started.resolve();
          await new Promise<void>((resolve) => signal.addEventListener("abort", () => resolve()));
          seen.resolve(signal.reason);
          return { late: true };
        },
      },
    });
    try {
      const job = await db.ledger.addJob({ type: "cancel_me" });
      await started.promise;
      await until(async () => (await db.ledger.getJob(job.id))?.status === "running", "the running mark");
      const discarded = waitForEvent(worker, "job:discarded", (e: { id: number }) => e.id === job.id, 10_000);
      const cancelled = await other.cancelJob(job.id);
      assert.equal(cancelled.status, "cancelled");
      const reason = await seen.promise;
      assert.ok(reason instanceof JobCancelledError, "the signal's reason is a JobCancelledError");
      assert.equal(reason.reason, "cancelled");
      assert.equal(reason.jobId, job.id);
      const [event] = await discarded;
      assert.equal(
        (event as unknown as { write: string }).write,
        "complete",
        "the late result was not written",
      );
      const stored = await db.ledger.getJob(job.id);
      assert.equal(stored?.status, "cancelled");
      assert.equal(stored?.result, null, "the late result is refused");
      assert.equal(await total("cancel_me", "cancelled"), 1, "counted once");
      assert.equal(await total("cancel_me", "fenced"), 0, "not a fenced write");
      await until(async () => (await db.ledger.heldJobLocks()).length === 0, "the job's lock released");
      await assert.rejects(other.cancelJob(job.id), { name: "JobStateConflictError" }, "finished: 409");
      await assert.rejects(db.ledger.cancelJob(987654321), { name: "JobNotFoundError" });
    } finally {
      await worker.stop();
    }
  });

  it("without the NOTIFY, the heartbeat finds the job cancelled and aborts it the same way", async () => {
    const started = deferred<void>();
    const seen = deferred<unknown>();
    const worker = await startWorker(db, {
      builtins: false,
      handlers: {
        cancel_quiet: async (_job, signal) => {
          started.resolve();
          await new Promise<void>((resolve) => signal.addEventListener("abort", () => resolve()));
          seen.resolve(signal.reason);
          return "late";
        },
      },
    });
    try {
      const job = await db.ledger.addJob({ type: "cancel_quiet" });
      await started.promise;
      // What the cancel statement does, without its NOTIFY (as if the LISTEN connection missed it).
      await db.sql(`UPDATE jobs SET status = 'cancelled', completed_at = now() WHERE id = $1`, [job.id]);
      const reason = await seen.promise;
      assert.ok(reason instanceof JobCancelledError, `the heartbeat's abort is typed too: ${String(reason)}`);
      await waitForEvent(worker, "job:discarded", (e: { id: number }) => e.id === job.id, 10_000);
      assert.equal((await db.ledger.getJob(job.id))?.result, null);
    } finally {
      await worker.stop();
    }
  });

  it("a handler that ignores the signal still ends cancelled; its slot is freed after the grace and counted", async () => {
    const started = deferred<void>();
    const release = deferred<void>();
    let otherRan = false;
    const worker = await startWorker(db, {
      builtins: false,
      config: { ...NO_HEARTBEAT, workerCount: 1, jobAbortGraceSeconds: 0.3 },
      handlers: {
        cancel_deaf: async () => {
          started.resolve();
          await release.promise;
          return { late: true };
        },
        cancel_next: () => {
          otherRan = true;
          return "ok";
        },
      },
    });
    try {
      const job = await db.ledger.addJob({ type: "cancel_deaf" });
      await started.promise;
      const overdue = waitForEvent(worker, "job:overdue", (e: { id: number }) => e.id === job.id, 10_000);
      const aborted = waitForEvent(worker, "job:aborted", (e: { id: number }) => e.id === job.id, 10_000);
      await other.cancelJob(job.id);
      assert.deepEqual((await aborted)[0], { id: job.id, reason: "cancelled" });
      assert.equal(((await overdue)[0] as unknown as { reason: string }).reason, "cancelled");
      assert.equal(worker.runningCount, 0, "the slot is free while the handler still hangs");
      // The one slot runs the next job.
      const next = await db.ledger.addJob({ type: "cancel_next" });
      await waitForEvent(worker, "job:completed", (e: { id: number }) => e.id === next.id, 10_000);
      assert.ok(otherRan);
      // The deaf handler settles at last: refused, the job stays cancelled.
      release.resolve();
      await new Promise((resolve) => setImmediate(resolve));
      const stored = await db.ledger.getJob(job.id);
      assert.equal(stored?.status, "cancelled");
      assert.equal(stored?.result, null);
      await until(async () => (await total("cancel_deaf", "overdue")) === 1, "the overdue count");
      assert.equal(await total("cancel_deaf", "cancelled"), 1);
    } finally {
      release.resolve();
      await worker.stop();
    }
  });

  it("a claimed job that has not started leaves the buffer and never runs", async () => {
    const started = deferred<void>();
    const release = deferred<void>();
    let waitingRan = false;
    const worker = await startWorker(db, {
      builtins: false,
      config: { ...NO_HEARTBEAT, workerCount: 1, prefetch: 2 },
      handlers: {
        buffer_first: async () => {
          started.resolve();
          await release.promise;
          return "first";
        },
        buffer_second: () => {
          waitingRan = true;
          return "second";
        },
      },
    });
    try {
      const first = await db.ledger.addJob({ type: "buffer_first", priority: 10 });
      await started.promise;
      const second = await db.ledger.addJob({ type: "buffer_second" });
      await until(
        async () => (await db.ledger.getJob(second.id))?.status === "claimed",
        "the second claimed",
      );
      const discarded = waitForEvent(
        worker,
        "job:discarded",
        (e: { id: number }) => e.id === second.id,
        10_000,
      );
      await other.cancelJob(second.id);
      assert.equal(((await discarded)[0] as unknown as { write: string }).write, "release");
      release.resolve();
      await waitForEvent(worker, "job:completed", (e: { id: number }) => e.id === first.id, 10_000);
      assert.equal(waitingRan, false);
      assert.equal((await db.ledger.getJob(second.id))?.status, "cancelled");
      await until(async () => (await db.ledger.heldJobLocks()).length === 0, "every lock released");
    } finally {
      release.resolve();
      await worker.stop();
    }
  });

  it("a sandboxed handler gets the JobCancelledError in its child process", async () => {
    const dir = scratch();
    const worker = await startSandboxWorker(db, { sandbox_cancel: fixture("waitsForAbort") }, NO_HEARTBEAT);
    try {
      const job = await db.ledger.addJob({ type: "sandbox_cancel", payload: { file: dir.file("c") } });
      await until(() => dir.read("c").some((l) => l.what === "start"), "the child's handler to start");
      const discarded = waitForEvent(worker, "job:discarded", (e: { id: number }) => e.id === job.id, 10_000);
      await other.cancelJob(job.id);
      await discarded;
      const line = dir.read("c").find((l) => l.what === "aborted");
      assert.equal(line?.reason, "cancelled");
      assert.equal(line?.name, "JobCancelledError");
      assert.equal((await db.ledger.getJob(job.id))?.status, "cancelled");
    } finally {
      await worker.stop();
      dir.remove();
    }
  });
});

describe("per-job timeouts", () => {
  it("at the deadline the signal aborts with JobTimeoutError; the attempt fails saying so and is retried", async () => {
    const reasons: unknown[] = [];
    const worker = await startWorker(db, {
      builtins: false,
      handlers: {
        slow_once: async (job, signal) => {
          if (job.attempt > 0) return "second try";
          return new Promise((_resolve, reject) =>
            signal.addEventListener("abort", () => {
              reasons.push(signal.reason);
              reject(signal.reason);
            }),
          );
        },
      },
    });
    try {
      const job = await db.ledger.addJob({ type: "slow_once", timeoutSeconds: 1, maxRetries: 2 });
      assert.equal(job.timeoutSeconds, 1);
      const t0 = Date.now();
      await waitForEvent(worker, "job:completed", (e: { id: number }) => e.id === job.id, 10_000);
      assert.ok(Date.now() - t0 >= 900, "not before the deadline");
      const [reason] = reasons;
      assert.ok(reason instanceof JobTimeoutError);
      assert.equal(reason.reason, "timeout");
      assert.equal(reason.timeoutSeconds, 1);
      const stored = await db.ledger.getJob(job.id);
      assert.equal(stored?.status, "done");
      assert.equal(stored?.attempt, 1);
      assert.match(stored?.errors[0]?.error ?? "", /timed out: its attempt ran longer than 1 s/);
    } finally {
      await worker.stop();
    }
  });

  it("JOB_TIMEOUT_SECONDS bounds jobs without one; a handler ignoring it gives up its slot at deadline + grace", async () => {
    const release = deferred<void>();
    const worker = await startWorker(db, {
      builtins: false,
      config: { workerCount: 1, jobTimeoutSeconds: 1, jobAbortGraceSeconds: 0.3 },
      handlers: {
        never_yields: async () => {
          await release.promise;
          return "too late";
        },
        after_it: () => "ok",
      },
    });
    try {
      const job = await db.ledger.addJob({ type: "never_yields", maxRetries: 0 });
      assert.equal(job.timeoutSeconds, null);
      const t0 = Date.now();
      const overdue = waitForEvent(worker, "job:overdue", (e: { id: number }) => e.id === job.id, 10_000);
      const failed = waitForEvent(worker, "job:failed", (e: { id: number }) => e.id === job.id, 10_000);
      const [event] = await overdue;
      assert.deepEqual(event, { id: job.id, reason: "timeout", graceMs: 300 });
      assert.ok(Date.now() - t0 >= 1200, "not before deadline + grace");
      const [failure] = (await failed) as unknown as [{ status: string; error: string }];
      assert.equal(failure.status, "dead", "no retry left");
      assert.match(failure.error, /timed out/);
      assert.equal(worker.runningCount, 0);
      const next = await db.ledger.addJob({ type: "after_it" });
      await waitForEvent(worker, "job:completed", (e: { id: number }) => e.id === next.id, 10_000);
      release.resolve();
      await new Promise((resolve) => setImmediate(resolve));
      const stored = await db.ledger.getJob(job.id);
      assert.equal(stored?.status, "dead");
      assert.equal(stored?.result, null, "the late result is refused");
      await until(async () => (await total("never_yields", "overdue")) === 1, "the overdue count");
    } finally {
      release.resolve();
      await worker.stop();
    }
  });

  it("a sandboxed handler gets the JobTimeoutError in its child process", async () => {
    const dir = scratch();
    const worker = await startSandboxWorker(db, { sandbox_timeout: fixture("waitsForAbort") });
    try {
      const job = await db.ledger.addJob({
        type: "sandbox_timeout",
        payload: { file: dir.file("t") },
        timeoutSeconds: 1,
        maxRetries: 0,
      });
      const [failure] = (await waitForEvent(
        worker,
        "job:failed",
        (e: { id: number }) => e.id === job.id,
        10_000,
      )) as unknown as [{ error: string }];
      assert.match(failure.error, /timed out/);
      const line = dir.read("t").find((l) => l.what === "aborted");
      assert.equal(line?.reason, "timeout");
      assert.equal(line?.name, "JobTimeoutError");
    } finally {
      await worker.stop();
      dir.remove();
    }
  });

  it("timeoutSeconds is validated: a whole number from 1 to 604800", async () => {
    for (const bad of [0, 1.5, 604_801, -1])
      await assert.rejects(db.ledger.addJob({ type: "t", timeoutSeconds: bad }), (error: Error) =>
        /timeoutSeconds: must be an integer from 1 to 604800/.test(error.message),
      );
    const [a, b] = await db.ledger.addJobs([{ type: "t_batch", timeoutSeconds: 30 }, { type: "t_batch" }]);
    assert.deepEqual([a?.timeoutSeconds, b?.timeoutSeconds], [30, null]);
    assert.equal((await db.ledger.getJob(a?.id ?? 0))?.timeoutSeconds, 30);
    // The timeout is part of the body an idempotency key stands for.
    const keyed = await db.ledger.addJob({ type: "t_key", idempotencyKey: "t-key-1", timeoutSeconds: 5 });
    const again = await db.ledger.addJob({ type: "t_key", idempotencyKey: "t-key-1", timeoutSeconds: 5 });
    assert.equal(again.id, keyed.id);
    await assert.rejects(db.ledger.addJob({ type: "t_key", idempotencyKey: "t-key-1", timeoutSeconds: 6 }), {
      name: "IdempotencyConflictError",
    });
    await assert.rejects(db.ledger.addJob({ type: "t_key", idempotencyKey: "t-key-1" }), {
      name: "IdempotencyConflictError",
    });
  });
});
