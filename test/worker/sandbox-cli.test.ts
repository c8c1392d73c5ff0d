/**
 * `taskqueue worker --handlers` with sandboxed types: a handler that crashes its process
 * dead-letters its job after its retries while the worker process lives on, runs the other jobs,
 * logs the crash with a count, and leaves no handler process behind after SIGTERM.
 */
import assert from "node:assert/strict";
import { after, before, describe, it } from "node:test";
import { isAlive, scratch } from "../fixtures/sandbox-worker.js";
import { createTestDb, type TestDb } from "../helpers/db.js";
import { cliEnv, startCli, until } from "../helpers/process.js";

let db: TestDb;
const files = scratch();
before(async () => {
  db = await createTestDb();
});
after(async () => {
  await db.drop();
  files.remove();
});

describe("taskqueue worker with sandboxed handlers", () => {
  it("a crashing handler dead-letters its job; the worker lives on, runs the rest, and stops clean", async () => {
    const worker = startCli(
      ["worker", "--concurrency", "2", "--handlers", "dist/test/fixtures/sandbox-cli-handlers.js"],
      cliEnv(db, { BACKOFF_BASE_SECONDS: "0" }),
    );
    try {
      await worker.waitForLog((l) => l.msg === "worker started", 30_000);
      const file = files.file("cli.jsonl");
      const crashy = await db.ledger.addJob({ type: "crashy", payload: { file }, maxRetries: 2 });
      const ok = await db.ledger.addJobs(
        Array.from({ length: 4 }, () => ({ type: "ok", payload: { file, ms: 200 }, maxRetries: 0 })),
      );
      const status = async (id: number) => (await db.ledger.getJob(id))?.status;
      await until(
        async () => (await status(crashy.id)) === "dead",
        60_000,
        "the crashing job to dead-letter",
      );
      for (const job of ok)
        await until(async () => (await status(job.id)) === "done", 30_000, `ok job ${job.id} to be done`);
      const letter = await db.ledger.getDeadLetter(crashy.id);
      assert.match(
        letter?.error ?? "",
        /^handler process \(pid \d+\) exited with code 1 while running job \d+: uncaught exception: boom from a timer$/,
      );
      assert.equal(worker.child.exitCode, null, "the worker process lives on");
      const crashLogs = worker.logs.filter((l) => String(l.msg).startsWith("sandboxed handler crashed"));
      assert.deepEqual(
        crashLogs.map((l) => l.crashes),
        [1, 2],
        "3 crashes logged at counts 1 and 2",
      );
      worker.child.kill("SIGTERM");
      assert.equal(await worker.exited, 0);
      const pids = new Set(files.read("cli.jsonl").map((l) => l.pid));
      assert.ok(pids.size >= 2);
      for (const pid of pids) {
        assert.notEqual(pid, worker.child.pid);
        assert.equal(isAlive(pid), false, `handler process ${pid} outlived the worker`);
      }
    } finally {
      if (worker.child.exitCode === null) worker.child.kill("SIGKILL");
      await worker.exited;
    }
  });
});
