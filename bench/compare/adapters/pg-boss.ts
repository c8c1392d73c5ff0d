/**
 * pg-boss 12 (node_modules/pg-boss; options from its dist/types.d.ts doc comments, which mirror
 * pgboss.io/api/workers and /api/constructor). Two rows:
 *
 * - `pg-boss`: per-job handler, `work()` with batchSize 1 and localConcurrency 100 (100 polling
 *   workers in this process). A worker sleeps `pollingIntervalSeconds` (minimum 0.5 s) after each
 *   fetch unless a burst trigger holds; at batchSize 1 the only trigger is `burstWhenReadyExceeds`,
 *   which reads the queue's cached ready count, refreshed by the monitor, so the monitor,
 *   supervise and queue-cache intervals are set to their minimum, 1 s.
 * - `pg-boss-batch`: batch handler of 1,000 jobs (batchSize 1000, `burstWhenBatchFull`).
 *
 * Both: `useListenNotify` with the queue created `notify: true`, so a send wakes idle workers.
 * Bulk enqueue is `insert()`, single is `send()`. The pool is pg-boss's default (max 10).
 */
import { PgBoss, type WorkOptions } from "pg-boss";
import { QueueAdapter, type StopWorkers } from "../base.js";
import { describe, quoteIdent } from "../harness.js";
import type { BenchContext, BenchPayload, JobSink } from "../types.js";

const QUEUE = "bench";

/** Worker options of each row. */
const WORK: Record<"perJob" | "batch", WorkOptions> = {
  perJob: { batchSize: 1, localConcurrency: 100, pollingIntervalSeconds: 0.5, burstWhenReadyExceeds: 1 },
  batch: { batchSize: 1000, localConcurrency: 2, pollingIntervalSeconds: 0.5, burstWhenBatchFull: true },
};

export class PgBossAdapter extends QueueAdapter {
  readonly system;
  readonly settings;
  readonly backend = "PostgreSQL";
  private readonly schema: string;
  private readonly work: WorkOptions;
  private boss: PgBoss | null = null;

  constructor(ctx: BenchContext, batch: boolean) {
    super(ctx);
    this.system = batch ? ("pg-boss-batch" as const) : ("pg-boss" as const);
    this.work = batch ? WORK.batch : WORK.perJob;
    this.settings = batch
      ? "work batchSize 1000, localConcurrency 2, burstWhenBatchFull, poll 0.5 s; NOTIFY; pool 10"
      : "work batchSize 1, localConcurrency 100, burstWhenReadyExceeds 1, poll 0.5 s, stats 1 s; NOTIFY; pool 10";
    this.schema = `bench_cmp_${ctx.runId}_${batch ? "pgboss_batch" : "pgboss"}`;
  }

  private get b(): PgBoss {
    if (!this.boss) throw new Error("setup() has not run");
    return this.boss;
  }

  async setup(): Promise<void> {
    const boss = new PgBoss({
      connectionString: this.ctx.databaseUrl,
      schema: this.schema,
      application_name: `bench ${this.system}`,
      useListenNotify: true,
      monitorIntervalSeconds: 1,
      superviseIntervalSeconds: 1,
      queueCacheIntervalSeconds: 1,
    });
    boss.on("error", (error: unknown) => this.note(`pg-boss error event: ${describe(error)}`));
    const warned = new Set<string>();
    boss.on("warning", (warning: { message?: string }) => {
      const message = String(warning?.message ?? JSON.stringify(warning));
      const kind = message.replace(/\d+/g, "N"); // one note per kind of warning, not per count
      if (warned.has(kind)) return;
      warned.add(kind);
      this.note(`pg-boss warning event (first of its kind): ${message.slice(0, 240)}`);
    });
    this.boss = boss;
    await boss.start();
    await boss.createQueue(QUEUE, { notify: true });
  }

  protected insertBatch(payloads: BenchPayload[]): Promise<unknown> {
    return this.b.insert(
      QUEUE,
      payloads.map((data) => ({ data })),
    );
  }

  protected insertOne(payload: BenchPayload): Promise<unknown> {
    return this.b.send(QUEUE, payload);
  }

  protected async startWorkers(sink: JobSink): Promise<StopWorkers> {
    await this.b.work<BenchPayload>(QUEUE, this.work, async (jobs) => {
      for (const job of jobs) sink(job.data);
    });
    return async () => {
      await this.b.offWork(QUEUE, { wait: true });
    };
  }

  async seedFinished(count: number): Promise<void> {
    const s = quoteIdent(this.schema);
    await this.ctx.admin.query(
      `INSERT INTO ${s}.job (name, data, state, policy, start_after, created_on, started_on, completed_on)
       SELECT $2, '{"i":-1}'::jsonb, 'completed', 'standard', t, t, t, t
       FROM generate_series(1, $1::int) AS g, (SELECT now() - interval '1 hour' AS t) AS x`,
      [count, QUEUE],
    );
    await this.ctx.admin.vacuumAnalyze(`${s}.job`);
  }

  /** TRUNCATE rather than deleteAllJobs(): after (e) a DELETE of 1M rows would leave a bloated table. */
  async clear(): Promise<void> {
    await this.ctx.admin.query(`TRUNCATE ${quoteIdent(this.schema)}.job CASCADE`);
  }

  protected async close(): Promise<void> {
    await this.boss?.stop({ graceful: true, close: true, timeout: 10_000 });
    this.boss = null;
    await this.ctx.admin.dropSchema(this.schema);
  }
}
