/**
 * The job ledger's shared-pool side: enqueue, read, cancel, retry, dead letters, metrics, reap,
 * prune. Everything a worker does while it holds jobs goes through its {@link LockSession} instead.
 */
import type pg from "pg";
import { cancelOne, readCancelled } from "./cancel.js";
import { checkJobId, checkListQuery } from "./checks.js";
import { DeadLetterLedger } from "./dead-letter-ledger.js";
import type { LedgerOptions } from "./enqueue.js";
import { HandlerWriteLedger } from "./handler-writes.js";
import { type HeldLock, type RelationSize, readHeldLocks, readRelationSizes } from "./inspect.js";
import { LIMITS } from "./job-shape.js";
import { pauseJobType, readTypeStates, resumeJobType, type TypePause, type TypeState } from "./job-types.js";
import { lockClassFor } from "./lock-class.js";
import { readThroughput, readTypeDepths, type ThroughputMinute, type TypeDepth } from "./overview.js";
import {
  addJobEvents,
  type OutOfStatementEvent,
  readMetrics,
  readTypeFigures,
  readWorkers,
  type TypeFigures,
} from "./reads.js";
import { type PruneReport, pruneHistory, type RetentionPolicy } from "./retention.js";
import {
  deleteSchedule,
  readSchedule,
  readSchedules,
  runSchedulePass,
  type Schedule,
  type ScheduleOptions,
  type SchedulePassPolicy,
  type SchedulePassReport,
  upsertSchedule,
} from "./schedules.js";
import { heldJobLocks } from "./sql/claim.js";
import { reapStaleJobs } from "./sql/finish.js";
import { getJob, listJobs, ping, pruneStats, schemaVersion } from "./sql/read.js";
import {
  readTypeLimits,
  removeJobTypeLimit,
  setJobTypeLimit,
  type TypeLimit,
  type TypeLimitOptions,
} from "./type-limits.js";
import type { Job, ListJobsQuery, QueueMetrics, WorkerInfo } from "./types.js";
import type { FieldNaming } from "./validate.js";
import { JobWaits, type JobWaitsOptions, type WaitOptions } from "./waits.js";

export { type DeadLetterBatchOptions, DeadLetterLedger } from "./dead-letter-ledger.js";
export {
  type EnqueuedJob,
  EnqueueLedger,
  type EnqueueOptions,
  type LedgerOptions,
  MAX_BATCH_JOBS,
} from "./enqueue.js";
export { METRICS_WINDOW_SECONDS, type OutOfStatementEvent } from "./reads.js";

/** Retry policy applied to failed and reaped attempts (DESIGN.md §4). */
export interface BackoffPolicy {
  backoffBaseSeconds: number;
  backoffMaxSeconds: number;
  backoffJitter: boolean;
}

/** Payloads and results larger than this (bytes of JSON text) are left out of job lists: `LIMITS.listValueBytes`. */
export const LIST_VALUE_MAX_BYTES = LIMITS.listValueBytes;

/** A job as a read returns it: the select lists name every column as its field (sql/columns.ts). */
type JobRow = Job & pg.QueryResultRow;

/** SQLSTATE undefined_table. */
const UNDEFINED_TABLE = "42P01";

export class Ledger extends DeadLetterLedger {
  /** Advisory-lock class of this schema (see lock-class.ts). */
  readonly lockClass: number;

  /** The waits for jobs' outcomes, sharing one LISTEN connection (waits.ts). */
  private readonly waits: JobWaits;

  /** A running handler's own fenced writes: progress, transactional completion (handler-writes.ts). */
  readonly handlerWrites: HandlerWriteLedger;

