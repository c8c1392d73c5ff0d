/**
 * taskqueue's public library API. The CLI service is built on exactly this.
 *
 * ```ts
 * import { TaskQueue } from "taskqueue";
 * const queue = new TaskQueue({ databaseUrl: process.env.DATABASE_URL });
 * await queue.migrate();
 * queue.register("send_email", async (job, signal) => ({ delivered: true }));
 * await queue.addJob({ type: "send_email", payload: { to: "a@example.com" } });
 * const worker = await queue.startWorker();
 * // ... later
 * await worker.stop();
 * await queue.close();
 * ```
 */
import type pg from "pg";
import { type ResolvedConfig, resolveConfig, type TaskQueueOptions } from "./config.js";
import { createPool } from "./db/pool.js";
import { ConfigError } from "./errors.js";
import { createLogger, type Logger } from "./log.js";
import { type EnqueueOptions, Ledger } from "./queue/ledger.js";
import { type MigrateResult, migrate } from "./queue/migrate.js";
import type { DeadLetterJob, Job, JobSpec, ListJobsQuery, QueueMetrics } from "./queue/types.js";
import { registerBuiltinHandlers } from "./worker/handlers/index.js";
import { HandlerRegistry, type JobHandler } from "./worker/registry.js";
import { Worker } from "./worker/worker.js";

export { buildApp } from "./api/app.js";
export { configFromEnv, type ResolvedConfig, resolveConfig, type TaskQueueOptions } from "./config.js";
export { type EmbeddedDatabase, startEmbeddedPostgres } from "./db/embedded.js";
export {
  BatchTooLargeError,
  ConfigError,
  EmbeddedPostgresError,
  EmbeddedPostgresUnavailableError,
  type FieldProblem,
  HandlerMissingError,
  HandlerTypeError,
  JobAbortedError,
  type JobAbortReason,
  JobNotFoundError,
  JobStateConflictError,
  JobValidationError,
  LockSessionLostError,
  PayloadError,
  QueueFullError,
  SchemaVersionError,
  TaskQueueError,
  WorkerStateError,
} from "./errors.js";
export { LIMITS } from "./queue/job-shape.js";
export { type EnqueueOptions, Ledger, MAX_BATCH_JOBS } from "./queue/ledger.js";
export type { FailedStatus } from "./queue/lock-session.js";
export type {
  AttemptError,
  ClaimedJob,
  DeadLetterJob,
  Job,
  JobSpec,
  JobStatus,
  JsonValue,
  ListJobsQuery,
  QueueMetrics,
} from "./queue/types.js";
export { builtinHandlers, registerBuiltinHandlers } from "./worker/handlers/index.js";
export { type HandlerJob, HandlerRegistry, type JobHandler } from "./worker/registry.js";
export {
  type FencedWrite,
  type FenceReason,
  type StopReport,
  Worker,
  type WorkerEvents,
  type WorkerHealth,
  type WorkerState,
} from "./worker/worker.js";

/** Options of {@link TaskQueue}: the config fields, plus an optional pool and logger to share. */
export interface TaskQueueInit extends TaskQueueOptions {
  /** Use this pool instead of creating one (it is not closed by {@link TaskQueue.close}). */
  pool?: pg.Pool;
  /** Use this pino logger. Default: a new one at `logLevel`. */
  logger?: Logger;
  /** Register the eight built-in handlers (noop, echo, slow, ...). Default false. */
  builtinHandlers?: boolean;
}

/** One queue: enqueue and read jobs, register handlers, run workers. */
export class TaskQueue {
  readonly config: ResolvedConfig & { databaseUrl: string };
  readonly ledger: Ledger;
  readonly registry = new HandlerRegistry();
  readonly logger: Logger;
  readonly pool: pg.Pool;
  private readonly ownsPool: boolean;
  private readonly workers = new Set<Worker>();

