/**
 * The job ledger's shared-pool side: enqueue, read, cancel, metrics, reap. Everything a worker
 * does while it holds jobs goes through its {@link LockSession} instead.
 */
import type pg from "pg";
import type { Queryable } from "../db/pool.js";
import {
  BatchTooLargeError,
  type FieldProblem,
  JobNotFoundError,
  JobStateConflictError,
  JobValidationError,
  TaskQueueError,
} from "../errors.js";
import { PendingCap, type PendingCaps } from "./capacity.js";
import {
  EnqueueBatcher,
  type InsertedJob,
  type InsertedRow,
  insertedJob,
  insertJobs,
  insertRows,
  type TransactionSource,
} from "./insert.js";
import { integerRangeMessage, LIMITS } from "./job-shape.js";
import { lockClassFor } from "./lock-class.js";
import { heldJobLocks } from "./sql/claim.js";
import { enqueueJob } from "./sql/enqueue.js";
import { reapStaleJobs } from "./sql/finish.js";
import {
  cancelJob,
  getDeadLetter,
  getJob,
  listDeadLetters,
  listJobs,
  listWorkers,
  metrics,
  ping,
  pruneStats,
  schemaVersion,
} from "./sql/read.js";
import {
  type DeadLetterJob,
  JOB_STATUSES,
  type Job,
  type JobSpec,
  type JobStatus,
  type ListJobsQuery,
  type QueueMetrics,
  type WorkerInfo,
} from "./types.js";
import { type FieldNaming, type NormalizedJobSpec, validateJobSpec } from "./validate.js";

/** Retry policy applied to failed and reaped attempts (DESIGN.md §4). */
export interface BackoffPolicy {
  backoffBaseSeconds: number;
  backoffMaxSeconds: number;
  backoffJitter: boolean;
}

/** Options of enqueue calls. */
export interface EnqueueOptions {
  /**
   * Run the insert on this client, e.g. inside the application's own transaction: the job then
   * exists (and workers are notified) only if that transaction commits.
   */
  client?: Queryable;
  /** Spelling of field names in validation errors: `"camel"` (default) or the HTTP API's `"snake"`. */
  naming?: FieldNaming;
}

/** Most jobs one {@link Ledger.addJobs} call accepts (one statement, all-or-nothing): `LIMITS.batchJobs`. */
export const MAX_BATCH_JOBS = LIMITS.batchJobs;

/** Payloads and results larger than this (bytes of JSON text) are left out of job lists: `LIMITS.listValueBytes`. */
export const LIST_VALUE_MAX_BYTES = LIMITS.listValueBytes;

/** A job as a read returns it: the select lists name every column as its field (sql/columns.ts). */
type JobRow = Job & pg.QueryResultRow;

/** SQLSTATE undefined_table. */
const UNDEFINED_TABLE = "42P01";

/** Length of the trailing window of the rate metrics, seconds. */
export const METRICS_WINDOW_SECONDS = 60;

/** @throws {JobValidationError} naming `id` unless it is a positive safe integer. */
function checkJobId(id: number): void {
  if (!Number.isSafeInteger(id) || id < 1)
    throw new JobValidationError([{ field: "id", message: "must be a positive integer" }]);
}

/**
 * Validates a batch of specs, field names prefixed `jobs/<index>/`.
 * @throws {BatchTooLargeError} for more than MAX_BATCH_JOBS specs.
 * @throws {JobValidationError} listing every bad field of every spec.
 */
function validateBatch(specs: readonly JobSpec[], options: EnqueueOptions): NormalizedJobSpec[] {
  if (specs.length > MAX_BATCH_JOBS) throw new BatchTooLargeError(specs.length, MAX_BATCH_JOBS);
  const problems: FieldProblem[] = [];
  const jobs: NormalizedJobSpec[] = [];
  specs.forEach((spec, index) => {
    try {
      jobs.push(validateJobSpec(spec, `jobs/${index}/`, options.naming));
    } catch (error) {
      if (error instanceof JobValidationError) problems.push(...error.problems);
      else throw error;
    }
  });
  if (problems.length > 0) throw new JobValidationError(problems);
  return jobs;
}

export class Ledger {
  /** Advisory-lock class of this schema (see lock-class.ts). */
  readonly lockClass: number;

  private readonly batcher: EnqueueBatcher;

  /** The pending-jobs caps' counter (capacity.ts); null when both caps are 0, so enqueues skip it. */
  private readonly cap: PendingCap | null;