  /**
   * @param pool shared pool for reads and autocommit writes.
   * @param schema schema holding the tables (already migrated).
   * @param options backpressure caps (0 or absent: none), the allow-list of job types and the
   *   idempotency keys' window (see {@link LedgerOptions}); the connect deadline of the waits'
   *   LISTEN connection (`connectTimeoutSeconds`, default 5).
   */
  constructor(pool: pg.Pool, schema: string, options?: LedgerOptions & JobWaitsOptions) {
    super(pool, schema, options);
    this.lockClass = lockClassFor(schema);
    this.waits = new JobWaits(pool, schema, { connectTimeoutSeconds: options?.connectTimeoutSeconds });
    this.handlerWrites = new HandlerWriteLedger(pool, schema);
  }

  /**
   * Resolves with job `id` once it is done, dead or cancelled (at once if it already is), woken by
   * LISTEN (see waits.ts); `onProgress` hears each new progress value meanwhile.
   * @throws {JobValidationError} bad id or `timeoutMs` (1 to 2^31 − 1, default 30,000).
   * @throws {JobNotFoundError} no such job. @throws {JobWaitTimeoutError} not final within `timeoutMs`
   *   (its `job` is the job as last read).
   */
  waitForJob(id: number, options?: WaitOptions): Promise<Job> {
    return this.waits.wait(id, options);
  }

  /** Ends every wait (rejected) and closes their LISTEN connection. Never throws. */
  closeWaits(): Promise<void> {
    return this.waits.close();
  }

  /** The job with this id, or null. @throws {JobValidationError} if `id` is not a positive integer. */
  async getJob(id: number): Promise<Job | null> {
    checkJobId(id);
    const { rows } = await this.pool.query<JobRow>({ ...getJob(this.schema), values: [id] });
    return rows[0] ?? null;
  }

  /**
   * Jobs, newest first.
   * @throws {JobValidationError} for an unknown status, limit outside `LIMITS.listLimit` (1–1000), negative offset or invalid date.
   */
  async listJobs(query: ListJobsQuery = {}): Promise<Job[]> {
    checkListQuery(query);
    const { limit = LIMITS.listLimit.default, offset = 0, status, createdAfter } = query;
    const { rows } = await this.pool.query<JobRow>({
      ...listJobs(this.schema),
      values: [status ?? null, query.type ?? null, createdAfter ?? null, limit, offset, LIST_VALUE_MAX_BYTES],
    });
    return rows;
  }

  /**
   * Cancels a pending job and returns it (status `cancelled`): `DELETE /jobs/{id}`.
   * @throws {JobNotFoundError} no such job.
   * @throws {JobStateConflictError} the job is not pending (claimed, running or finished).
   */
  cancelPendingJob(id: number): Promise<Job> {
    return cancelOne(this.pool, this.schema, id, "pending");
  }

  /**
   * Cancels a pending, claimed or running job and returns it (status `cancelled`; DESIGN.md §4,
   * "Cancel"). A held job's worker, on any host, is told by NOTIFY (its heartbeat as fallback),
   * aborts the handler's signal with a `JobCancelledError`, and never writes the handler's outcome.
   * @throws {JobNotFoundError} no such job.
   * @throws {JobStateConflictError} the job is finished (done, dead or cancelled).
   */
  cancelJob(id: number): Promise<Job> {
    return cancelOne(this.pool, this.schema, id, "live");
  }

  /** Which of `ids` are cancelled now (a worker checks the jobs whose claim it found gone). */
  cancelledAmong(ids: readonly number[]): Promise<Set<number>> {
    return readCancelled(this.pool, this.schema, ids);
  }

  /**
   * Queue figures from the database (DESIGN.md §8).
   * @param workerLivenessSeconds a worker counts as active if its heartbeat is younger than this.
   */
  metrics(workerLivenessSeconds: number): Promise<QueueMetrics> {
    return readMetrics(this.pool, this.schema, workerLivenessSeconds);
  }

  /**
   * Counters, histograms and live gauges by job type (schema version 8) for the Prometheus
   * exposition, database-wide: the same from every process.
   */
  typeFigures(): Promise<TypeFigures> {
    return readTypeFigures(this.pool, this.schema);
  }

