/**
 * taskqueue's HTTP API, enqueue figures only: `buildApp` (dist/src/api/app.js) served in-process on
 * a free loopback port, driven with node:http and a keep-alive agent (64 sockets). Bulk: POST
 * /jobs/batch with 1,000 jobs per request, one request at a time; single: POST /jobs, 50 requests in
 * flight. Workers are the library's, measured in the `taskqueue` row. The client shares the
 * server's process and event loop: fetch (undici) cost as much CPU per request as the server and
 * halved the single-enqueue figure (measured: 2,700 against 5,200 requests/s), so the lighter
 * client is used; the server is what is measured.
 */
import { Agent, request } from "node:http";
import type { FastifyInstance } from "fastify";
import { buildApp } from "../../../src/api/app.js";
import type { TaskQueue } from "../../../src/index.js";
import { QueueAdapter, type StopWorkers } from "../base.js";
import type { BenchContext, BenchPayload } from "../types.js";
import { openTaskQueue, truncateSql } from "./taskqueue.js";

const ENQUEUE_ONLY = "enqueue-only row: the HTTP API runs no workers (see the taskqueue row)";

export class TaskQueueHttpAdapter extends QueueAdapter {
  readonly system = "taskqueue-http" as const;
  readonly settings =
    "Fastify buildApp in-process, node:http keep-alive client; POST /jobs/batch 1,000 · POST /jobs";
  readonly backend = "PostgreSQL";
  private readonly schema: string;
  private queue: TaskQueue | null = null;
  private app: FastifyInstance | null = null;
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
    this.queue = await openTaskQueue(this.ctx, this.schema, (t) => this.note(t));
    this.app = await buildApp({ ledger: this.queue.ledger, config: this.queue.config });
    await this.app.listen({ host: "127.0.0.1", port: 0 });
    const address = this.app.server.address();
    if (!address || typeof address === "string") throw new Error("API did not bind a TCP port");
    this.base = `http://127.0.0.1:${address.port}`;
  }

  private async post(path: string, body: unknown): Promise<void> {
    const text = JSON.stringify(body);
    await new Promise<void>((resolve, reject) => {
      const req = request(
        `${this.base}${path}`,
        {
          method: "POST",
          agent: this.agent,
          headers: { "content-type": "application/json", "content-length": Buffer.byteLength(text) },
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
    return this.post("/jobs/batch", { jobs: payloads.map((payload) => ({ type: "noop", payload })) });
  }

  protected insertOne(payload: BenchPayload): Promise<unknown> {
    return this.post("/jobs", { type: "noop", payload });
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
    await this.app?.close();
    this.app = null;
    await this.queue?.close();
    this.queue = null;
    await this.ctx.admin.dropSchema(this.schema);
  }
}