  /**
   * @param pool shared pool for reads and autocommit writes.
   * @param schema schema holding the tables (already migrated).
   * @param caps backpressure: `maxPendingJobs` / `maxPendingJobsPerType` (0 or absent: no cap).
   */
  constructor(
    private readonly pool: pg.Pool,
    readonly schema: string,
    caps: PendingCaps = { maxPendingJobs: 0, maxPendingJobsPerType: 0 },
  ) {
    this.lockClass = lockClassFor(schema);
    this.batcher = new EnqueueBatcher(pool, schema);
    this.cap =
      caps.maxPendingJobs > 0 || caps.maxPendingJobsPerType > 0 ? new PendingCap(pool, schema, caps) : null;
  }

  /**
   * Enqueues one job and returns it as stored. Concurrent calls without `client` share insert
   * statements (see EnqueueBatcher); with `client`, the insert runs alone on that client.
   * @throws {JobValidationError} on a bad spec; nothing is written.
   * @throws {QueueFullError} a pending-jobs cap is reached (capacity.ts); nothing is written.
   */
  async addJob(spec: JobSpec, options: EnqueueOptions = {}): Promise<Job> {
    const job = validateJobSpec(spec, "", options.naming);
    if (this.cap) await this.cap.admit([job.type]);
    if (!options.client) return this.batcher.add(job);
    const { rows } = await options.client.query<InsertedRow>({
      ...enqueueJob(this.schema),
      values: [job.type, job.payloadJson, job.priority, job.maxRetries, job.runAt],
    });
    return insertedJob(job, rows[0] as InsertedRow);
  }

  /**
   * Enqueues up to {@link MAX_BATCH_JOBS} jobs in one statement, all or nothing, and returns them
   * in the order given. Field names in errors are prefixed `jobs/<index>/`.
   * @throws {JobValidationError} if any spec is bad (every bad field listed); nothing is written.
   * @throws {BatchTooLargeError} for more than MAX_BATCH_JOBS specs; nothing is written.
   * @throws {QueueFullError} the batch would pass a pending-jobs cap; nothing is written.
   */
  async addJobs(specs: readonly JobSpec[], options: EnqueueOptions = {}): Promise<Job[]> {
    const jobs = validateBatch(specs, options);
    if (jobs.length === 0) return [];
    if (this.cap) await this.cap.admit(jobs.map((job) => job.type));
    return insertJobs(options.client ?? this.pool, this.schema, jobs, this.transactions(options));
  }

  /**
   * {@link addJobs}, answering only the new jobs' ids, in the order given: no job is built or its
   * payload parsed back for the answer. For bulk loaders (POST /jobs/batch with
   * `Prefer: return=minimal`).
   * @throws {JobValidationError} if any spec is bad (every bad field listed); nothing is written.
   * @throws {BatchTooLargeError} for more than MAX_BATCH_JOBS specs; nothing is written.
   * @throws {QueueFullError} the batch would pass a pending-jobs cap; nothing is written.
   */
  async addJobIds(specs: readonly JobSpec[], options: EnqueueOptions = {}): Promise<number[]> {
    const jobs = validateBatch(specs, options);
    if (jobs.length === 0) return [];
    if (this.cap) await this.cap.admit(jobs.map((job) => job.type));
    const rows = await insertRows(options.client ?? this.pool, this.schema, jobs, this.transactions(options));
    return rows.map((row) => row.id);
  }

  /**
   * {@link addJobs}, answering each new job as its validated spec and the database's part
   * ({@link InsertedJob}, in the order given) instead of a built {@link Job}: no payload is parsed
   * back. For answers written straight from the stored JSON texts (POST /jobs/batch).
   * @throws {JobValidationError} if any spec is bad (every bad field listed); nothing is written.
   * @throws {BatchTooLargeError} for more than MAX_BATCH_JOBS specs; nothing is written.
   * @throws {QueueFullError} the batch would pass a pending-jobs cap; nothing is written.
   */
  async addInsertedJobs(specs: readonly JobSpec[], options: EnqueueOptions = {}): Promise<InsertedJob[]> {
    const jobs = validateBatch(specs, options);
    if (jobs.length === 0) return [];
    if (this.cap) await this.cap.admit(jobs.map((job) => job.type));
    const rows = await insertRows(options.client ?? this.pool, this.schema, jobs, this.transactions(options));
    return rows.map((row, i) => ({ spec: jobs[i] as NormalizedJobSpec, row }));
  }

