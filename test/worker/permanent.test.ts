/**
 * Permanent failures (issue 14, item 5): a handler that throws a `PermanentJobError` (or any error
 * whose `permanent` property is true) skips its remaining retries and goes straight to the
 * dead-letter table, in the worker's process and in a sandboxed child; the built-in handlers'
 * payload errors are permanent; any other error retries as before.
 */
import assert from "node:assert/strict";
import { after, before, describe, it } from "node:test";
import { PayloadError, PermanentJobError } from "../../src/errors.js";
import type { Worker } from "../../src/worker/worker.js";
import { fixture, startSandboxWorker } from "../fixtures/sandbox-worker.js";
import { createTestDb, type TestDb } from "../helpers/db.js";
import { waitForEvent } from "../helpers/events.js";
import { startWorker } from "../helpers/worker.js";

let db: TestDb;
before(async () => {
  db = await createTestDb({ backoffBaseSeconds: 0 });
});
after(async () => {
  await db.drop();
});

/** A permanent error of the handler's own, not taskqueue's class. */
class RecordGone extends Error {
  readonly permanent = true;
}

/** Enqueues `type` with three retries and waits until the worker writes it `dead`. */
async function runUntilDead(worker: Worker, type: string, payload: unknown = {}) {
  const job = await db.ledger.addJob({ type, payload: payload as never, maxRetries: 3 });
  await waitForEvent(
    worker,
    "job:failed",
    (e: { id: number; status: string }) => e.id === job.id && e.status === "dead",
  );
  const stored = await db.ledger.getJob(job.id);
  assert.ok(stored);
  return stored;
}

describe("a permanent failure skips the remaining retries", () => {
  it("PermanentJobError, an error with permanent: true and a PayloadError die on their first attempt", async () => {
    let runs = 0;
    const worker = await startWorker(db, {
      builtins: false,
      handlers: {
        perm_class: () => {
          runs++;
          throw new PermanentJobError("no such customer");
        },
        perm_flag: () => {
          runs++;
          throw new RecordGone("record 7 was deleted");
        },
        perm_payload: () => {
          runs++;
          throw new PayloadError("perm_payload: payload.n must be an integer");
        },
      },
    });
    try {
      for (const [type, error] of [
        ["perm_class", "PermanentJobError: no such customer"],
        ["perm_flag", "record 7 was deleted"],
        ["perm_payload", "PayloadError: perm_payload: payload.n must be an integer"],
      ] as const) {
        runs = 0;
        const job = await runUntilDead(worker, type);
        assert.equal(runs, 1, `${type} ran once`);
        assert.equal(job.status, "dead");
        assert.equal(job.attempt, 1);
        assert.equal(job.error, error);
        assert.equal(job.errors.length, 1);
        assert.equal(job.errors[0]?.permanent, true, "the history marks it");
        const letter = await db.ledger.getDeadLetter(job.id);
        assert.equal(letter?.attempts, 1);
        assert.equal(letter?.error, error);
      }
    } finally {
      await worker.stop();
    }
  });

  it("an ordinary error still retries: maxRetries + 1 runs, no history entry marked permanent", async () => {
    let runs = 0;
    const worker = await startWorker(db, {
      builtins: false,
      handlers: {
        transient: () => {
          runs++;
          throw new Error("try again");
        },
      },
    });
    try {
      const job = await runUntilDead(worker, "transient");
      assert.equal(runs, 4);
      assert.equal(job.attempt, 4);
      assert.ok(job.errors.every((entry) => !("permanent" in entry)));
    } finally {
      await worker.stop();
    }
  });

  it("the built-in handlers' payload errors are permanent: collatz {n: 0} dies on its first attempt", async () => {
    const worker = await startWorker(db, { types: ["collatz", "is_prime"] });
    try {
      const collatz = await runUntilDead(worker, "collatz", { n: 0 });
      assert.equal(collatz.attempt, 1);
      assert.match(collatz.error ?? "", /^PayloadError: collatz: payload\.n must be an integer from 1 to/);
      const prime = await runUntilDead(worker, "is_prime", { n: "seven" });
      assert.equal(prime.attempt, 1);
    } finally {
      await worker.stop();
    }
  });

  it("a sandboxed handler's permanent error crosses the process boundary", async () => {
    const worker = await startSandboxWorker(db, {
      sandboxed_perm: fixture("failsPermanently"),
      sandboxed_transient: fixture("failsOnce"),
    });
    try {
      const dead = await runUntilDead(worker, "sandboxed_perm");
      assert.equal(dead.attempt, 1);
      assert.match(dead.error ?? "", /^PermanentJobError: job \d+ can never succeed$/);
      assert.equal((dead.errors[0] as { permanent?: boolean }).permanent, true);
      const transient = await runUntilDead(worker, "sandboxed_transient");
      assert.equal(transient.attempt, 4, "an ordinary error in a child still retries");
    } finally {
      await worker.stop();
    }
  });
});
