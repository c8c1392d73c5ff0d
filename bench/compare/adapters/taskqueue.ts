/**
 * taskqueue, the library (dist/src/index.js): `TaskQueue` with workerCount 100 and prefetch 1000,
 * per-job handlers. Enqueue with `addJobs` (bulk) and `addJob` (single). Warnings it logs are
 * collected into the row's notes instead of stdout.
 *
 * The `taskqueue-baseline` row (`--baseline DIR`) is this adapter on another build's library,
 * `DIR/dist/src/index.js`, which resolves its own dependencies from DIR/node_modules. The library
 * is imported when the row's setup runs, so the baseline's process never loads this build's.
 */
import { join } from "node:path";
import { pathToFileURL } from "node:url";
import { type Logger, pino } from "pino";
import type { TaskQueue } from "../../../src/index.js";
import { QueueAdapter, type StopWorkers } from "../base.js";
import { BASELINE_ENTRY, buildRevision } from "../build-info.js";
import { quoteIdent } from "../harness.js";
import type { BenchContext, BenchPayload, JobSink } from "../types.js";

/** The `TaskQueue` class of a build: this one's, or a baseline's (assumed to have the same API). */
export type TaskQueueClass = typeof TaskQueue;

/** This build's `TaskQueue` (dist/src/index.js). */
export async function ownLibrary(): Promise<TaskQueueClass> {
  return (await import("../../../src/index.js")).TaskQueue;
}

/**
 * The `TaskQueue` class of the build in `dir` (`dir/dist/src/index.js`).
 * @throws {Error} when that file does not load or exports no `TaskQueue` class.
 */
export async function baselineLibrary(dir: string): Promise<TaskQueueClass> {
  const entry = join(dir, BASELINE_ENTRY);
  const module = (await import(pathToFileURL(entry).href)) as { TaskQueue?: unknown };
  if (typeof module.TaskQueue !== "function") throw new Error(`${entry} exports no TaskQueue class`);
  return module.TaskQueue as TaskQueueClass;
}

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

/** Creates and migrates a TaskQueue (this build's unless `library` is given) in its own schema and notify channel. */
export async function openTaskQueue(
  ctx: BenchContext,
  schema: string,
  note: (t: string) => void,
  lockSessions = 1,
  library?: TaskQueueClass,
): Promise<TaskQueue> {
  const Library = library ?? (await ownLibrary());
  const queue = new Library({
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

/** The jobs table and the tables its triggers and the dead-letter path fill. */
const JOB_TABLES = ["jobs", "dead_letter_jobs", "job_stats", "job_exec_bins"] as const;

/**
 * Deletes every job and what the triggers derived from them: `tables` of the schema (default: all
 * of {@link JOB_TABLES}; a baseline build of another commit may have only some of them).
 */
export function truncateSql(schema: string, tables: readonly string[] = JOB_TABLES): string {
  const s = quoteIdent(schema);
  return `TRUNCATE ${tables.map((t) => `${s}.${quoteIdent(t)}`).join(", ")}`;
}

/** Which of {@link JOB_TABLES} exist in `schema` (after migrate). */
export async function jobTables(queue: TaskQueue, schema: string): Promise<string[]> {
  const { rows } = await queue.pool.query<{ name: string }>(
    "SELECT tablename AS name FROM pg_tables WHERE schemaname = $1 AND tablename = ANY($2::text[])",
    [schema, JOB_TABLES],
  );
  const present = new Set(rows.map((r) => r.name));
  return JOB_TABLES.filter((t) => present.has(t));
}

/**
 * The headline row: the default of one lock session per worker process, as DESIGN.md §5 has it.
 * With `lockSessions` 2 it is the `taskqueue-2-sessions` row: two lanes, each a worker with its own
 * lock session, in one process (a relaxation of §5's "one lock-holding session per worker
 * process"; every other guarantee holds per lane). Its enqueue is the headline row's.
 * With `baselineDir` it is the `taskqueue-baseline` row: the headline row on that build's library.
 */
export class TaskQueueAdapter extends QueueAdapter {
  readonly system: "taskqueue" | "taskqueue-2-sessions" | "taskqueue-baseline";
  readonly settings: string;
  readonly backend = "PostgreSQL";
  private readonly schema: string;
  private queue: TaskQueue | null = null;
  private tables: readonly string[] = JOB_TABLES;

  constructor(
    ctx: BenchContext,
    private readonly lockSessions: 1 | 2 = 1,
    private readonly baselineDir: string | null = null,
  ) {
    super(ctx);
    this.system = baselineDir
      ? "taskqueue-baseline"
      : lockSessions === 1
        ? "taskqueue"
        : "taskqueue-2-sessions";
    this.settings = `library TaskQueue, workerCount 100, prefetch 1000, lockSessions ${lockSessions}, per-job handler; pool 10`;
    if (baselineDir) this.settings += `; the --baseline build's library (${buildRevision(baselineDir)})`;
    // Short: taskqueue names prepared statements `taskqueue_<statement>/<schema>`, which must fit
    // PostgreSQL's 63 characters (the longest statement name takes 33).
    this.schema = `bench_cmp_${ctx.runId}_${baselineDir ? "tqb" : `tq${lockSessions}`}`;
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
    const library = this.baselineDir ? await baselineLibrary(this.baselineDir) : undefined;
    this.queue = await openTaskQueue(this.ctx, this.schema, (t) => this.note(t), this.lockSessions, library);
    this.tables = await jobTables(this.queue, this.schema);
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
    await this.q.pool.query(truncateSql(this.schema, this.tables));
  }

  protected async close(): Promise<void> {
    await this.queue?.close();
    this.queue = null;
    await this.ctx.admin.dropSchema(this.schema);
  }
}
