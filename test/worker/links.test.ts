/**
 * Bounded detection of dead links (issue 10 item 1, shared/cases 01): a worker reaches PostgreSQL
 * through a TCP proxy the test controls. Blackholed, dropped or slowed, the worker notices within
 * heartbeat interval + heartbeat deadline (or keeps working, below the deadline), recovers by
 * itself once the link is back, and a blackholed worker's job goes to another worker once the
 * server has ended its idle session. The LISTEN connection alone going silent is noticed too.
 * Only connections are cut: the shared server itself is never reconfigured.
 */
import assert from "node:assert/strict";
import { after, afterEach, before, describe, it } from "node:test";
import { setTimeout as sleep } from "node:timers/promises";
import { pino } from "pino";
import type { ResolvedConfig } from "../../src/config.js";
import { migrate } from "../../src/queue/migrate.js";
import { registerBuiltinHandlers } from "../../src/worker/handlers/index.js";
import { HandlerRegistry, type JobHandler } from "../../src/worker/registry.js";
import { Worker } from "../../src/worker/worker.js";
import { createTestDb, DATABASE_URL, type TestDb } from "../helpers/db.js";
import { waitForEvent } from "../helpers/events.js";
import { TcpProxy } from "../helpers/tcp-proxy.js";

/** Small bounds: detection within 0.5 + 1 s; the server ends an idle session after 2 s. */
const LINK: Partial<ResolvedConfig> = {
  heartbeatIntervalSeconds: 0.5,
  heartbeatTimeoutSeconds: 1,
  connectTimeoutSeconds: 1,
  staleThresholdSeconds: 2,
  reaperIntervalSeconds: 0.5,
  pollIntervalSeconds: 0.5,
};
/** Slack for a loaded two-core machine, on top of every stated bound. */
const MARGIN_MS = 2000;
const DETECTION_MS = ((LINK.heartbeatIntervalSeconds ?? 0) + (LINK.heartbeatTimeoutSeconds ?? 0)) * 1000;

let db: TestDb;
const proxies: TcpProxy[] = [];
const workers: Worker[] = [];

before(async () => {
  db = await createTestDb(LINK);
});
// Whatever a test left (it failed half-way, say) is put back and stopped before the next one, so
// that no worker of one test claims the jobs of another.
afterEach(async () => {
  for (const proxy of proxies) {
    proxy.match = () => true;
    proxy.set({ kind: "forward" });
  }
  await Promise.all(workers.splice(0).map((w) => w.stop(0)));
  await Promise.all(proxies.splice(0).map((p) => p.stop()));
});
after(async () => {
  await db.drop();
});

async function startProxy(): Promise<TcpProxy> {
  const target = new URL(DATABASE_URL);
  const proxy = new TcpProxy(target.hostname, Number(target.port || 5432));
  await proxy.start();
  proxies.push(proxy);
  return proxy;
}

/** A started worker on `databaseUrl` (through a proxy, or not), with built-ins plus `handlers`. */
async function startWorkerAt(
  databaseUrl: string,
  options: {
    handlers?: Record<string, JobHandler>;
    config?: Partial<ResolvedConfig>;
    runReaper?: boolean;
    logLines?: Record<string, unknown>[];
    testDb?: TestDb;
  } = {},
): Promise<Worker> {
  const target = options.testDb ?? db;
  const registry = registerBuiltinHandlers(new HandlerRegistry());
  for (const [type, handler] of Object.entries(options.handlers ?? {})) registry.register(type, handler);
  const lines = options.logLines;
  const logger = lines
    ? pino({ level: "info" }, { write: (line: string) => void lines.push(JSON.parse(line)) })
    : pino({ level: "silent" });
  const worker = new Worker({
    // Pooling declared, not probed: the probe's two connections would shift the proxy's count.
    config: { ...target.config, databasePooling: "session", ...options.config, databaseUrl },
    registry,
    ledger: target.ledger,
    logger,
    runReaper: options.runReaper ?? false,
  });
  workers.push(worker);
  await worker.start();
  return worker;
}

/** Enqueues an echo job and resolves once `worker` completed it. */
async function echoCompletes(worker: Worker, timeoutMs = 15_000): Promise<number> {
  const started = performance.now();
  let id = -1;
  const done = waitForEvent<[{ id: number }]>(worker, "job:completed", (e) => e.id === id, timeoutMs);
  id = (await db.ledger.addJob({ type: "echo", payload: "ping" })).id;
  await done;
  return performance.now() - started;
}

