/**
 * `taskqueue cancel` (issue 14, item 3), run as the CLI process: it cancels a job that a worker of
 * this process runs (the CLI is another process: the worker hears of it through NOTIFY), the
 * handler's signal aborts with a `JobCancelledError`, and a finished job exits 1 naming its status.
 */
import assert from "node:assert/strict";
import { after, before, describe, it } from "node:test";
import { JobCancelledError } from "../../src/errors.js";
import { createTestDb, type TestDb } from "../helpers/db.js";
import { waitForEvent } from "../helpers/events.js";
import { failingCli, runCli } from "../helpers/process.js";
import { startWorker } from "../helpers/worker.js";

let db: TestDb;
before(async () => {
  db = await createTestDb();
});
after(async () => {
  await db.drop();
});

describe("taskqueue cancel", () => {
  it("cancels a running job in another process; a second cancel exits 1; --help lists it", async () => {
    let started: () => void = () => undefined;
    const running = new Promise<void>((resolve) => {
      started = resolve;
    });
    let reason: unknown;
    const worker = await startWorker(db, {
      builtins: false,
      config: { heartbeatIntervalSeconds: 60, staleThresholdSeconds: 120 },
      handlers: {
        cli_cancel: async (_job, signal) => {
          started();
          await new Promise<void>((resolve) => signal.addEventListener("abort", () => resolve()));
          reason = signal.reason;
          return "late";
        },
      },
    });
    try {
      const job = await db.ledger.addJob({ type: "cli_cancel" });
      await running;
      const discarded = waitForEvent(worker, "job:discarded", (e: { id: number }) => e.id === job.id, 10_000);
      const stdout = await runCli(db, ["cancel", String(job.id)]);
      assert.match(stdout, new RegExp(`^job ${job.id}: cancelled \\(cli_cancel, attempt 0\\)$`, "m"));
      await discarded;
      assert.ok(reason instanceof JobCancelledError);
      const stored = await db.ledger.getJob(job.id);
      assert.equal(stored?.status, "cancelled");
      assert.equal(stored?.result, null);
      const again = await failingCli(db, ["cancel", String(job.id)]);
      assert.equal(again.code, 1);
      assert.match(again.stderr, /status is cancelled/);
    } finally {
      await worker.stop();
    }
    const help = await runCli(db, ["--help"]);
    assert.match(help, /^ {2}cancel .*<job_id\.\.\.>/m);
  });
});
