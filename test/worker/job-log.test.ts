/**
 * The job log (README, "Metrics and logs"): a real worker process writes one structured JSON line
 * per job event (claimed at debug; completed at info; retried, dead and reaped at warn) with the
 * job's id, type, attempt, the worker's id and the run's duration; the API writes one line per
 * request at debug (none of Fastify's own at info) and one per cancel; LOG_FORMAT=pretty writes
 * human-readable lines.
 */
import assert from "node:assert/strict";
import { after, before, describe, it } from "node:test";
import { createTestDb, type TestDb } from "../helpers/db.js";
import { type CliProcess, cliEnv, startCli } from "../helpers/process.js";

const DEBUG = 20;
const INFO = 30;
const WARN = 40;

describe("job log", { timeout: 120_000 }, () => {
  let db: TestDb;
  const processes: CliProcess[] = [];
  const start = (args: string[], env: Record<string, string>) => {
    const p = startCli(args, cliEnv(db, env));
    processes.push(p);
    return p;
  };

  before(async () => {
    db = await createTestDb();
  });
  after(async () => {
    for (const p of processes) if (p.child.exitCode === null) p.child.kill("SIGKILL");
    await Promise.all(processes.map((p) => p.exited));
    await db.drop();
  });

  /** The line of `event` for job `id`. */
  const eventOf = (p: CliProcess, id: number, event: string, timeoutMs = 20_000) =>
    p.waitForLog((l) => l.jobId === id && l.event === event, timeoutMs);

  it("writes one line per job event with id, type, attempt, worker id and duration", async () => {
    const worker = start(["worker", "--no-migrate", "--types", "echo,always_fail"], {
      LOG_LEVEL: "debug",
      LOG_FORMAT: "json",
    });
    const started = await worker.waitForLog((l) => l.msg === "worker started");
    const workerId = started.workerId;
    const echo = await db.ledger.addJob({ type: "echo", payload: { hello: "log" } });
    const failing = await db.ledger.addJob({ type: "always_fail", maxRetries: 1 });

    const claimed = await eventOf(worker, echo.id, "claimed");
    assert.equal(claimed.level, DEBUG);
    assert.deepEqual([claimed.type, claimed.attempt, claimed.workerId], ["echo", 0, workerId]);

    const completed = await eventOf(worker, echo.id, "completed");
    assert.equal(completed.level, INFO);
    assert.equal(completed.msg, "job completed");
    assert.deepEqual([completed.type, completed.attempt, completed.workerId], ["echo", 0, workerId]);
    assert.equal(typeof completed.durationMs, "number");
    assert.ok((completed.durationMs as number) >= 0);

    const retried = await eventOf(worker, failing.id, "retried");
    assert.equal(retried.level, WARN);
    assert.deepEqual([retried.type, retried.attempt, retried.workerId], ["always_fail", 0, workerId]);
    assert.equal(typeof retried.error, "string");
    assert.equal(typeof retried.durationMs, "number");
    const dead = await eventOf(worker, failing.id, "dead");
    assert.equal(dead.level, WARN);
    assert.equal(dead.msg, "job failed: dead-lettered");
    assert.deepEqual([dead.type, dead.attempt], ["always_fail", 1]);

    // One line per event: each event of each job appears once.
    const lines = (id: number, event: string) =>
      worker.logs.filter((l) => l.jobId === id && l.event === event);
    assert.equal(lines(echo.id, "completed").length, 1);
    assert.equal(lines(failing.id, "claimed").length, 2);
    assert.equal(lines(failing.id, "dead").length, 1);
  });

  it("logs a job reclaimed from a lost worker at warn, naming the lost worker", async () => {
    const lost = start(["worker", "--no-migrate", "--types", "slow"], { LOG_LEVEL: "debug" });
    const lostId = (await lost.waitForLog((l) => l.msg === "worker started")).workerId;
    const job = await db.ledger.addJob({ type: "slow", payload: { sleep_seconds: 60 }, maxRetries: 0 });
    await eventOf(lost, job.id, "claimed");
    lost.child.kill("SIGKILL");
    await lost.exited;
    const reaper = start(["worker", "--no-migrate", "--types", "echo"], {
      STALE_THRESHOLD_SECONDS: "1",
      REAPER_INTERVAL_SECONDS: "0.2",
    });
    const reaped = await eventOf(reaper, job.id, "reaped", 30_000);
    assert.equal(reaped.level, WARN);
    assert.deepEqual(
      [reaped.type, reaped.attempt, reaped.workerId, reaped.status],
      ["slow", 1, lostId, "dead"],
    );
  });

  it("API: one line per request at debug, none at info; a cancel at info", async () => {
    const api = start(["api", "--no-migrate", "--port", "0"], { LOG_LEVEL: "debug", LOG_FORMAT: "json" });
    const url = String((await api.waitForLog((l) => l.msg === "API listening")).url);
    const health = await fetch(`${url}/health`, { signal: AbortSignal.timeout(10_000) });
    assert.equal(health.status, 200);
    const line = await api.waitForLog((l) => l.msg === "request" && l.url === "/health");
    assert.equal(line.level, DEBUG);
    assert.deepEqual([line.method, line.statusCode], ["GET", 200]);
    assert.equal(typeof line.durationMs, "number");
    const job = await db.ledger.addJob({ type: "nobody_handles_this" });
    const cancel = await fetch(`${url}/jobs/${job.id}`, {
      method: "DELETE",
      signal: AbortSignal.timeout(10_000),
    });
    assert.equal(cancel.status, 200);
    const cancelled = await eventOf(api, job.id, "cancelled");
    assert.equal(cancelled.level, INFO);
    assert.equal(cancelled.type, "nobody_handles_this");
    await api.waitForLog((l) => l.msg === "request" && l.method === "DELETE");
    // Fastify's own request lines (two per request, at info) are gone.
    assert.equal(
      api.logs.filter((l) => l.msg === "incoming request" || l.msg === "request completed").length,
      0,
    );
    assert.equal(api.logs.filter((l) => l.msg === "request" && (l.level as number) >= INFO).length, 0);
  });

  it("LOG_FORMAT=pretty writes human-readable lines, not JSON", async () => {
    const api = start(["api", "--no-migrate", "--port", "0"], { LOG_FORMAT: "pretty" });
    const line = await api.waitForLog((l) => typeof l.msg === "string" && l.msg.includes("API listening"));
    // startCli keeps a line that is not JSON as {msg: text}.
    assert.deepEqual(Object.keys(line), ["msg"]);
    assert.match(String(line.msg), /INFO/);
  });
});