/** Counts `event` on `worker` from now on. */
function count(worker: Worker, event: "session:lost" | "listener:lost"): { n: number } {
  const counter = { n: 0 };
  worker.on(event, () => counter.n++);
  return counter;
}

describe("a worker cut off from PostgreSQL", () => {
  for (const kind of ["blackhole", "drop"] as const) {
    it(`${kind}: notices within heartbeat interval + deadline, then recovers by itself once the link is back`, async () => {
      const proxy = await startProxy();
      const worker = await startWorkerAt(proxy.url(DATABASE_URL));
      await echoCompletes(worker);

      const lost = waitForEvent<[{ error: Error }]>(worker, "session:lost", () => true, 20_000);
      const cut = performance.now();
      proxy.set({ kind });
      const [{ error }] = await lost;
      const noticedMs = performance.now() - cut;
      assert.ok(
        noticedMs <= DETECTION_MS + MARGIN_MS,
        `noticed after ${noticedMs.toFixed(0)} ms; the bound is ${DETECTION_MS} ms (+ margin)`,
      );
      if (kind === "blackhole") assert.match(error.message, /did not answer within/);
      assert.notEqual(worker.health().lockSessions[0]?.state, "open");

      const restored = waitForEvent(worker, "session:restored", () => true, 20_000);
      proxy.set({ kind: "forward" });
      await restored;
      await echoCompletes(worker);
      const health = worker.health();
      assert.equal(health.state, "running");
      assert.deepEqual(
        health.lockSessions.map((s) => s.state),
        ["open"],
      );
      await worker.stop(0);
    });
  }

  it("slow, below the deadline: keeps working and loses nothing", async () => {
    const proxy = await startProxy();
    const worker = await startWorkerAt(proxy.url(DATABASE_URL));
    const lost = count(worker, "session:lost");
    const listenerLost = count(worker, "listener:lost");
    // Each leg 150 ms: a round trip takes 300 ms, under the 1 s deadline.
    proxy.set({ kind: "slow", delayMs: 150 });
    const until = performance.now() + 4 * (LINK.heartbeatIntervalSeconds ?? 0) * 1000;
    let jobs = 0;
    while (performance.now() < until || jobs < 2) {
      await echoCompletes(worker, 20_000);
      jobs++;
    }
    assert.equal(lost.n, 0, "no lock session lost");
    assert.equal(listenerLost.n, 0, "no LISTEN connection lost");
    proxy.set({ kind: "forward" });
    await worker.stop(0);
  });

  it("blackholed: the server ends its idle session, another worker gets its job within stale threshold + reaper interval, and its late completion is fenced", async () => {
    const proxy = await startProxy();
    let finish: (() => void) | undefined;
    const finished = new Promise<void>((resolve) => {
      finish = resolve;
    });
    let startedRun: (() => void) | undefined;
    const running = new Promise<void>((resolve) => {
      startedRun = resolve;
    });
    // Ignores its AbortSignal on purpose: its result comes after the session was lost.
    const cutOff = await startWorkerAt(proxy.url(DATABASE_URL), {
      handlers: {
        hold: async () => {
          startedRun?.();
          await finished;
          return "from the cut-off worker";
        },
      },
    });
    const job = await db.ledger.addJob({ type: "hold" });
    await running;
    // The other worker, on a direct connection, runs the reaper.
    const other = await startWorkerAt(DATABASE_URL, {
      handlers: { hold: () => "from the other worker" },
      runReaper: true,
    });
    const reclaimed = waitForEvent<[{ id: number }]>(other, "job:completed", (e) => e.id === job.id, 30_000);
    const cut = performance.now();
    proxy.set({ kind: "blackhole" });
    await reclaimed;
    const reclaimedMs = performance.now() - cut;
    const boundMs = ((LINK.staleThresholdSeconds ?? 0) + (LINK.reaperIntervalSeconds ?? 0)) * 1000;
    assert.ok(
      reclaimedMs <= boundMs + MARGIN_MS,
      `done elsewhere after ${reclaimedMs.toFixed(0)} ms; the bound is ${boundMs} ms (+ margin)`,
    );

    const fenced = waitForEvent<[{ id: number; write: string }]>(
      cutOff,
      "job:fenced",
      (e) => e.id === job.id,
    );
    finish?.();
    const [{ write }] = await fenced;
    assert.equal(write, "complete");
    const stored = await db.ledger.getJob(job.id);
    assert.equal(stored?.status, "done");
    assert.equal(stored?.result, "from the other worker", "the late result changed nothing");
    proxy.set({ kind: "forward" });
    await Promise.all([cutOff.stop(0), other.stop(0)]);
  });
});

