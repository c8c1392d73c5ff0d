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
import { createPool, idleConnectionError, setNamedStatements } from "./db/pool.js";
import { ConfigError } from "./errors.js";
import { createLogger, type Logger } from "./log.js";
import { poolStarvationWarning } from "./pool-warning.js";
import type {
  DeadLetterBatch,
  DeadLetterFilter,
  DeadLetterQuery,
  ListDeadLettersQuery,
  ReplayOutcome,
  RetryOutcome,
} from "./queue/dead-letters.js";
import type { TypePause, TypeState } from "./queue/job-types.js";
import {
  type DeadLetterBatchOptions,
  type EnqueuedJob,
  type EnqueueOptions,
  Ledger,
} from "./queue/ledger.js";
import { type MigrateResult, migrate } from "./queue/migrate.js";
import { type PoolingProbe, type ProbeQuery, resolvePooling } from "./queue/pooling.js";
import type { PruneReport } from "./queue/retention.js";
import type { Schedule, ScheduleOptions } from "./queue/schedules.js";
import type { TypeLimit, TypeLimitOptions } from "./queue/type-limits.js";
import type { DeadLetterJob, Job, JobSpec, ListJobsQuery, QueueMetrics } from "./queue/types.js";
import type { WaitOptions } from "./queue/waits.js";
import type { JobCatalog } from "./typed/catalog.js";
import type { JobMap, JobTypeName, TypedJobSpec, TypedRegisteredHandler, UntypedJobs } from "./typed/map.js";
import { registerBuiltinHandlers } from "./worker/handlers/index.js";
import { HandlerRegistry, type RegisteredHandler } from "./worker/registry.js";
import { Worker } from "./worker/worker.js";

export { buildApp } from "./api/app.js";
export { configFromEnv, type ResolvedConfig, resolveConfig, type TaskQueueOptions } from "./config.js";
export { type EmbeddedDatabase, startEmbeddedPostgres } from "./db/embedded.js";
export { poolStarvationWarning } from "./pool-warning.js";
export * from "./public-errors.js";
export type {
  DeadLetterBatch,
  DeadLetterFilter,
  DeadLetterQuery,
  ListDeadLettersQuery,
  ReplayOutcome,
  RetryOutcome,
} from "./queue/dead-letters.js";
export { LIMITS } from "./queue/job-shape.js";
export type { TypePause, TypeState, TypeStateLimit, UnhandledType } from "./queue/job-types.js";
export {
  type DeadLetterBatchOptions,
  type EnqueuedJob,
  type EnqueueOptions,
  Ledger,
  type LedgerOptions,
  MAX_BATCH_JOBS,
} from "./queue/ledger.js";
export type { FailedStatus } from "./queue/lock-session.js";
export { type PoolingMode, type PoolingProbe, probePooling } from "./queue/pooling.js";
export type { PruneReport, RetentionPolicy } from "./queue/retention.js";
export type { Schedule, ScheduleOptions, SchedulePassPolicy, SchedulePassReport } from "./queue/schedules.js";
export type { TypeLimit, TypeLimitOptions } from "./queue/type-limits.js";
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
export { FINAL_STATUSES, JobWaitTimeoutError, type WaitOptions } from "./queue/waits.js";
export * from "./typed/index.js";
export { builtinHandlers, registerBuiltinHandlers } from "./worker/handlers/index.js";
export {
  type HandlerJob,
  HandlerRegistry,
  type JobHandler,
  type RegisteredHandler,
  type SandboxedHandler,
  type SandboxedHandlerSpec,
  sandboxed,
} from "./worker/registry.js";
export {
  type FencedWrite,
  type FenceReason,
  type JobCompletedEvent,
  type StopReport,
  Worker,
  type WorkerEvents,
  type WorkerHealth,
  type WorkerState,
} from "./worker/worker.js";

