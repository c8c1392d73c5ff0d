/**
 * taskqueue's HTTP API, enqueue figures only: `buildApp` (dist/src/api/app.js) served in-process on
 * a free loopback port, driven with fetch (keep-alive). Bulk: POST /jobs/batch with 1,000 jobs per
 * request, one request at a time; single: POST /jobs, 50 requests in flight. Workers are the
 * library's, measured in the `taskqueue` row.
 */
import type { FastifyInstance } from "fastify";
import { buildApp } from "../../../src/api/app.js";
import type { TaskQueue } from "../../../src/index.js";
import { QueueAdapter, type StopWorkers } from "../base.js";
import type { BenchContext, BenchPayload } from "../types.js";
import { openTaskQueue, truncateSql } from "./taskqueue.js";

const ENQUEUE_ONLY = "enqueue-only row: the HTTP API runs no workers (see the taskqueue row)";

export class TaskQueueHttpAdapter extends QueueAdapter {
  readonly system = "taskqueue-http" as const;
  readonly settings = "Fastify buildApp in-process, fetch keep-alive; POST /jobs/batch 1,000 · POST /jobs";
  readonly backend = "PostgreSQL";
  private readonly schema: string;
  private queue: TaskQueue | null = null;
  private app: FastifyInstance | null = null;
  private base = "";

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
    const response = await fetch(`${this.base}${path}`, {
      method: "POST",
      headers: { "content-type": "application/json" },
      body: JSON.stringify(body),
    });
    const text = await response.text();
    if (response.status !== 201)
      throw new Error(`POST ${path}: HTTP ${response.status} ${text.slice(0, 300)}`);
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
    await this.app?.close();
    this.app = null;
    await this.queue?.close();
    this.queue = null;
    await this.ctx.admin.dropSchema(this.schema);
  }
}
