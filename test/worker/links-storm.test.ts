/**
 * shared/cases 02: while the database refuses work (read-only for a few seconds), a worker's claim
 * failures and lock-session reconnects back off exponentially with a cap and jitter, and each
 * distinct error is logged a few times with a count, not once per failure; the job posted during
 * the window runs soon after the database takes writes again. Runs its own embedded PostgreSQL
 * (made read-only with ALTER SYSTEM), so the shared test server is left alone; the worker reaches
 * it through a TCP proxy that counts new connections.
 */
import assert from "node:assert/strict";
import { rm } from "node:fs/promises";
import { after, before, it } from "node:test";
import { setTimeout as sleep } from "node:timers/promises";
import pg from "pg";
import { pino } from "pino";
import { resolveConfig } from "../../src/config.js";
import { startEmbeddedPostgres } from "../../src/db/embedded.js";
import { Ledger } from "../../src/queue/ledger.js";
import { migrate } from "../../src/queue/migrate.js";
import { registerBuiltinHandlers } from "../../src/worker/handlers/index.js";
import { HandlerRegistry } from "../../src/worker/registry.js";
import { Worker } from "../../src/worker/worker.js";
import { testOptions } from "../helpers/db.js";
import { waitForEvent } from "../helpers/events.js";
import { TcpProxy } from "../helpers/tcp-proxy.js";

const dataDir = `.taskqueue/links-storm-test-${process.pid}`;
const WINDOW_MS = 5000;
let server: Awaited<ReturnType<typeof startEmbeddedPostgres>>;
let proxy: TcpProxy;
/** Writes even while the server defaults to read-only (a session setting wins over the file). */
let writable: pg.Pool;

before(async () => {
  server = await startEmbeddedPostgres({ dataDir });
  proxy = new TcpProxy("127.0.0.1", server.port);
  await proxy.start();
  writable = new pg.Pool({
    connectionString: server.connectionString,
    options: "-c default_transaction_read_only=off",
    max: 2,
  });
  writable.on("error", () => undefined);
});
after(async () => {
  await writable.end();
  await proxy.stop();
  await server.stop();
  await rm(server.dataDir, { recursive: true, force: true });
  await rm(`${server.dataDir}.password`, { force: true });
  await rm(`${server.dataDir}.owner`, { force: true });
});

async function setReadOnly(on: boolean): Promise<void> {
  const admin = new pg.Client({ connectionString: server.connectionString });
  await admin.connect();
  try {
    await admin.query(
      on
        ? "ALTER SYSTEM SET default_transaction_read_only = on"
        : "ALTER SYSTEM RESET default_transaction_read_only",
    );
    await admin.query("SELECT pg_reload_conf()");
  } finally {
    await admin.end();
  }
}

it("a read-only database: claim failures and reconnects back off, a few log lines per error, and the job posted meanwhile runs soon after", async (t) => {
  const schema = "links_storm";
  const config = resolveConfig({
    ...testOptions(schema),
    databaseUrl: proxy.url(server.connectionString),
    heartbeatIntervalSeconds: 0.5,
    heartbeatTimeoutSeconds: 1,
    connectTimeoutSeconds: 2,
    staleThresholdSeconds: 2,
    pollIntervalSeconds: 0.2,
  });
  await migrate(writable, config);
  const ledger = new Ledger(writable, schema);
  const lines: Record<string, unknown>[] = [];
  const worker = new Worker({
    config: { ...config, databaseUrl: config.databaseUrl as string },
    registry: registerBuiltinHandlers(new HandlerRegistry()),
    ledger,
    logger: pino({ level: "info" }, { write: (line: string) => void lines.push(JSON.parse(line)) }),
    runReaper: false,
  });
  await worker.start();
  try {
    const first = await ledger.addJob({ type: "echo", payload: "before" });
    await waitForEvent<[{ id: number }]>(worker, "job:completed", (e) => e.id === first.id);

    const connectionsBefore = proxy.accepted;
    const linesBefore = lines.length;
    const lost = waitForEvent(worker, "session:lost", () => true, 10_000);
    await setReadOnly(true);
    const windowStart = performance.now();
    await lost;
    const during = await ledger.addJob({ type: "echo", payload: "during" });
    const done = waitForEvent<[{ id: number }]>(worker, "job:completed", (e) => e.id === during.id, 30_000);
    // The fault lasts the window: this wait is its duration, not a synchronisation.
    await sleep(Math.max(0, WINDOW_MS - (performance.now() - windowStart)));
    const connections = proxy.accepted - connectionsBefore;
    const logged = lines.slice(linesBefore);
    await setReadOnly(false);
    const windowEnd = performance.now();
    await done;
    const afterMs = performance.now() - windowEnd;

    t.diagnostic(
      `${connections} new connections and ${logged.length} log lines in ${WINDOW_MS} ms; the job ran ${afterMs.toFixed(0)} ms after`,
    );
    // Backoff from 100 ms doubling to 5 s: over 5 s, log2(5000 / 100) + a few attempts, each
    // opening the session's two connections. Without backoff: 18 new connections a second.
    assert.ok(connections <= 20, `${connections} new connections in ${WINDOW_MS} ms`);
    const kinds = new Map<string, number>();
    for (const line of logged) kinds.set(String(line.msg), (kinds.get(String(line.msg)) ?? 0) + 1);
    assert.ok(
      logged.length <= 16,
      `${logged.length} log lines in ${WINDOW_MS} ms: ${JSON.stringify(Object.fromEntries(kinds))}`,
    );
    for (const [msg, n] of kinds) assert.ok(n <= 3, `"${msg}" logged ${n} times`);
    // Due at once, it waits at most for the next reconnect: the backoff's cap (5 s), plus slack.
    assert.ok(afterMs <= 8000, `the job posted during the window ran ${afterMs.toFixed(0)} ms after it`);
  } finally {
    await worker.stop(0);
  }
});
