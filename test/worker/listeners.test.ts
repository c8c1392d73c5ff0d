/**
 * Every worker event goes through one safe emit (src/worker/events.ts): a listener that throws is
 * logged and counted in `listenerErrors`, and changes neither a job's fate, nor the session, nor
 * the other events of its batch.
 */
import assert from "node:assert/strict";
import { after, before, describe, it } from "node:test";
import { HandlerMissingError, JobAbortedError, WorkerStateError } from "../../src/errors.js";
import { createLogger } from "../../src/log.js";
import { HandlerRegistry } from "../../src/worker/registry.js";
import { Worker } from "../../src/worker/worker.js";
import { createTestDb, type TestDb } from "../helpers/db.js";
import { waitForEvent, waitForEvents } from "../helpers/events.js";
import { startWorker } from "../helpers/worker.js";

let db: TestDb;
before(async () => {
  db = await createTestDb();
});
after(async () => {
  await db.drop();
});

/** A handler that counts its runs per job id, failing each job's first attempt if `failFirst`. */
function countingHandler(failFirst: boolean) {
  const runs = new Map<number, number>();
  return {
    runs,
    handler: async (job: { id: number; attempt: number }) => {
      runs.set(job.id, (runs.get(job.id) ?? 0) + 1);
      if (failFirst && job.attempt === 0) throw new Error("first attempt fails");
      return null;
    },
  };
}

describe("a listener that throws", () => {
  for (const lockSessions of [1, 2])
    it(`on job:claimed: every handler runs once, every job ends done, the session is kept (${lockSessions} lock session${lockSessions > 1 ? "s" : ""})`, async () => {
      const counting = countingHandler(false);
      const worker = await startWorker(db, {
        handlers: { counted: counting.handler },
        config: { lockSessions },
      });
      const lost: unknown[] = [];
      worker.on("session:lost", (e) => lost.push(e));
      worker.on("job:claimed", () => {
        throw new Error("a job:claimed listener's own bug");
      });
      const seen: number[] = [];
      worker.on("job:claimed", ({ jobs }) => seen.push(...jobs.map((j) => j.id)));
      try {
        const completed = waitForEvents(worker, "job:completed", 3, () => true, 15_000);
        const jobs = await db.ledger.addJobs([{ type: "counted" }, { type: "counted" }, { type: "counted" }]);
        await completed;
        for (const job of jobs) {
          const row = await db.ledger.getJob(job.id);
          assert.deepEqual(
            [row?.status, row?.attempt],
            ["done", 0],
            `job ${job.id} done at its first attempt`,
          );
          assert.equal(counting.runs.get(job.id), 1, `job ${job.id}'s handler ran once`);
        }
        assert.deepEqual(lost, [], "the lock session was not lost");
        assert.ok(worker.listenerErrors >= 1, "the throw was counted");
        assert.deepEqual(
          [...seen].sort((a, b) => a - b),
          jobs.map((j) => j.id),
          "the listener after the throwing one saw every claim",
        );
      } finally {
        await worker.stop();
      }
    });

  it("on job:completed: every job of the batch ends done and is reported to the other listeners", async () => {
    const counting = countingHandler(false);
    const worker = await startWorker(db, { handlers: { counted: counting.handler } });
    worker.on("job:completed", () => {
      throw new Error("a job:completed listener's own bug");
    });
    try {
      const completed = waitForEvents(worker, "job:completed", 4, () => true, 15_000);
      const jobs = await db.ledger.addJobs(Array.from({ length: 4 }, () => ({ type: "counted" })));
      await completed;
      for (const job of jobs) {
        assert.equal((await db.ledger.getJob(job.id))?.status, "done");
        assert.equal(counting.runs.get(job.id), 1);
      }
      assert.equal(worker.listenerErrors, 4, "each throw counted");
      assert.deepEqual(await db.ledger.heldJobLocks(), [], "every lock released");
    } finally {
      await worker.stop();
    }
  });

  for (const listeners of [1, 2])
    it(`an async listener whose promise rejects (${listeners} listener${listeners > 1 ? "s" : ""}): the rejection is counted, not left unhandled`, async () => {
      const counting = countingHandler(false);
      const worker = await startWorker(db, { handlers: { counted: counting.handler } });
      const unhandled: unknown[] = [];
      const onUnhandled = (reason: unknown) => unhandled.push(reason);
      process.on("unhandledRejection", onUnhandled);
      const rejected = new Promise<void>((resolve) => {
        worker.on("job:completed", async () => {
          await Promise.resolve();
          setImmediate(resolve);
          throw new Error("an async job:completed listener's own bug");
        });
      });
      if (listeners > 1) worker.on("job:completed", () => undefined);
      try {
        const job = await db.ledger.addJob({ type: "counted" });
        await rejected;
        // A rejection left unhandled is reported once the microtasks of this turn have run.
        await new Promise((resolve) => setImmediate(resolve));
        assert.deepEqual(unhandled, [], "no unhandled rejection");
        assert.equal(worker.listenerErrors, 1, "the rejection counted");
        assert.equal((await db.ledger.getJob(job.id))?.status, "done");
      } finally {
        process.off("unhandledRejection", onUnhandled);
        await worker.stop();
      }
    });

  it("on job:failed: the job retries as it would and ends done; the throw is counted", async () => {
    const counting = countingHandler(true);
    const worker = await startWorker(db, {
      handlers: { counted: counting.handler },
      config: { backoffBaseSeconds: 0, backoffMaxSeconds: 0 },
    });
    const lost: unknown[] = [];
    worker.on("session:lost", (e) => lost.push(e));
    worker.on("job:failed", () => {
      throw new Error("a job:failed listener's own bug");
    });
    try {
      const job = await db.ledger.addJob({ type: "counted" });
      await waitForEvent<[{ id: number }]>(worker, "job:completed", (e) => e.id === job.id, 15_000);
      const row = await db.ledger.getJob(job.id);
      assert.deepEqual([row?.status, row?.attempt], ["done", 1]);
      assert.equal(counting.runs.get(job.id), 2, "one failed run, one retry");
      assert.equal(worker.listenerErrors, 1);
      assert.deepEqual(lost, []);
    } finally {
      await worker.stop();
    }
  });
});

