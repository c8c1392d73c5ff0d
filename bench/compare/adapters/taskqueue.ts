/**
 * taskqueue, the library (dist/src/index.js): `TaskQueue` with workerCount 100 and prefetch 1000,
 * per-job handlers. Enqueue with `addJobs` (bulk) and `addJob` (single). Warnings it logs are
 * collected into the row's notes instead of stdout.
 */
import { type Logger, pino } from "pino";
import { TaskQueue } from "../../../src/index.js";
import { QueueAdapter, type StopWorkers } from "../base.js";
import { quoteIdent } from "../harness.js";
import type { BenchContext, BenchPayload, JobSink } from "../types.js";

export const TASKQUEUE_WORKER = { workerCount: 100, prefetch: 1000 } as const;

/** A pino logger at `warn` whose lines become notes (each message once, with a count). */
export function collectingLogger(note: (text: string) => void): Logger {
  const seen = new Map<string, number>();
  return pino(
    { level: "warn", base: null, timestamp: false, formatters: { level: (label) => ({ level: label }) } },
    {
      write(line: string) {
        try {
          const { msg, level, err, ...fields } = JSON.parse(line) as Record<string, unknown>;
          const key = String(msg);
          const n = (seen.get(key) ?? 0) + 1;
          seen.set(key, n);
          if (n === 1) {
            const extra = Object.keys(fields).length > 0 ? ` ${JSON.stringify(fields)}` : "";
            const error = err ? ` (${(err as { message?: string }).message ?? ""})` : "";
            note(`taskqueue logged (level ${level}): ${key}${extra}${error}`);
          }
        } catch {
          note(`taskqueue logged: ${line.trim().slice(0, 200)}`);
        }
      },
    },
  );
}

/** Creates and migrates a TaskQueue in its own schema and notify channel. */
export async function openTaskQueue(
  ctx: BenchContext,
  schema: string,
  note: (t: string) => void,
  lockSessions = 1,
) {
  const queue = new TaskQueue({
    databaseUrl: ctx.databaseUrl,
    schema,
    notifyChannel: `${schema}_jobs`,
    ...TASKQUEUE_WORKER,
    lockSessions,
    logger: collectingLogger(note),
  });
  await queue.migrate();
  return queue;
}

/** INSERT … SELECT generate_series of `count` jobs in state done (our schema). */
export function seedDoneSql(schema: string): string {
  return `INSERT INTO ${quoteIdent(schema)}.jobs
      (type, payload, status, attempt, run_at, claimed_at, started_at, heartbeat_at, completed_at, result, worker_id, created_at)
    SELECT 'noop', '{"i":-1}'::jsonb, 'done', 0, t, t, t, t, t, 'null'::jsonb, 'seed', t
    FROM generate_series(1, $1::int) AS g, (SELECT now() - interval '1 hour' AS t) AS x`;
}

/** Deletes every job and what the triggers derived from them. */
export function truncateSql(schema: string): string {
  const s = quoteIdent(schema);
  return `TRUNCATE ${s}.jobs, ${s}.dead_letter_jobs, ${s}.job_stats, ${s}.job_exec_bins`;
}

/**
 * The headline row: the default of one lock session per worker process, as DESIGN.md §5 has it.
 * With `lockSessions` 2 it is the `taskqueue-2-sessions` row: two lanes, each a worker with its own
 * lock session, in one process (a relaxation of §5's "one lock-holding session per worker
 * process"; every other guarantee holds per lane). Its enqueue is the headline row's.
 */
export class TaskQueueAdapter extends QueueAdapter {
  readonly system: "taskqueue" | "taskqueue-2-sessions";
  readonly settings: string;
  readonly backend = "PostgreSQL";
  private readonly schema: string;
  private queue: TaskQueue | null = null;

  constructor(
    ctx: BenchContext,
    private readonly lockSessions: 1 | 2 = 1,
  ) {
    super(ctx);
    this.system = lockSessions === 1 ? "taskqueue" : "taskqueue-2-sessions";
    this.settings = `library TaskQueue, workerCount 100, prefetch 1000, lockSessions ${lockSessions}, per-job handler; pool 10`;
    // Short: taskqueue names prepared statements `taskqueue_<statement>/<schema>`, which must fit
    // PostgreSQL's 63 characters (the longest statement name takes 33).
    this.schema = `bench_cmp_${ctx.runId}_tq${lockSessions}`;
    if (lockSessions > 1) {
      const same = "n/a — the enqueue path does not depend on lock sessions: see the taskqueue row";
      this.unsupported.enqueueBulk = same;
      this.unsupported.enqueueSingle = same;
    }
  }

  private get q(): TaskQueue {
    if (!this.queue) throw new Error("setup() has not run");
    return this.queue;
  }

  async setup(): Promise<void> {
    this.queue = await openTaskQueue(this.ctx, this.schema, (t) => this.note(t), this.lockSessions);
  }

  protected insertBatch(payloads: BenchPayload[]): Promise<unknown> {
    return this.q.addJobs(payloads.map((payload) => ({ type: "noop", payload: { i: payload.i } })));
  }

  protected insertOne(payload: BenchPayload): Promise<unknown> {
    return this.q.addJob({ type: "noop", payload: { i: payload.i } });
  }

  protected async startWorkers(sink: JobSink): Promise<StopWorkers> {
    this.q.register("noop", (job) => {
      sink(job.payload as unknown as BenchPayload);
      return null;
    });
    const worker = await this.q.startWorker();
    return async () => {
      await worker.stop();
    };
  }

  async seedFinished(count: number): Promise<void> {
    await this.q.pool.query(seedDoneSql(this.schema), [count]);
    await this.q.pool.query(`VACUUM (ANALYZE) ${quoteIdent(this.schema)}.jobs`);
  }

  async clear(): Promise<void> {
    await this.q.pool.query(truncateSql(this.schema));
  }

  protected async close(): Promise<void> {
    await this.queue?.close();
    this.queue = null;
    await this.ctx.admin.dropSchema(this.schema);
  }
}