/** Options of {@link TaskQueue}: the config fields, plus an optional pool, logger and job catalog. */
export interface TaskQueueInit<M extends JobMap = UntypedJobs> extends TaskQueueOptions {
  /**
   * Job types and their payload schemas ({@link defineJobs}): types the queue like a job map, and
   * checks each payload at enqueue (a refused one is a `JobValidationError`, HTTP 422 through
   * `buildApp({ ledger: queue.ledger, … })`). Default none.
   */
  jobs?: JobCatalog<M>;
  /** Use this pool instead of creating one (it is not closed by {@link TaskQueue.close}). */
  pool?: pg.Pool;
  /** Use this pino logger. Default: a new one at `logLevel`. */
  logger?: Logger;
  /** Register the eight built-in handlers (noop, echo, slow, ...). Default false. */
  builtinHandlers?: boolean;
}

/**
 * One queue: enqueue and read jobs, register handlers, run workers. `M` is its job map (see
 * src/typed/map.ts): `new TaskQueue<{ send_email: { to: string } }>(…)` types `register`, the
 * `addJob` family and handlers; `new TaskQueue({ jobs: defineJobs(…) })` takes it from a catalog.
 * Without one, any type and JSON payload compile.
 */
export class TaskQueue<M extends JobMap = UntypedJobs> {
  readonly config: ResolvedConfig & { databaseUrl: string };
  readonly ledger: Ledger;
  readonly registry = new HandlerRegistry();
  readonly logger: Logger;
  readonly pool: pg.Pool;
  private readonly ownsPool: boolean;
  private readonly workers = new Set<Worker>();
  private pooling: Promise<PoolingProbe> | null = null;

  /** @throws {ConfigError} on a bad option, or when `databaseUrl` is missing. */
  constructor(options: TaskQueueInit<M> = {}) {
    const { pool, logger, builtinHandlers, jobs, ...rest } = options;
    const config = resolveConfig(rest);
    if (!config.databaseUrl)
      throw new ConfigError("databaseUrl", "is required (a PostgreSQL connection string)");
    this.config = config as ResolvedConfig & { databaseUrl: string };
    this.logger = logger ?? createLogger(config.logLevel, "taskqueue", config.logFormat);
    this.ownsPool = !pool;
    this.pool =
      pool ??
      createPool({
        connectionString: config.databaseUrl,
        max: config.poolSize,
        connectTimeoutSeconds: config.connectTimeoutSeconds,
        statementTimeoutSeconds: config.statementTimeoutSeconds,
        namedStatements: config.databasePooling !== "transaction",
      });
    this.pool.on("error", (error) =>
      this.logger.warn({ err: idleConnectionError(error) }, "idle pool connection failed"),
    );
    this.ledger = new Ledger(this.pool, config.schema, { ...config, payloadChecker: jobs });
    if (builtinHandlers) registerBuiltinHandlers(this.registry);
  }

  /**
   * The pooling mode in front of PostgreSQL: as `databasePooling` declares it, or, for `"auto"`,
   * probed once (src/queue/pooling.ts: on `connections`, which a worker passes from its first lock
   * session, or on two short connections of its own) and remembered. Behind a
   * transaction- or statement-mode pooler this queue's own pool sends its statements unnamed from
   * then on, and workers refuse to start. The CLI calls it at start; a library user behind
   * PgBouncer in transaction mode sets `databasePooling: "transaction"` instead (README, "PgBouncer").
   * @throws the probe's connection error.
   */
  detectPooling(connections?: readonly [ProbeQuery, ProbeQuery]): Promise<PoolingProbe> {
    this.pooling ??= resolvePooling(this.config, connections).then((probe) => {
      if (probe.mode !== "session") setNamedStatements(this.pool, false);
      return probe;
    });
    this.pooling.catch(() => {
      this.pooling = null;
    });
    return this.pooling;
  }

  /** Creates or upgrades the schema. Safe to run from many processes at once. */
  migrate(): Promise<MigrateResult> {
    return migrate(this.pool, this.config);
  }

  /**
   * Registers the handler of a job type: a function (runs in the worker's process) or
   * `sandboxed(moduleUrl)` (runs in a child process; see the README's "Sandboxed handlers").
   * @throws {HandlerTypeError} on an empty or too long type. @throws {HandlerModuleError} on a
   *   sandboxed handler's missing module.
   */
  register<K extends JobTypeName<M>>(type: K, handler: TypedRegisteredHandler<M, K>): this {
    this.registry.register(type, handler as RegisteredHandler);
    return this;
  }