  /**
   * Adds event counts to the database's counters by job type (job_totals): writes a worker could not
   * hand in (`fenced`), handlers overdue after an abort (`overdue`), the only events counted outside
   * the statement that causes them; a statement that moves jobs counts in itself (sql/accounting.ts).
   * @throws {JobValidationError} for another event or a count that is not a whole number ≥ 0.
   */
  addJobEvents(
    counts: readonly { type: string; event: OutOfStatementEvent; count: number }[],
  ): Promise<void> {
    return addJobEvents(this.pool, this.schema, counts);
  }

  /**
   * One reaper pass (DESIGN.md §6): held jobs with a heartbeat older than `staleThresholdSeconds`
   * whose advisory lock nobody holds become a failed attempt (pending with backoff, or dead).
   * Returns the reclaimed jobs as they are now. Safe to run from any number of processes at once.
   */
  async reapStale(policy: BackoffPolicy & { staleThresholdSeconds: number; limit?: number }): Promise<Job[]> {
    const { rows } = await this.pool.query<JobRow>({
      ...reapStaleJobs(this.schema),
      values: [
        policy.staleThresholdSeconds,
        policy.limit ?? 1000,
        this.lockClass,
        policy.backoffBaseSeconds,
        policy.backoffMaxSeconds,
        policy.backoffJitter,
      ],
    });
    await this.pool.query({ ...pruneStats(this.schema), values: [3600] });
    return rows;
  }

  /**
   * One pruning pass (DESIGN.md §3, "Retention"), unless another process runs one: done and
   * cancelled jobs completed more than `retainDoneSeconds` ago, and dead ones (with their
   * dead-letter entries) more than `retainDeadSeconds` ago, are deleted in bounded batches with
   * pauses between them; counters and history metrics keep their values.
   * @throws the first database error.
   */
  pruneHistory(policy: RetentionPolicy): Promise<PruneReport> {
    return pruneHistory(this.pool, this.schema, this.lockClass, policy);
  }

  /**
   * Creates or replaces the schedule `name` (DESIGN.md §3, "Schedules"): every tick of `cron` in
   * `options.timezone` enqueues one job of `options.type`. A new schedule, or one whose cron or
   * zone changed, starts now; other changes keep its place. `created` is false when it replaced one.
   * @throws {JobValidationError} naming each bad field (name, cron, timezone, the job's fields).
   */
  schedule(
    name: string,
    cron: string,
    options: ScheduleOptions,
    naming: FieldNaming = "camel",
  ): Promise<{ schedule: Schedule; created: boolean }> {
    return upsertSchedule(this.pool, this.schema, { name, cron, options, naming }, this.allowedTypes);
  }

  /** The schedule named `name`, or null. @throws {JobValidationError} for a malformed name. */
  getSchedule(name: string): Promise<Schedule | null> {
    return readSchedule(this.pool, this.schema, name);
  }

  /** Schedules by name: `limit` (1–1000, default 1000) from `offset`. */
  listSchedules(page?: { limit?: number; offset?: number }): Promise<Schedule[]> {
    return readSchedules(this.pool, this.schema, page);
  }

  /** Deletes a schedule and returns it; the jobs it enqueued stay. @throws {ScheduleNotFoundError} */
  unschedule(name: string): Promise<Schedule> {
    return deleteSchedule(this.pool, this.schema, name);
  }

  /**
   * One scheduler pass: enqueues every schedule's due ticks, one job per tick whichever processes
   * pass at once (see schedules.ts). Worker processes run it; tests may call it directly.
   */
  runSchedulePass(policy: SchedulePassPolicy): Promise<SchedulePassReport> {
    return runSchedulePass(this.pool, this.schema, policy);
  }

  /** Worker processes with a heartbeat younger than `livenessSeconds`, with the jobs each holds. */
  listWorkers(livenessSeconds: number): Promise<WorkerInfo[]> {
    return readWorkers(this.pool, this.schema, livenessSeconds);
  }