  /** @throws {ConfigError} on a bad option, or when `databaseUrl` is missing. */
  constructor(options: TaskQueueInit = {}) {
    const { pool, logger, builtinHandlers, ...rest } = options;
    const config = resolveConfig(rest);
    if (!config.databaseUrl)
      throw new ConfigError("databaseUrl", "is required (a PostgreSQL connection string)");
    this.config = config as ResolvedConfig & { databaseUrl: string };
    this.logger = logger ?? createLogger(config.logLevel);
    this.ownsPool = !pool;
    this.pool = pool ?? createPool({ connectionString: config.databaseUrl });
    this.pool.on("error", (error) => this.logger.warn({ err: error }, "idle pool connection failed"));
    this.ledger = new Ledger(this.pool, config.schema, config);
    if (builtinHandlers) registerBuiltinHandlers(this.registry);
  }

  /** Creates or upgrades the schema. Safe to run from many processes at once. */
  migrate(): Promise<MigrateResult> {
    return migrate(this.pool, this.config);
  }

  /** Registers the handler of a job type. @throws {HandlerTypeError} on an empty or too long type. */
  register(type: string, handler: JobHandler): this {
    this.registry.register(type, handler);
    return this;
  }

  /** See {@link Ledger.addJob}. Pass `{client}` to enqueue inside your own transaction. */
  addJob(spec: JobSpec, options?: EnqueueOptions): Promise<Job> {
    return this.ledger.addJob(spec, options);
  }

  /** See {@link Ledger.addJobs}: up to 10,000 jobs, one statement, all or nothing. */
  addJobs(specs: readonly JobSpec[], options?: EnqueueOptions): Promise<Job[]> {
    return this.ledger.addJobs(specs, options);
  }

  /** See {@link Ledger.addJobIds}: {@link addJobs} answering only the new ids, in the order given. */
  addJobIds(specs: readonly JobSpec[], options?: EnqueueOptions): Promise<number[]> {
    return this.ledger.addJobIds(specs, options);
  }

  getJob(id: number): Promise<Job | null> {
    return this.ledger.getJob(id);
  }

  listJobs(query?: ListJobsQuery): Promise<Job[]> {
    return this.ledger.listJobs(query);
  }

  /** @throws {JobNotFoundError} @throws {JobStateConflictError} when not pending. */
  cancelJob(id: number): Promise<Job> {
    return this.ledger.cancelJob(id);
  }

  getDeadLetter(jobId: number): Promise<DeadLetterJob | null> {
    return this.ledger.getDeadLetter(jobId);
  }

  metrics(): Promise<QueueMetrics> {
    return this.ledger.metrics(this.config.staleThresholdSeconds);
  }

  /**
   * Starts a worker for the registered handlers (claims only those types).
   * @param overrides config fields for this worker (e.g. `workerCount`); `types` restricts the
   *   claimed types to a subset of the registered ones; `runReaper` false leaves reaping to others.
   * @throws {HandlerMissingError} when no handler is registered or a listed type has none.
   * @throws {SchemaVersionError} when the schema is older than this code needs.
   */
  async startWorker(
    overrides: TaskQueueOptions & { runReaper?: boolean; types?: string[] } = {},
  ): Promise<Worker> {
    const { runReaper, types, ...rest } = overrides;
    const config = resolveConfig({ ...this.config, ...rest }) as TaskQueue["config"];
    const worker = new Worker({
      config,
      registry: this.registry,
      ledger: this.ledger,
      logger: this.logger,
      runReaper,
      types,
    });
    this.workers.add(worker);
    worker.once("worker:stopped", () => this.workers.delete(worker));
    try {
      await worker.start();
    } catch (error) {
      // A failed start has closed what it opened: there is nothing for close() to stop.
      this.workers.delete(worker);
      throw error;
    }
    return worker;
  }

  /** Stops every worker this queue started (graceful), then closes the pool if it owns it. */
  async close(): Promise<void> {
    await Promise.all([...this.workers].map((w) => w.stop()));
    if (this.ownsPool) await this.pool.end();
  }
}