  /** See {@link Ledger.addJob}. Pass `{client}` to enqueue inside your own transaction. */
  addJob(spec: TypedJobSpec<M>, options?: EnqueueOptions): Promise<Job> {
    return this.ledger.addJob(spec as JobSpec, options);
  }

  /** See {@link Ledger.addJobs}: up to 10,000 jobs, one statement, all or nothing. */
  addJobs(specs: readonly TypedJobSpec<M>[], options?: EnqueueOptions): Promise<Job[]> {
    return this.ledger.addJobs(specs as readonly JobSpec[], options);
  }

  /** See {@link Ledger.addJobIds}: {@link addJobs} answering only the new ids, in the order given. */
  addJobIds(specs: readonly TypedJobSpec<M>[], options?: EnqueueOptions): Promise<number[]> {
    return this.ledger.addJobIds(specs as readonly JobSpec[], options);
  }

  /** See {@link Ledger.addJobReporting}: {@link addJob}, saying whether its idempotency key created it. */
  addJobReporting(spec: TypedJobSpec<M>, options?: EnqueueOptions): Promise<EnqueuedJob> {
    return this.ledger.addJobReporting(spec as JobSpec, options);
  }

  /** See {@link Ledger.addJobsReporting}: {@link addJobs}, saying for each job whether it was created. */
  addJobsReporting(specs: readonly TypedJobSpec<M>[], options?: EnqueueOptions): Promise<EnqueuedJob[]> {
    return this.ledger.addJobsReporting(specs as readonly JobSpec[], options);
  }

  getJob(id: number): Promise<Job | null> {
    return this.ledger.getJob(id);
  }

  /** See {@link Ledger.waitForJob}: the job once done, dead or cancelled (LISTEN, not a poll). */
  waitForJob(id: number, options?: WaitOptions): Promise<Job> {
    return this.ledger.waitForJob(id, options);
  }

  listJobs(query?: ListJobsQuery): Promise<Job[]> {
    return this.ledger.listJobs(query);
  }

  /** See {@link Ledger.cancelJob} (pending, claimed or running). @throws {JobNotFoundError} @throws {JobStateConflictError} when finished. */
  cancelJob(id: number): Promise<Job> {
    return this.ledger.cancelJob(id);
  }

  /**
   * See {@link Ledger.retryJob}: a pending job waiting for its run time becomes due now, a dead one
   * is replayed. @throws {JobNotFoundError} @throws {JobStateConflictError} when held or finished.
   */
  retryJob(id: number): Promise<RetryOutcome> {
    return this.ledger.retryJob(id);
  }

  getDeadLetter(jobId: number): Promise<DeadLetterJob | null> {
    return this.ledger.getDeadLetter(jobId);
  }

  /** See {@link Ledger.listDeadLetters}: newest death first, filtered and paged. */
  listDeadLetters(query?: ListDeadLettersQuery): Promise<DeadLetterJob[]> {
    return this.ledger.listDeadLetters(query);
  }

  /** See {@link Ledger.replayDeadLetter}. @throws {DeadLetterNotFoundError} */
  replayDeadLetter(jobId: number): Promise<ReplayOutcome> {
    return this.ledger.replayDeadLetter(jobId);
  }

  /** See {@link Ledger.replayDeadLetters}: one bounded batch; call again while `more`. */
  replayDeadLetters(filter: DeadLetterFilter, options?: DeadLetterBatchOptions): Promise<DeadLetterBatch> {
    return this.ledger.replayDeadLetters(filter, options);
  }

  /** See {@link Ledger.discardDeadLetter}. @throws {DeadLetterNotFoundError} */
  discardDeadLetter(jobId: number): Promise<DeadLetterJob> {
    return this.ledger.discardDeadLetter(jobId);
  }

  /** See {@link Ledger.discardDeadLetters}: one bounded batch; call again while `more`. */
  discardDeadLetters(filter: DeadLetterQuery, options?: DeadLetterBatchOptions): Promise<DeadLetterBatch> {
    return this.ledger.discardDeadLetters(filter, options);
  }

  /**
   * One pruning pass now with this queue's retention options (see {@link Ledger.pruneHistory});
   * workers that run the reaper also prune every `pruneIntervalSeconds`.
   */
  pruneHistory(signal?: AbortSignal): Promise<PruneReport> {
    return this.ledger.pruneHistory({ ...this.config, signal });
  }