  /**
   * Live jobs per type (pending, due, claimed, running, oldest due age, live workers of the type),
   * busiest first; reads only the live jobs' partial indexes, however long the history.
   * @param workerLivenessSeconds a worker counts as live if its heartbeat is younger than this.
   */
  typeDepths(workerLivenessSeconds: number): Promise<TypeDepth[]> {
    return readTypeDepths(this.pool, this.schema, workerLivenessSeconds);
  }

  /**
   * Pauses `type` on every host: claims skip it from the next one on (running jobs finish).
   * Idempotent. @throws {JobValidationError} for a bad type name.
   */
  pauseType(type: string): Promise<TypePause> {
    return pauseJobType(this.pool, this.schema, type);
  }

  /** Resumes `type` and wakes the workers. Idempotent. @throws {JobValidationError} for a bad type name. */
  resumeType(type: string): Promise<TypePause> {
    return resumeJobType(this.pool, this.schema, type);
  }

  /**
   * Sets (creates or replaces) the global limits of `type` (type-limits.ts): workers on every host
   * hold at most `maxRunning` of its jobs and claim at most `ratePerSecond` per second.
   * @throws {JobValidationError} naming each bad field (spelt per `naming`).
   */
  setTypeLimit(type: string, limit: TypeLimitOptions, naming: FieldNaming = "camel"): Promise<TypeLimit> {
    return setJobTypeLimit(this.pool, this.schema, type, limit, naming);
  }

  /** Removes the limits of `type` (idempotent); returns them, or null. @throws {JobValidationError} bad name. */
  removeTypeLimit(type: string): Promise<TypeLimit | null> {
    return removeJobTypeLimit(this.pool, this.schema, type);
  }

  /** Every limited type's limits, in type order. */
  typeLimits(): Promise<TypeLimit[]> {
    return readTypeLimits(this.pool, this.schema);
  }

  /**
   * Every known type (pending jobs, paused, limited, or claimed by a live worker), in type order: paused,
   * pending jobs, oldest due pending age, live workers.
   * @param workerLivenessSeconds a worker counts as live if its heartbeat is younger than this.
   */
  listTypes(workerLivenessSeconds: number): Promise<TypeState[]> {
    return readTypeStates(this.pool, this.schema, workerLivenessSeconds);
  }

  /** Finished attempts per minute over the last `minutes` (1–60) minutes, oldest first, zeros included. */
  throughput(minutes: number): Promise<ThroughputMinute[]> {
    return readThroughput(this.pool, this.schema, minutes);
  }

  /**
   * The schema's applied migration version: 0 when nothing was ever migrated (no migrations table,
   * or no schema). @throws any other database error.
   */
  async schemaVersion(): Promise<number> {
    try {
      const { rows } = await this.pool.query<{ version: number }>(schemaVersion(this.schema));
      return rows[0]?.version ?? 0;
    } catch (error) {
      // No migrations table (or no schema): nothing was ever migrated here.
      if ((error as { code?: string }).code === UNDEFINED_TABLE) return 0;
      throw error;
    }
  }

  /** Resolves if the database answers and the schema is migrated; rejects otherwise. */
  async ping(): Promise<void> {
    await this.pool.query(ping(this.schema));
  }

  /** Jobs whose advisory lock some session holds: `[{jobKey, pid}]`, jobKey = id mod 2^31. */
  async heldJobLocks(): Promise<{ jobKey: number; pid: number }[]> {
    const { rows } = await this.pool.query<{ job_key: number; pid: number }>({
      ...heldJobLocks(this.schema),
      values: [this.lockClass],
    });
    return rows.map((r) => ({ jobKey: r.job_key, pid: r.pid }));
  }

  /** Up to `limit` job advisory locks held now, oldest claim first, each with the job it belongs to. */
  heldLocks(limit = 200): Promise<HeldLock[]> {
    return readHeldLocks(this.pool, this.schema, limit);
  }

  /** The schema's tables and indexes with their sizes on disk, largest first. */
  relationSizes(): Promise<RelationSize[]> {
    return readRelationSizes(this.pool, this.schema);
  }
}
