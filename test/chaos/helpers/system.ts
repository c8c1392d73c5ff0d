/**
 * A live taskqueue system for the chaos suite and the soak: on a private cluster
 * (./cluster.ts), the schema migrated, the audit's tables and trigger added (./audit.ts), worker
 * processes and the API as real `taskqueue` CLI child processes (test/helpers/process.ts) with the
 * handlers of test/fixtures/chaos-handlers.ts, optionally reaching PostgreSQL through a
 * {@link TcpProxy} the test controls, and an HTTP client that keeps every id the API acknowledged
 * (each 201).
 *
 * A worker that exits on its own (a poison job killed it) is started again after
 * `respawnDelayMs`, as a container's restart policy would (`respawn`, default on); a worker the
 * test kills on purpose is restarted by the test.
 */
import { once } from "node:events";
import http from "node:http";
import { setTimeout as sleep } from "node:timers/promises";
import pg from "pg";
import { resolveConfig } from "../../../src/config.js";
import { migrate } from "../../../src/queue/migrate.js";
import { type CliProcess, startCli } from "../../helpers/process.js";
import { TcpProxy } from "../../helpers/tcp-proxy.js";
import { installAuditTables } from "./audit.js";
import type { ChaosCluster } from "./cluster.js";

export const SCHEMA = "chaos";
const HANDLERS = "dist/test/fixtures/chaos-handlers.js";

/** Short intervals (seconds) for the chaos tests; a test overrides what it measures. */
export const SHORT_INTERVALS: Record<string, string> = {
  POLL_INTERVAL_SECONDS: "0.5",
  HEARTBEAT_INTERVAL_SECONDS: "0.5",
  REAPER_INTERVAL_SECONDS: "0.5",
  STALE_THRESHOLD_SECONDS: "2",
  BACKOFF_BASE_SECONDS: "0.05",
  BACKOFF_MAX_SECONDS: "1",
  BACKOFF_JITTER: "false",
  SHUTDOWN_GRACE_SECONDS: "5",
};

export interface SystemOptions {
  cluster: ChaosCluster;
  /** Worker processes to start. Default 2. */
  workers?: number;
  /** Start the API. Default true. */
  api?: boolean;
  /** Workers and API reach PostgreSQL through a TCP proxy (`system.proxy`). Default false. */
  proxy?: boolean;
  /** Environment of every process (after {@link SHORT_INTERVALS}). */
  env?: Record<string, string>;
  /** Extra environment of the workers only (WORKER_COUNT, CHAOS_SANDBOX, ...). */
  workerEnv?: Record<string, string>;
  /** Extra environment of worker `index` only (after `workerEnv`). */
  perWorkerEnv?: (index: number) => Record<string, string>;
  /** Extra environment of the API only (MAX_PENDING_JOBS, ...). */
  apiEnv?: Record<string, string>;
  /** Restart a worker that exits by itself. Default true. */
  respawn?: boolean;
  respawnDelayMs?: number;
}

/** One worker slot: its current process, and every pid it has had with when that one ended. */
export interface WorkerSlot {
  process: CliProcess;
  /** Set when the test stops the slot on purpose (no respawn). */
  held: boolean;
}

/** Counts of the client's answers, by HTTP status ("error": no answer, or a network error). */
export type AnswerCounts = Record<string, number>;

export interface ChaosSystem {
  readonly db: pg.Pool;
  readonly proxy: TcpProxy | null;
  readonly workers: WorkerSlot[];
  api: CliProcess | null;
  apiUrl: string | null;
  /** Every job id the API answered 201 for, in order. */
  readonly acknowledged: number[];
  readonly answers: AnswerCounts;
  /** When each worker process ended (pid → ms since the epoch), for the audit's overlap rule. */
  readonly processEnds: Map<number, number>;
  /** Starts worker `index` again (after a kill), waiting for its "worker started". */
  startWorker(index: number): Promise<CliProcess>;
  /** SIGKILL of worker `index`; resolves once it is gone (no respawn until startWorker). */
  killWorker(index: number): Promise<number>;
  /** POST /jobs once, bounded by `timeoutMs`; returns the status (0: no answer) and keeps a 201's id. */
  post(body: Record<string, unknown>, timeoutMs?: number): Promise<{ status: number; retryAfter?: string }>;
  /** POST /jobs/batch (`Prefer: return=minimal`) once; a 201's ids are all acknowledged. */
  postBatch(
    jobs: Record<string, unknown>[],
    timeoutMs?: number,
  ): Promise<{ status: number; retryAfter?: string }>;
  /** Posts `body()` from `concurrency` loops until `stop()`, at most `ratePerSecond` in all. */
  postSteadily(options: {
    body: () => Record<string, unknown>;
    ratePerSecond: number;
    concurrency?: number;
  }): { stop: () => Promise<void> };
  /** Adds jobs straight through SQL (bulk set-up, not acknowledged by the API): returns their ids. */
  insertJobs(
    type: string,
    payload: Record<string, unknown>,
    count: number,
    maxRetries?: number,
  ): Promise<number[]>;
  /** Stops every process (SIGTERM, then SIGKILL after `graceMs`), the proxy and the pool. */
  stop(graceMs?: number): Promise<void>;
}