  /**
   * Creates or replaces a cron schedule (see {@link Ledger.schedule}): every tick of `cron` (5
   * fields, or 6 with seconds first) in `options.timezone` (default UTC) enqueues one job, however
   * many worker processes run. @throws {JobValidationError} naming each bad field.
   */
  async schedule(name: string, cron: string, options: ScheduleOptions): Promise<Schedule> {
    return (await this.ledger.schedule(name, cron, options)).schedule;
  }

  getSchedule(name: string): Promise<Schedule | null> {
    return this.ledger.getSchedule(name);
  }

  listSchedules(page?: { limit?: number; offset?: number }): Promise<Schedule[]> {
    return this.ledger.listSchedules(page);
  }

  /** Deletes a schedule (its jobs stay). @throws {ScheduleNotFoundError} */
  unschedule(name: string): Promise<Schedule> {
    return this.ledger.unschedule(name);
  }

  /** Pauses `type` on every host (running jobs finish; idempotent). @throws {JobValidationError} bad name. */
  pauseType(type: string): Promise<TypePause> {
    return this.ledger.pauseType(type);
  }

  /** Resumes `type` and wakes the workers (idempotent). @throws {JobValidationError} bad name. */
  resumeType(type: string): Promise<TypePause> {
    return this.ledger.resumeType(type);
  }

  /**
   * Sets (creates or replaces) the global limits of `type`, over all workers on every host: at most
   * `maxRunning` jobs held (claimed or running) and `ratePerSecond` claims per second, in bursts of
   * at most `burst` (default ceil(ratePerSecond)); a limit left out is removed. Workers apply it
   * from their next claim. @throws {JobValidationError} naming each bad field or the type.
   */
  setTypeLimit(type: string, limit: TypeLimitOptions): Promise<TypeLimit> {
    return this.ledger.setTypeLimit(type, limit);
  }

  /** Removes the limits of `type` (idempotent); returns them, or null. @throws {JobValidationError} bad name. */
  removeTypeLimit(type: string): Promise<TypeLimit | null> {
    return this.ledger.removeTypeLimit(type);
  }

  /** Every limited type's limits (type order). */
  typeLimits(): Promise<TypeLimit[]> {
    return this.ledger.typeLimits();
  }

  /** Every known type: paused, limits, pending jobs, oldest due pending age, live workers (type order). */
  listTypes(): Promise<TypeState[]> {
    return this.ledger.listTypes(this.config.staleThresholdSeconds);
  }

  metrics(): Promise<QueueMetrics> {
    return this.ledger.metrics(this.config.staleThresholdSeconds);
  }

  /**
   * Starts a worker for the registered handlers (claims only those types).
   * @param overrides config fields for this worker (e.g. `workerCount`); `types` restricts the
   *   claimed types to a subset of the registered ones; `runReaper` false leaves reaping to others;
   *   `runScheduler` false leaves enqueueing schedules' ticks to other processes.
   * @throws {HandlerMissingError} when no handler is registered or a listed type has none.
   * @throws {SchemaVersionError} when the schema is older than this code needs.
   */
  async startWorker(
    overrides: TaskQueueOptions & { runReaper?: boolean; runScheduler?: boolean; types?: string[] } = {},
  ): Promise<Worker> {
    const { runReaper, runScheduler, types, ...rest } = overrides;
    const config = resolveConfig({ ...this.config, ...rest }) as TaskQueue["config"];
    const starvation = poolStarvationWarning(config.workerCount, this.pool.options.max ?? 10);
    if (starvation) this.logger.warn({ workerCount: config.workerCount }, starvation);
    const worker = new Worker({
      config,
      registry: this.registry,
      ledger: this.ledger,
      logger: this.logger,
      runReaper,
      runScheduler,
      types,
      pooling: (connections) => this.detectPooling(connections),
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

  /** Stops every worker this queue started (graceful), ends the waits, closes the pool if it owns it. */
  async close(): Promise<void> {
    await Promise.all([...this.workers].map((w) => w.stop()));
    await this.ledger.closeWaits();
    if (this.ownsPool) await this.pool.end();
  }
}
