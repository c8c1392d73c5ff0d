/**
 * The enqueue side of the {@link Ledger} (which extends it): single jobs (gathered into shared
 * statements by the EnqueueBatcher), batches, idempotency keys (idempotency.ts), the allow-list of
 * job types and the pending-jobs caps (capacity.ts). An enqueue without a key, with no allow-list
 * and no caps, does what it did before any of them: a set lookup and a cap check skipped on null,
 * one comparison for the key.
 */
import type pg from "pg";
import { namedStatements, type Queryable, unnamedQueryable } from "../db/pool.js";
import { type FieldProblem, JobValidationError } from "../errors.js";
import { PendingCap, type PendingCaps } from "./capacity.js";
import { checkAllowedTypes, validateBatch } from "./checks.js";
import { IDEMPOTENCY_WINDOW_SECONDS, insertKeyedJobs } from "./idempotency.js";
import {
  EnqueueBatcher,
  type InsertedJob,
  type InsertedRow,
  insertedJob,
  insertJobs,
  insertRows,
  type TransactionSource,
} from "./insert.js";
import { LIMITS } from "./job-shape.js";
import { enqueueJob } from "./sql/enqueue.js";
import type { Job, JobSpec } from "./types.js";
import { type FieldNaming, type NormalizedJobSpec, validateJobSpec } from "./validate.js";

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

/** What an enqueue that reports did: the job, and whether this call created it. */
export interface EnqueuedJob {
  job: Job;
  /** False: the spec's idempotency key was held by `job` already, and nothing was created. */
  created: boolean;
}

/**
 * Checks payloads against per-type schemas at enqueue (a `JobCatalog`, src/typed/catalog.ts).
 * Returns every problem, fields named `payload/…` (`jobs/<index>/payload/…` in a batch).
 */
export interface PayloadChecker {
  checkPayloads(specs: readonly JobSpec[], batch: boolean): FieldProblem[];
}

/** Options of a {@link Ledger} beyond its pool and schema (a `ResolvedConfig` has them all). */
export interface LedgerOptions extends PendingCaps {
  /** Checks payloads at enqueue (a `JobCatalog`): a refused one is a `JobValidationError` (422). Default none. */
  payloadChecker?: PayloadChecker | undefined;
  /**
   * Enqueue only jobs of these types: another type is refused with a `JobValidationError` naming
   * `type` (HTTP 422). Default: any type.
   */
  allowedJobTypes?: readonly string[] | undefined;
  /** How long a job holds its idempotency key, seconds; 0: for as long as it exists. Default 86,400. */
  idempotencyWindowSeconds?: number;
}

/** An inserted job as the library answers it, with whether it was created. */
function reported({ spec, row, existing }: InsertedJob): EnqueuedJob {
  return { job: existing ?? insertedJob(spec, row), created: existing === undefined };
}

/** Enqueues jobs into `schema` through `pool` (or a caller's client). See the top of this file. */
export class EnqueueLedger {
  private readonly batcher: EnqueueBatcher;

  /** The pending-jobs caps' counter (capacity.ts); null when both caps are 0, so enqueues skip it. */
  private readonly cap: PendingCap | null;

  /** The allowed job types; null (any type) unless `allowedJobTypes` is set, so enqueues skip it. */
  protected readonly allowedTypes: ReadonlySet<string> | null;

  private readonly idempotencyWindowSeconds: number;

  /** The payload schemas' check; null (no check) unless a catalog was given. */
  private readonly payloadChecker: PayloadChecker | null;

  /**
   * @param pool shared pool for reads and autocommit writes.
   * @param schema schema holding the tables (already migrated).
   * @param options see {@link LedgerOptions} (default: no caps, any type, a day's window).
   */
  constructor(
    protected readonly pool: pg.Pool,
    readonly schema: string,
    options: LedgerOptions = { maxPendingJobs: 0, maxPendingJobsPerType: 0 },
  ) {
    this.batcher = new EnqueueBatcher(pool, schema);
    this.cap =
      options.maxPendingJobs > 0 || options.maxPendingJobsPerType > 0
        ? new PendingCap(pool, schema, options)
        : null;
    this.allowedTypes = options.allowedJobTypes ? new Set(options.allowedJobTypes) : null;
    this.idempotencyWindowSeconds = options.idempotencyWindowSeconds ?? IDEMPOTENCY_WINDOW_SECONDS;
    this.payloadChecker = options.payloadChecker ?? null;
  }