describe("a live, idle worker", () => {
  it("keeps its lock session past the server's idle_session_timeout: heartbeats keep both connections busy", async () => {
    // The poll (10 s) is far longer than the server's idle timeout (2 s): only heartbeats run.
    const worker = await startWorkerAt(DATABASE_URL, { config: { pollIntervalSeconds: 10 } });
    const lost = count(worker, "session:lost");
    const listenerLost = count(worker, "listener:lost");
    // Nothing to wait for: the point is that nothing happens over three idle timeouts.
    await sleep(3 * (LINK.staleThresholdSeconds ?? 0) * 1000);
    assert.equal(lost.n, 0, "the server ended no lock session");
    assert.equal(listenerLost.n, 0, "the server ended no LISTEN connection");
    assert.ok((await echoCompletes(worker)) < 2000);
    await worker.stop(0);
  });
});

describe("the LISTEN connection alone goes silent (shared/cases 01)", () => {
  it("is noticed within heartbeat interval + deadline, re-established, and pickups are back to NOTIFY speed", async () => {
    const proxy = await startProxy();
    // A lane opens its lock connection, its write connection, then its LISTEN connection.
    const first = proxy.accepted + 1;
    proxy.match = (n) => n === first + 2;
    const worker = await startWorkerAt(proxy.url(DATABASE_URL), { config: { pollIntervalSeconds: 10 } });
    const sessionLost = count(worker, "session:lost");
    assert.ok((await echoCompletes(worker)) < 2000, "NOTIFY wakes the worker before the 10 s poll");
    assert.equal(worker.health().listener, "listening");
    assert.equal(worker.health().notifyTrigger, true);

    let listenerWhileLost: string | undefined;
    const lost = waitForEvent(worker, "listener:lost", () => {
      listenerWhileLost = worker.health().listener;
      return true;
    });
    const reconnected = waitForEvent(worker, "listener:reconnected", () => true, 20_000);
    const cut = performance.now();
    proxy.set({ kind: "blackhole" });
    await lost;
    const noticedMs = performance.now() - cut;
    assert.ok(
      noticedMs <= DETECTION_MS + MARGIN_MS,
      `LISTEN loss noticed after ${noticedMs.toFixed(0)} ms; the bound is ${DETECTION_MS} ms (+ margin)`,
    );
    assert.equal(listenerWhileLost, "reconnecting", "health() shows the listener down");
    await reconnected;
    assert.equal(worker.health().listener, "listening");
    for (let i = 0; i < 3; i++) {
      const pickupMs = await echoCompletes(worker);
      assert.ok(pickupMs < 2000, `picked up in ${pickupMs.toFixed(0)} ms; the poll is 10 s`);
    }
    assert.equal(sessionLost.n, 0, "only the LISTEN connection was cut");
    proxy.set({ kind: "forward" });
    await worker.stop(0);
  });

  it("a missing insert trigger is reported (health and an error line), and checked again at each LISTEN reconnect", async () => {
    const other = await createTestDb(LINK);
    try {
      await other.sql("DROP TRIGGER jobs_notify_insert ON jobs");
      const proxy = await startProxy();
      const first = proxy.accepted + 1;
      proxy.match = (n) => n === first + 2;
      const lines: Record<string, unknown>[] = [];
      const worker = await startWorkerAt(proxy.url(DATABASE_URL), { testDb: other, logLines: lines });
      assert.equal(worker.health().notifyTrigger, false);
      assert.ok(
        lines.some((l) => l.level === 50 && String(l.msg).includes("jobs_notify_insert")),
        "an error line names the missing trigger",
      );
      // migrate() puts the trigger back; a LISTEN reconnect checks again.
      await migrate(other.pool, other.config);
      const reconnected = waitForEvent(worker, "listener:reconnected", () => true, 20_000);
      proxy.set({ kind: "drop" });
      await reconnected;
      assert.equal(worker.health().notifyTrigger, true);
      proxy.set({ kind: "forward" });
      await worker.stop(0);
    } finally {
      await other.drop();
    }
  });
});