describe("typed errors and abort reasons", () => {
  it("a handler aborted at the grace deadline sees a JobAbortedError with reason shutdown", async () => {
    let reason: unknown;
    let handlerStarted: () => void = () => undefined;
    const started = new Promise<void>((resolve) => {
      handlerStarted = resolve;
    });
    const worker = await startWorker(db, {
      handlers: {
        waits: (_job, signal) =>
          new Promise((resolve) => {
            handlerStarted();
            signal.addEventListener("abort", () => {
              reason = signal.reason;
              resolve(null);
            });
          }),
      },
    });
    const job = await db.ledger.addJob({ type: "waits" });
    await started;
    const report = await worker.stop(0);
    assert.deepEqual(report.abandonedJobIds, [job.id]);
    assert.ok(reason instanceof JobAbortedError, `got ${String(reason)}`);
    assert.deepEqual([reason.reason, reason.jobId, reason.code], ["shutdown", job.id, "job_aborted"]);
  });

  it("start() twice is a WorkerStateError; an unknown type is a HandlerMissingError", async () => {
    const worker = await startWorker(db);
    try {
      await assert.rejects(worker.start(), WorkerStateError);
    } finally {
      await worker.stop();
    }
    assert.throws(
      () =>
        new Worker({
          config: { ...db.config, databaseUrl: db.config.databaseUrl as string },
          registry: new HandlerRegistry(),
          ledger: db.ledger,
          logger: createLogger("silent"),
          types: ["nobody-handles-this"],
        }),
      (error: unknown) => error instanceof HandlerMissingError && error.types[0] === "nobody-handles-this",
    );
  });
});
