/**
 * taskqueue's HTTP API, enqueue figures only, as users run it: `taskqueue api` (dist/src/cli/main.js)
 * in its own process on a free loopback port, with the same Node binary, driven from this process
 * with node:http and a keep-alive agent (64 sockets). Bulk: POST /jobs/batch with 1,000 jobs per
 * request and `Prefer: return=minimal` (the answer is the new ids), one request at a time; single:
 * POST /jobs, 50 requests in flight. Workers are the library's, measured in the `taskqueue` row. Measured here: with client and server sharing one
 * process, the client's work came out of the server's time (fetch cost as much CPU per request as
 * the server, and even node:http took a third of a bulk request's time).
 */
import { type ChildProcess, spawn } from "node:child_process";
import { Agent, request } from "node:http";
import { fileURLToPath } from "node:url";
import { freePort } from "../../../src/db/embedded.js";
import type { TaskQueue } from "../../../src/index.js";
import { QueueAdapter, type StopWorkers } from "../base.js";
import { sleep } from "../harness.js";
import type { BenchContext, BenchPayload } from "../types.js";
import { openTaskQueue, truncateSql } from "./taskqueue.js";

const ENQUEUE_ONLY = "enqueue-only row: the HTTP API runs no workers (see the taskqueue row)";
const CLI = fileURLToPath(new URL("../../../src/cli/main.js", import.meta.url));
const READY_TIMEOUT_MS = 30_000;

export class TaskQueueHttpAdapter extends QueueAdapter {
  readonly system = "taskqueue-http" as const;
  readonly settings =
    "taskqueue api in its own process, node:http keep-alive client; POST /jobs/batch 1,000 with Prefer: return=minimal · POST /jobs";
  readonly backend = "PostgreSQL";
  private readonly schema: string;
  private queue: TaskQueue | null = null;
  private server: ChildProcess | null = null;
  private serverLog = "";
  private base = "";
  private readonly agent = new Agent({ keepAlive: true, maxSockets: 64 });

  constructor(ctx: BenchContext) {
    super(ctx);
    this.schema = `bench_cmp_${ctx.runId}_tqhttp`;
    this.unsupported.drain = ENQUEUE_ONLY;
    this.unsupported.pickup = ENQUEUE_ONLY;
    this.unsupported.claim1m = ENQUEUE_ONLY;
  }

  async setup(): Promise<void> {
    // Migrates the schema; its pool also clears the table between phases.
    this.queue = await openTaskQueue(this.ctx, this.schema, (t) => this.note(t));
    const port = await freePort();
    this.base = `http://127.0.0.1:${port}`;
    const server = spawn(process.execPath, [CLI, "api", "--no-migrate"], {
      env: {
        ...process.env,
        DATABASE_URL: this.ctx.databaseUrl,
        TASKQUEUE_SCHEMA: this.schema,
        TASKQUEUE_NOTIFY_CHANNEL: `${this.schema}_jobs`,
        HOST: "127.0.0.1",
        PORT: String(port),
        LOG_LEVEL: "warn",
      },
      stdio: ["ignore", "ignore", "pipe"],
    });
    this.server = server;
    server.stderr?.on("data", (chunk: Buffer) => {
      this.serverLog = `${this.serverLog}${chunk.toString("utf8")}`.slice(-2000);
    });
    const deadline = Date.now() + READY_TIMEOUT_MS;
    while (!(await this.ready())) {
      if (server.exitCode !== null || Date.now() > deadline)
        throw new Error(`taskqueue api did not become ready: ${this.serverLog.trim().slice(-300)}`);
      await sleep(50);
    }
  }

  /** True once GET /ready answers 200. */
  private ready(): Promise<boolean> {
    return new Promise((resolve) => {
      const req = request(`${this.base}/ready`, { agent: this.agent }, (response) => {
        response.resume();
        response.on("end", () => resolve(response.statusCode === 200));
      });
      req.on("error", () => resolve(false));
      req.end();
    });
  }

  private async post(path: string, body: unknown, headers: Record<string, string> = {}): Promise<void> {
    const text = JSON.stringify(body);
    await new Promise<void>((resolve, reject) => {
      const req = request(
        `${this.base}${path}`,
        {
          method: "POST",
          agent: this.agent,
          headers: {
            "content-type": "application/json",
            "content-length": Buffer.byteLength(text),
            ...headers,
          },
        },
        (response) => {
          const chunks: Buffer[] = [];
          response.on("data", (chunk: Buffer) => chunks.push(chunk));
          response.on("error", reject);
          response.on("end", () => {
            if (response.statusCode === 201) resolve();
            else {
              const answer = Buffer.concat(chunks).toString("utf8").slice(0, 300);
              reject(new Error(`POST ${path}: HTTP ${response.statusCode} ${answer}`));
            }
          });
        },
      );
      req.on("error", reject);
      req.end(text);
    });
  }

  protected insertBatch(payloads: BenchPayload[]): Promise<unknown> {
    // Answered with the ids only (RFC 7240 return=minimal), as a bulk loader wants; pg-boss's bulk
    // `insert` returns nothing either.
    return this.post(
      "/jobs/batch",
      { jobs: payloads.map((payload) => ({ type: "noop", payload })) },
      { prefer: "return=minimal" },
    );
  }

  protected insertOne(payload: BenchPayload): Promise<unknown> {
    return this.post("/jobs", { type: "noop", payload });
  }

  /** The `taskqueue api` process: its CPU time and its backends' count in the CPU figures. */
  processIds(): number[] {
    return this.server?.pid === undefined ? [] : [this.server.pid];
  }

  protected startWorkers(): Promise<StopWorkers> {
    return Promise.reject(new Error(ENQUEUE_ONLY));
  }

  seedFinished(): Promise<void> {
    return Promise.reject(new Error(ENQUEUE_ONLY));
  }

  async clear(): Promise<void> {
    await this.queue?.pool.query(truncateSql(this.schema));
  }

  protected async close(): Promise<void> {
    this.agent.destroy();
    const server = this.server;
    this.server = null;
    if (server && server.exitCode === null) {
      const exited = new Promise<void>((resolve) => server.once("exit", () => resolve()));
      server.kill("SIGTERM");
      let timer: NodeJS.Timeout | undefined;
      const stopped = await Promise.race([
        exited.then(() => true),
        new Promise<boolean>((resolve) => {
          timer = setTimeout(() => resolve(false), 10_000);
        }),
      ]);
      clearTimeout(timer);
      if (!stopped) {
        this.note("taskqueue api did not stop within 10 s of SIGTERM; killed");
        server.kill("SIGKILL");
      }
    }
    await this.queue?.close();
    this.queue = null;
    await this.ctx.admin.dropSchema(this.schema);
  }
}
