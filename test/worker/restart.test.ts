/**
 * A database restart never kills a worker (DESIGN.md §6): it logs, reconnects with capped backoff
 * and carries on. Runs its own embedded PostgreSQL so the shared test server is left alone.
 */
import assert from "node:assert/strict";
import { rm } from "node:fs/promises";
import { after, before, it } from "node:test";
import { startEmbeddedPostgres } from "../../src/db/embedded.js";
import { TaskQueue } from "../../src/index.js";
import { createLogger } from "../../src/log.js";
import { waitForEvent } from "../helpers/events.js";

const dataDir = `.taskqueue/restart-test-${process.pid}`;
let server: Awaited<ReturnType<typeof startEmbeddedPostgres>>;
let queue: TaskQueue;

before(async () => {
  server = await startEmbeddedPostgres({ dataDir });
  queue = new TaskQueue({
    databaseUrl: server.connectionString,
    schema: "restart_test",
    pollIntervalSeconds: 0.2,
    heartbeatIntervalSeconds: 0.2,
    logger: createLogger("silent"),
    builtinHandlers: true,
  });
  await queue.migrate();
});
after(async () => {
  await queue.close();
  await server.stop();
  await rm(server.dataDir, { recursive: true, force: true });
  // The embedded server keeps its password and owner files beside the data directory.
  await rm(`${server.dataDir}.password`, { force: true });
  await rm(`${server.dataDir}.owner`, { force: true });
});

it("a worker survives a PostgreSQL restart and runs jobs enqueued afterwards", async () => {
  const worker = await queue.startWorker();
  const first = await queue.addJob({ type: "echo", payload: "before" });
  await waitForEvent<[{ id: number }]>(worker, "job:completed", (e) => e.id === first.id);

  const lost = waitForEvent(worker, "session:lost");
  await server.stop();
  await lost;
  const restored = waitForEvent(worker, "session:restored", () => true, 30_000);
  server = await startEmbeddedPostgres({ dataDir, port: server.port });
  await restored;

  const done = waitForEvent<[{ id: number }]>(worker, "job:completed", (e) => e.id === second?.id, 15_000);
  const second = await queue.addJob({ type: "echo", payload: "after" });
  await done;
  assert.equal((await queue.getJob(second.id))?.result, "after");
  assert.equal((await queue.getJob(first.id))?.status, "done", "data survived the restart");
  await worker.stop();
});