async function exitWithin(proc: CliProcess, ms: number): Promise<void> {
  if (proc.child.exitCode !== null || proc.child.signalCode !== null) return;
  const timer = setTimeout(() => proc.child.kill("SIGKILL"), ms);
  await proc.exited;
  clearTimeout(timer);
}

/** Starts a system on `options.cluster`; resolves once every process has logged that it started. */
export async function startSystem(options: SystemOptions): Promise<ChaosSystem> {
  const { cluster } = options;
  const db = new pg.Pool({ connectionString: cluster.url, max: 6, connectionTimeoutMillis: 10_000 });
  db.on("error", () => undefined);
  await migrate(db, resolveConfig({ databaseUrl: cluster.url, schema: SCHEMA }));
  await installAuditTables(db, SCHEMA);
  let proxy: TcpProxy | null = null;
  if (options.proxy) {
    proxy = new TcpProxy("127.0.0.1", cluster.port);
    await proxy.start();
  }
  const databaseUrl = proxy ? proxy.url(cluster.url) : cluster.url;
  const baseEnv: NodeJS.ProcessEnv = {
    ...process.env,
    DATABASE_URL: databaseUrl,
    CHAOS_RECORD_URL: cluster.url,
    TASKQUEUE_SCHEMA: SCHEMA,
    LOG_LEVEL: "info",
    ...SHORT_INTERVALS,
    ...options.env,
  };
  const processEnds = new Map<number, number>();
  const workers: WorkerSlot[] = [];
  const respawn = options.respawn ?? true;
  let stopping = false;

  const launchWorker = (index: number): CliProcess => {
    const proc = startCli(["worker", "--no-migrate", "--handlers", HANDLERS], {
      ...baseEnv,
      ...options.workerEnv,
      ...options.perWorkerEnv?.(index),
    });
    const slot = workers[index] ?? { process: proc, held: false };
    slot.process = proc;
    slot.held = false;
    workers[index] = slot;
    void proc.exited.then(async () => {
      if (proc.child.pid) processEnds.set(proc.child.pid, Date.now());
      if (stopping || slot.held || !respawn || slot.process !== proc) return;
      await sleep(options.respawnDelayMs ?? 200);
      if (!stopping && !slot.held && slot.process === proc) launchWorker(index);
    });
    return proc;
  };
  const started = (proc: CliProcess) => proc.waitForLog((line) => line.msg === "worker started", 60_000);

  for (let i = 0; i < (options.workers ?? 2); i++) launchWorker(i);
  let api: CliProcess | null = null;
  let apiUrl: string | null = null;
  if (options.api ?? true) {
    api = startCli(["api", "--no-migrate", "--port", "0"], { ...baseEnv, ...options.apiEnv });
    apiUrl = String((await api.waitForLog((line) => line.msg === "API listening", 60_000)).url);
  }
  await Promise.all(workers.map((slot) => started(slot.process)));

  const agent = new http.Agent({ keepAlive: true, maxSockets: 64 });
  const acknowledged: number[] = [];
  const answers: AnswerCounts = {};
  const count = (key: string) => {
    answers[key] = (answers[key] ?? 0) + 1;
  };

  /** POSTs `body` to `path`; a 201's ids (read by `idsOf`) are acknowledged. */
  const send = (
    path: string,
    body: unknown,
    headers: Record<string, string>,
    idsOf: (answer: unknown) => number[],
    timeoutMs: number,
  ): Promise<{ status: number; retryAfter?: string }> =>
    new Promise((resolve) => {
      if (!apiUrl) throw new Error("system: no API");
      const text = JSON.stringify(body);
      const request = http.request(
        `${apiUrl}${path}`,
        {
          method: "POST",
          agent,
          headers: {
            "content-type": "application/json",
            "content-length": Buffer.byteLength(text),
            ...headers,
          },
          timeout: timeoutMs,
        },
        (response) => {
          const chunks: Buffer[] = [];
          response.on("data", (chunk: Buffer) => chunks.push(chunk));
          response.on("end", () => {
            const status = response.statusCode ?? 0;
            if (status === 201)
              acknowledged.push(...idsOf(JSON.parse(Buffer.concat(chunks).toString("utf8"))));
            count(String(status));
            const retryAfter = response.headers["retry-after"];
            resolve(retryAfter === undefined ? { status } : { status, retryAfter: String(retryAfter) });
          });
          response.on("error", () => {
            count("error");
            resolve({ status: 0 });
          });
        },
      );
      request.on("timeout", () => request.destroy(new Error("timeout")));
      request.on("error", () => {
        count("error");
        resolve({ status: 0 });
      });
      request.end(text);
    });
  const post: ChaosSystem["post"] = (body, timeoutMs = 10_000) =>
    send("/jobs", body, {}, (answer) => [(answer as { id: number }).id], timeoutMs);
  const postBatch: ChaosSystem["postBatch"] = (jobs, timeoutMs = 30_000) =>
    send(
      "/jobs/batch",
      { jobs },
      { prefer: "return=minimal" },
      (answer) => (answer as { ids: number[] }).ids,
      timeoutMs,
    );

  const system: ChaosSystem = {
    db,
    proxy,
    workers,
    api,
    apiUrl,
    acknowledged,
    answers,
    processEnds,
    async startWorker(index) {
      const proc = launchWorker(index);
      await started(proc);
      return proc;
    },
    async killWorker(index) {
      const slot = workers[index];
      if (!slot) throw new Error(`system: no worker ${index}`);
      slot.held = true;
      const pid = slot.process.child.pid ?? 0;
      slot.process.child.kill("SIGKILL");
      await slot.process.exited;
      return pid;
    },
    post,
    postBatch,
    postSteadily({ body, ratePerSecond, concurrency = 4 }) {
      let running = true;
      const startedAt = Date.now();
      let sent = 0;
      const loop = async () => {
        while (running) {
          // Paced over the whole run: the n-th request leaves no earlier than n / rate seconds in.
          const due = startedAt + (sent / ratePerSecond) * 1000;
          sent++;
          if (due > Date.now()) await sleep(due - Date.now());
          if (!running) break;
          const { status } = await post(body());
          if (status === 0 || status >= 500) await sleep(100);
        }
      };
      const loops = Array.from({ length: concurrency }, loop);
      return {
        stop: async () => {
          running = false;
          await Promise.all(loops);
        },
      };
    },
    async insertJobs(type, payload, count, maxRetries = 3) {
      const { rows } = await db.query<{ id: string }>(
        `INSERT INTO "${SCHEMA}".jobs (type, payload, max_retries)
         SELECT $1, $2::jsonb, $4 FROM generate_series(1, $3) RETURNING id`,
        [type, JSON.stringify(payload), count, maxRetries],
      );
      return rows.map((row) => Number(row.id));
    },
    async stop(graceMs = 15_000) {
      stopping = true;
      const all = [...workers.map((slot) => slot.process), ...(api ? [api] : [])];
      for (const proc of all) if (proc.child.exitCode === null) proc.child.kill("SIGTERM");
      await Promise.all(all.map((proc) => exitWithin(proc, graceMs)));
      agent.destroy();
      await proxy?.stop();
      await db.end();
    },
  };
  return system;
}

/** Resolves when `proc` has written a log line matching `match`, or rejects after `timeoutMs`. */
export function logLine(
  proc: CliProcess,
  match: (line: Record<string, unknown>) => boolean,
  timeoutMs = 30_000,
): Promise<Record<string, unknown>> {
  return proc.waitForLog(match, timeoutMs);
}

/** Waits for the child to exit (for tests that await a crash). */
export async function exited(proc: CliProcess): Promise<void> {
  if (proc.child.exitCode !== null || proc.child.signalCode !== null) return;
  await once(proc.child, "exit");
}