  /** Validates one spec, then its payload against the catalog's schema. @throws {JobValidationError} */
  private validateOne(spec: JobSpec, naming: FieldNaming | undefined): NormalizedJobSpec {
    const job = validateJobSpec(spec, "", naming);
    if (this.payloadChecker) this.checkPayloads([spec], false);
    return job;
  }

  /** Validates a batch, then its payloads against the catalog's schemas. @throws as {@link validateBatch} */
  private validateMany(specs: readonly JobSpec[], naming: FieldNaming | undefined): NormalizedJobSpec[] {
    const jobs = validateBatch(specs, naming);
    if (this.payloadChecker) this.checkPayloads(specs, true);
    return jobs;
  }

  /** @throws {JobValidationError} listing every payload the catalog refuses. */
  private checkPayloads(specs: readonly JobSpec[], batch: boolean): void {
    const problems = (this.payloadChecker as PayloadChecker).checkPayloads(specs, batch);
    if (problems.length > 0) throw new JobValidationError(problems);
  }

  /**
   * Enqueues one job and returns it as stored: with an idempotency key that a job holds, that job
   * (nothing is created). Concurrent calls without `client` and without a key share insert
   * statements (see EnqueueBatcher); with `client`, the insert runs alone on that client.
   * @throws {JobValidationError} on a bad spec, or a type the allow-list refuses; nothing is written.
   * @throws {QueueFullError} a pending-jobs cap is reached (capacity.ts); nothing is written.
   * @throws {IdempotencyConflictError} its key is held by a job enqueued with another body.
   */
  async addJob(spec: JobSpec, options: EnqueueOptions = {}): Promise<Job> {
    const job = this.validateOne(spec, options.naming);
    if (this.allowedTypes) checkAllowedTypes([job], this.allowedTypes, false);
    if (this.cap) await this.cap.admit([job.type]);
    if (needsKeyedInsert(job)) {
      const [stored] = await this.insertKeyed([job], options, false);
      const { spec: storedSpec, row, existing } = stored as InsertedJob;
      return existing ?? insertedJob(storedSpec, row);
    }
    if (!options.client) return this.batcher.add(job);
    const { rows } = await this.target(options).query<InsertedRow>({
      ...enqueueJob(this.schema),
      values: [job.type, job.payloadJson, job.priority, job.maxRetries, job.runAt],
    });
    return insertedJob(job, rows[0] as InsertedRow);
  }

  /**
   * {@link addJob}, saying whether the job was created (false: its idempotency key was held). Not
   * batched with concurrent calls.
   * @throws as {@link addJob}.
   */
  async addJobReporting(spec: JobSpec, options: EnqueueOptions = {}): Promise<EnqueuedJob> {
    const job = this.validateOne(spec, options.naming);
    const [inserted] = await this.insertValidated([job], options, false);
    return reported(inserted as InsertedJob);
  }

  /**
   * {@link addJobs}, saying for each job whether it was created (false: its idempotency key was
   * held, or repeats the key of an earlier job of the batch).
   * @throws as {@link addJobs}.
   */
  async addJobsReporting(specs: readonly JobSpec[], options: EnqueueOptions = {}): Promise<EnqueuedJob[]> {
    return (await this.addInsertedJobs(specs, options)).map(reported);
  }

  /**
   * Enqueues up to {@link MAX_BATCH_JOBS} jobs in one statement, all or nothing, and returns them
   * in the order given (a job whose idempotency key was held: that job). Field names in errors are
   * prefixed `jobs/<index>/`. Jobs of one batch that repeat a key with the same body are one job.
   * @throws {JobValidationError} if any spec is bad (every bad field listed), a type the allow-list
   *   refuses, or a key repeated with another body; nothing is written.
   * @throws {BatchTooLargeError} for more than MAX_BATCH_JOBS specs; nothing is written.
   * @throws {QueueFullError} the batch would pass a pending-jobs cap; nothing is written.
   * @throws {IdempotencyConflictError} a key is held by a job enqueued with another body; nothing is written.
   */
  async addJobs(specs: readonly JobSpec[], options: EnqueueOptions = {}): Promise<Job[]> {
    const jobs = this.validateMany(specs, options.naming);
    if (jobs.length === 0) return [];
    if (!jobs.some(needsKeyedInsert)) {
      await this.admit(jobs, true);
      return insertJobs(this.target(options), this.schema, jobs, this.transactions(options));
    }
    const inserted = await this.insertValidated(jobs, options, true);
    return inserted.map(({ spec, row, existing }) => existing ?? insertedJob(spec, row));
  }