  /** Where a large batch may open its own transaction: the pool, unless the caller gave its client. */
  private transactions(options: EnqueueOptions): TransactionSource | null {
    return options.client ? null : this.pool;
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
    const problems: FieldProblem[] = [];
    const { limit = LIMITS.listLimit.default, offset = 0, status, createdAfter } = query;
    if (status !== undefined && !JOB_STATUSES.includes(status))
      problems.push({ field: "status", message: `must be one of ${JOB_STATUSES.join(", ")}` });
    if (!Number.isInteger(limit) || limit < LIMITS.listLimit.min || limit > LIMITS.listLimit.max)
      problems.push({ field: "limit", message: integerRangeMessage(LIMITS.listLimit) });
    if (!Number.isInteger(offset) || offset < 0)
      problems.push({ field: "offset", message: "must be an integer ≥ 0" });
    if (
      createdAfter !== undefined &&
      !(createdAfter instanceof Date && !Number.isNaN(createdAfter.getTime()))
    )
      problems.push({ field: "created_after", message: "must be a valid date" });
    if (problems.length > 0) throw new JobValidationError(problems);
    const { rows } = await this.pool.query<JobRow>({
      ...listJobs(this.schema),
      values: [status ?? null, query.type ?? null, createdAfter ?? null, limit, offset, LIST_VALUE_MAX_BYTES],
    });
    return rows;
  }

  /**
   * Cancels a pending job and returns it (status `cancelled`).
   * @throws {JobNotFoundError} no such job.
   * @throws {JobStateConflictError} the job is not pending (claimed, running or finished).
   */
  async cancelJob(id: number): Promise<Job> {
    checkJobId(id);
    const { rows } = await this.pool.query<JobRow & { cancelled: boolean }>({
      ...cancelJob(this.schema),
      values: [id],
    });
    const row = rows[0];
    if (!row) throw new JobNotFoundError(id);
    if (!row.cancelled) throw new JobStateConflictError(id, row.status, "cancel");
    const { cancelled: _, ...job } = row;
    return job;
  }

  /** The dead-letter entry of a job, or null. */
  async getDeadLetter(jobId: number): Promise<DeadLetterJob | null> {
    checkJobId(jobId);
    const { rows } = await this.pool.query<DeadLetterJob & pg.QueryResultRow>({
      ...getDeadLetter(this.schema),
      values: [jobId],
    });
    return rows[0] ?? null;
  }

  /**
   * Queue figures from the database (DESIGN.md §8).
   * @param workerLivenessSeconds a worker counts as active if its heartbeat is younger than this.
   */
  async metrics(workerLivenessSeconds: number): Promise<QueueMetrics> {
    const { rows } = await this.pool.query<{
      depth: Record<string, number>;
      active_workers: number;
      fenced_writes: number;
      dead_letter_count: number;
      done_in_window: number;
      failed_in_window: number;
      exec_seconds: number;
      p50: number | null;
      p90: number | null;
      p99: number | null;
      samples: number;
    }>({ ...metrics(this.schema), values: [METRICS_WINDOW_SECONDS, workerLivenessSeconds] });
    const r = rows[0];
    if (!r) throw new TaskQueueError("metrics_unavailable", "the metrics query returned no row");
    const depth = Object.fromEntries(JOB_STATUSES.map((s) => [s, Number(r.depth[s] ?? 0)])) as Record<
      JobStatus,
      number
    >;
    const attempts = r.done_in_window + r.failed_in_window;
    return {
      depth,
      activeWorkers: r.active_workers,
      jobsPerSecond: r.done_in_window / METRICS_WINDOW_SECONDS,
      errorRate: attempts === 0 ? 0 : r.failed_in_window / attempts,
      averageExecutionSeconds: r.done_in_window === 0 ? null : r.exec_seconds / r.done_in_window,
      executionSecondsQuantiles: { p50: r.p50, p90: r.p90, p99: r.p99, samples: r.samples },
      deadLetterCount: r.dead_letter_count,
      fencedWrites: r.fenced_writes,
      windowSeconds: METRICS_WINDOW_SECONDS,
    };
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

  /** Worker processes with a heartbeat younger than `livenessSeconds`, with the jobs each holds. */
  async listWorkers(livenessSeconds: number): Promise<WorkerInfo[]> {
    const { rows } = await this.pool.query<{
      id: string;
      host: string;
      pid: number;
      types: string[];
      concurrency: number;
      fenced_writes: number;
      started_at: Date;
      heartbeat_at: Date;
      held: number;
    }>({ ...listWorkers(this.schema), values: [livenessSeconds] });
    return rows.map((r) => ({
      id: r.id,
      host: r.host,
      pid: r.pid,
      types: r.types,
      concurrency: r.concurrency,
      fencedWrites: r.fenced_writes,
      startedAt: r.started_at,
      heartbeatAt: r.heartbeat_at,
      heldJobs: r.held,
    }));
  }

  /** The `limit` most recent dead-letter entries, newest first. */
  async listDeadLetters(limit = 20): Promise<DeadLetterJob[]> {
    const { rows } = await this.pool.query<DeadLetterJob & pg.QueryResultRow>({
      ...listDeadLetters(this.schema),
      values: [limit],
    });
    return rows;
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
}
