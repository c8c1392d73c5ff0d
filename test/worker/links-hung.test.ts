/**
 * A worker process whose handler blocks its event loop longer than the stale threshold (issue 10
 * item 1): its lock session stops heartbeating, the server ends it (`idle_session_timeout`), its
 * advisory locks go with it, and another worker gets the jobs it held within stale threshold +
 * reaper interval (+ margin), instead of waiting for the loop to end.
 */
import assert from "node:assert/strict";
import { after, before, it } from "node:test";
import { createTestDb, type TestDb } from "../helpers/db.js";
import { cliEnv, startCli } from "../helpers/process.js";
import { startWorker } from "../helpers/worker.js";

const STALE_SECONDS = 2;
const REAPER_SECONDS = 0.5;
const MARGIN_MS = 3000;
/** Well past the bound, so that the blocked process itself could not have run them in time. */
const BUSY_MS = 12_000;

let db: TestDb;
before(async () => {
  db = await createTestDb({
    heartbeatIntervalSeconds: 0.5,
    heartbeatTimeoutSeconds: 1,
    staleThresholdSeconds: STALE_SECONDS,
    reaperIntervalSeconds: REAPER_SECONDS,
    pollIntervalSeconds: 0.5,
  });
});
after(async () => {
  await db.drop();
});

it("a handler that blocks its process's event loop: another worker gets that process's other jobs within stale threshold + reaper interval", async () => {
  // One statement, so the busy job (priority 10) comes first in the child's first claim, which
  // takes all four: the three echo jobs wait in its buffer, locked, while the busy loop runs.
  const [busy, ...others] = await db.ledger.addJobs([
    { type: "busy", payload: { ms: BUSY_MS }, priority: 10 },
    { type: "echo", payload: 1 },
    { type: "echo", payload: 2 },
    { type: "echo", payload: 3 },
  ]);
  assert.ok(busy);
  const child = startCli(
    ["worker", "--handlers", "dist/test/fixtures/busy-handler.js"],
    cliEnv(db, {
      WORKER_COUNT: "4",
      HEARTBEAT_INTERVAL_SECONDS: "0.5",
      HEARTBEAT_TIMEOUT_SECONDS: "1",
      STALE_THRESHOLD_SECONDS: String(STALE_SECONDS),
      REAPER_INTERVAL_SECONDS: String(REAPER_SECONDS),
    }),
  );
  try {
    await child.waitForLog((l) => l.msg === "busy loop started", 20_000);
    const blocked = performance.now();
    const held = await db.sql<{ n: number }>(
      "SELECT count(*)::int AS n FROM jobs WHERE id = ANY($1) AND status = 'claimed'",
      [others.map((j) => j.id)],
    );
    assert.equal(held[0]?.n, 3, "the blocked process holds the three other jobs");

    const other = await startWorker(db, { runReaper: true, types: ["echo"] });
    try {
      const pending = new Set(others.map((j) => j.id));
      const boundMs = (STALE_SECONDS + REAPER_SECONDS) * 1000;
      await new Promise<void>((resolve, reject) => {
        const timer = setTimeout(
          () =>
            reject(
              new Error(
                `jobs ${[...pending].join(", ")} not done elsewhere within ${boundMs + MARGIN_MS} ms`,
              ),
            ),
          boundMs + MARGIN_MS,
        );
        other.on("job:completed", ({ id }: { id: number }) => {
          pending.delete(id);
          if (pending.size > 0) return;
          clearTimeout(timer);
          resolve();
        });
      });
      const doneMs = performance.now() - blocked;
      assert.ok(doneMs <= boundMs + MARGIN_MS, `done elsewhere after ${doneMs.toFixed(0)} ms`);
    } finally {
      await other.stop(0);
    }
  } finally {
    child.child.kill("SIGKILL");
    await child.exited;
  }
});
