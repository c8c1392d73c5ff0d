/**
 * graphile-worker 0.18 (node_modules/graphile-worker; options from dist/index.d.ts, the
 * GraphileConfig.WorkerOptions doc comments, which point at worker.graphile.org/docs/performance):
 * `run()` with concurrency 100 and a per-job task, plus the batching preset of the docs' performance
 * page — `localQueue.size` 1000, `completeJobBatchDelay` 0, `failJobBatchDelay` 0. Bulk enqueue is
 * WorkerUtils `addJobs`, single is `addJob`. One pg.Pool (max 10, graphile's default) for all.
 *
 * graphile-worker deletes a job when it completes and 0.18 has no archive table, so there is no
 * "1M finished jobs" state to build: (e) is not applicable, ratio 1.0 by construction.
 */
import { Logger, makeWorkerUtils, type Runner, run, type WorkerUtils } from "graphile-worker";
import pg from "pg";
import { QueueAdapter, type StopWorkers } from "../base.js";
import { quoteIdent } from "../harness.js";
import type { BenchContext, BenchPayload, JobSink } from "../types.js";

export const GRAPHILE_NO_ARCHIVE =
  "n/a — completed jobs are deleted (no archive in 0.18); ratio 1.0 by construction";

export class GraphileWorkerAdapter extends QueueAdapter {
  readonly system = "graphile-worker" as const;
  readonly settings =
    "run concurrency 100, localQueue.size 1000, completeJobBatchDelay 0, failJobBatchDelay 0; pool 10";
  readonly backend = "PostgreSQL";
  private readonly schema: string;
  private pool: pg.Pool | null = null;
  private utils: WorkerUtils | null = null;
  private readonly logger: Logger;

  constructor(ctx: BenchContext) {
    super(ctx);
    this.schema = `bench_cmp_${ctx.runId}_graphile`;
    this.unsupported.claim1m = GRAPHILE_NO_ARCHIVE;
    this.logger = new Logger(() => (level, message) => {
      if (level === "error" || level === "warning")
        this.note(`graphile-worker ${level}: ${message.slice(0, 300)}`);
    });
  }

  private get u(): WorkerUtils {
    if (!this.utils) throw new Error("setup() has not run");
    return this.utils;
  }

  async setup(): Promise<void> {
    this.pool = new pg.Pool({
      connectionString: this.ctx.databaseUrl,
      max: 10,
      application_name: "bench graphile",
    });
    this.pool.on("error", () => undefined);
    this.pool.on("connect", (client) => client.on("error", () => undefined));
    this.utils = await makeWorkerUtils({ pgPool: this.pool, schema: this.schema, logger: this.logger });
    await this.utils.migrate();
  }

  protected insertBatch(payloads: BenchPayload[]): Promise<unknown> {
    return this.u.addJobs(payloads.map((payload) => ({ identifier: "noop", payload })));
  }

  protected insertOne(payload: BenchPayload): Promise<unknown> {
    return this.u.addJob("noop", payload);
  }

  protected async startWorkers(sink: JobSink): Promise<StopWorkers> {
    if (!this.pool) throw new Error("setup() has not run");
    const runner: Runner = await run({
      pgPool: this.pool,
      schema: this.schema,
      concurrency: 100,
      noHandleSignals: true,
      logger: this.logger,
      taskList: {
        noop: async (payload) => {
          sink(payload as BenchPayload);
        },
      },
      preset: { worker: { localQueue: { size: 1000 }, completeJobBatchDelay: 0, failJobBatchDelay: 0 } },
    });
    return async () => {
      await runner.stop();
    };
  }

  seedFinished(): Promise<void> {
    return Promise.reject(new Error(GRAPHILE_NO_ARCHIVE));
  }

  async clear(): Promise<void> {
    await this.pool?.query(`DELETE FROM ${quoteIdent(this.schema)}._private_jobs`);
  }

  protected async close(): Promise<void> {
    await this.utils?.release();
    this.utils = null;
    await this.pool?.end().catch(() => undefined);
    this.pool = null;
    await this.ctx.admin.dropSchema(this.schema);
  }
}
