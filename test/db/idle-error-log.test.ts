/**
 * An idle pooled connection that the server ends is logged as one short warning: the error's
 * message and code, not the connection object pg-pool attaches to it (`error.client`, kilobytes of
 * pool, socket and parser state in one line).
 */
import assert from "node:assert/strict";
import { after, before, it } from "node:test";
import { pino } from "pino";
import { TaskQueue } from "../../src/index.js";
import { createTestDb, type TestDb } from "../helpers/db.js";

let db: TestDb;
let queue: TaskQueue;
let lineSeen: (line: string) => void;
const warned = new Promise<string>((resolve) => (lineSeen = resolve));

before(async () => {
  db = await createTestDb();
  const logger = pino(
    { level: "warn" },
    {
      write: (line: string) => {
        if (line.includes("idle pool connection failed")) lineSeen(line);
      },
    },
  );
  queue = new TaskQueue({ ...db.config, logger });
});
after(async () => {
  await queue.close();
  await db.drop();
});

it("a killed idle connection gives a short warning without the connection object", {
  timeout: 30_000,
}, async () => {
  const { rows } = await queue.pool.query<{ pid: number }>("SELECT pg_backend_pid() AS pid");
  const pid = rows[0]?.pid as number;
  // The connection is idle in the pool now; the server ends it.
  await db.pool.query("SELECT pg_terminate_backend($1)", [pid]);
  const line = await warned;
  const logged = JSON.parse(line) as { err: Record<string, unknown> };
  assert.equal(logged.err.code, "57P01", "the server's admin_shutdown code is kept");
  assert.ok(!("client" in logged.err), `no connection object in the line: ${line.slice(0, 300)}`);
  assert.ok(line.length < 2_000, `a short line (${line.length} characters)`);
});