  /**
   * {@link addJobs}, answering only the jobs' ids, in the order given: no job is built or its
   * payload parsed back for the answer. For bulk loaders (POST /jobs/batch with
   * `Prefer: return=minimal`).
   * @throws as {@link addJobs}.
   */
  async addJobIds(specs: readonly JobSpec[], options: EnqueueOptions = {}): Promise<number[]> {
    const jobs = this.validateMany(specs, options.naming);
    if (jobs.length === 0) return [];
    if (jobs.some(needsKeyedInsert))
      return (await this.insertValidated(jobs, options, true)).map(({ row }) => row.id);
    await this.admit(jobs, true);
    const rows = await insertRows(this.target(options), this.schema, jobs, this.transactions(options));
    return rows.map((row) => row.id);
  }

  /**
   * {@link addJobs}, answering each job as its validated spec and the database's part
   * ({@link InsertedJob}, in the order given) instead of a built {@link Job}: no payload is parsed
   * back. For answers written straight from the stored JSON texts (POST /jobs/batch). A job whose
   * idempotency key was held is answered with that job as `existing`.
   * @throws as {@link addJobs}.
   */
  async addInsertedJobs(specs: readonly JobSpec[], options: EnqueueOptions = {}): Promise<InsertedJob[]> {
    const jobs = this.validateMany(specs, options.naming);
    if (jobs.length === 0) return [];
    return this.insertValidated(jobs, options, true);
  }

  /** Inserts validated jobs (a batch: field names prefixed), keyed or not, after the allow-list and caps. */
  private async insertValidated(
    jobs: NormalizedJobSpec[],
    options: EnqueueOptions,
    batch: boolean,
  ): Promise<InsertedJob[]> {
    await this.admit(jobs, batch);
    if (jobs.some(needsKeyedInsert)) return this.insertKeyed(jobs, options, batch);
    const rows = await insertRows(this.target(options), this.schema, jobs, this.transactions(options));
    return rows.map((row, i) => ({ spec: jobs[i] as NormalizedJobSpec, row }));
  }

  /** The allow-list, then the pending-jobs caps. */
  private async admit(jobs: readonly NormalizedJobSpec[], batch: boolean): Promise<void> {
    if (this.allowedTypes) checkAllowedTypes(jobs, this.allowedTypes, batch);
    if (this.cap) await this.cap.admit(jobs.map((job) => job.type));
  }

  /** Inserts jobs of which some name an idempotency key (see idempotency.ts). */
  private insertKeyed(
    jobs: readonly NormalizedJobSpec[],
    options: EnqueueOptions,
    batch: boolean,
  ): Promise<InsertedJob[]> {
    return insertKeyedJobs(this.target(options), this.schema, jobs, {
      windowSeconds: this.idempotencyWindowSeconds,
      transactions: this.transactions(options),
      naming: options.naming ?? "camel",
      batch,
    });
  }

  /**
   * Where the statements go: the caller's client, or the pool. The caller's client is sent unnamed
   * statements when the pool is (behind a transaction pooler, src/db/pool.ts `withoutName`): its
   * own transaction may run on any server session.
   */
  private target(options: EnqueueOptions): Queryable {
    if (!options.client) return this.pool;
    return namedStatements(this.pool) ? options.client : unnamedQueryable(options.client);
  }

  /** Where a large batch may open its own transaction: the pool, unless the caller gave its client. */
  private transactions(options: EnqueueOptions): TransactionSource | null {
    return options.client ? null : this.pool;
  }
}

/**
 * Whether a job takes the keyed insert (`enqueueKeyedJobs`): it names an idempotency key or a
 * timeout. The common job (neither) keeps the plain insert and its parameters.
 */
function needsKeyedInsert(job: NormalizedJobSpec): boolean {
  return job.idempotencyKey !== null || job.timeoutSeconds !== null;
}
