/**
 * Writing new jobs. {@link insertJobs} inserts any number in one statement; {@link EnqueueBatcher}
 * gathers single enqueues that arrive together (concurrent `addJob` calls, concurrent
 * `POST /jobs` requests) into such statements, so fifty callers in flight cost a few commits, not
 * fifty. Each caller still gets its own job, or its own error.
 */
import type { Queryable } from "../db/pool.js";
import { DatabaseUnavailableError } from "../errors.js";
import { newJob } from "./job-shape.js";
import { enqueueJobs } from "./sql/enqueue.js";
import { jsonArrayType, jsonTextArray, numberArray } from "./sql/params.js";
import type { Job, JsonValue } from "./types.js";
import type { NormalizedJobSpec } from "./validate.js";

/**
 * Inserts validated jobs (all or nothing; in one statement, or as {@link insertRows} says) and
 * returns them in the given order.
 */
export async function insertJobs(
  db: Queryable,
  schema: string,
  jobs: readonly NormalizedJobSpec[],
  transactions: TransactionSource | null = null,
): Promise<Job[]> {
  const rows = await insertRows(db, schema, jobs, transactions);
  return rows.map((row, i) => insertedJob(jobs[i] as NormalizedJobSpec, row));
}

/**
 * Most characters of payload JSON one insert statement carries. A batch with more (a 32 MiB POST
 * /jobs/batch) is inserted by several statements in one transaction, so that its payloads are not
 * held as one more text of the batch's size, and again as the driver's message, while it is sent:
 * that was a third of what such a request cost in memory (docs/benchmarks.md, api-memory). Below
 * it (a 1,000-job batch of small payloads), one statement without a transaction, as before.
 */
export const INSERT_STATEMENT_MAX_CHARS = 4 * 1024 * 1024;

/** Where {@link insertRows} can take a connection of its own for a transaction (a pool). */
export interface TransactionSource {
  connect(): Promise<Queryable & { release(error?: Error | boolean): void }>;
}

/**
 * Inserts validated jobs, all or nothing, and returns the database's part of each (id and times),
 * in the given order. One statement when the payloads' JSON is at most
 * {@link INSERT_STATEMENT_MAX_CHARS} long, or when `transactions` is null (the caller's client,
 * whose transaction state is the caller's); else consecutive slices of the batch, each within that
 * size, in one transaction on a connection of `transactions`. Errors: whatever the statements
 * throw (nothing is written then).
 */
export function insertRows(
  db: Queryable,
  schema: string,
  jobs: readonly NormalizedJobSpec[],
  transactions: TransactionSource | null = null,
): Promise<InsertedRow[]> {
  return insertSliced(db, jobs, transactions, (on, slice, payloads) =>
    insertStatement(on, schema, slice, payloads),
  );
}

/**
 * One insert statement of `jobs` on `db`, its payloads sent as `payloads` (jsonb binary, see
 * `jsonbArrayBytes`) when given, else as one JSON text; the rows in the given order.
 */
export type InsertStatement<R> = (
  db: Queryable,
  jobs: readonly NormalizedJobSpec[],
  payloads?: Buffer,
) => Promise<R[]>;

/**
 * Runs `insert` over `jobs` as {@link insertRows} does: once, or over consecutive slices of at most
 * {@link INSERT_STATEMENT_MAX_CHARS} of payload JSON in one transaction on a connection of
 * `transactions` (all or nothing). The rows in the given order.
 */
export async function insertSliced<R>(
  db: Queryable,
  jobs: readonly NormalizedJobSpec[],
  transactions: TransactionSource | null,
  insert: InsertStatement<R>,
): Promise<R[]> {
  const slices = transactions ? slicesBySize(jobs, INSERT_STATEMENT_MAX_CHARS) : [jobs];
  if (slices.length === 1 || !transactions) return insert(db, jobs);
  const client = await transactions.connect();
  let broken: Error | undefined;
  try {
    await client.query("BEGIN");
    const rows: R[] = [];
    for (const slice of slices) {
      const payloads = jsonbArrayBytes(slice);
      for (const row of await insert(client, slice, payloads)) rows.push(row);
      releaseBytes(payloads);
    }
    await client.query("COMMIT");
    return rows;
  } catch (error) {
    await client.query("ROLLBACK").catch((rollback: unknown) => {
      broken = rollback instanceof Error ? rollback : new Error(String(rollback));
    });
    throw error;
  } finally {
    // A connection whose rollback failed is in an unknown state: the pool drops it.
    client.release(broken);
  }
}

/** Consecutive slices of `jobs` whose payloads' JSON adds up to at most `maxChars` (at least one job each). */
function slicesBySize(jobs: readonly NormalizedJobSpec[], maxChars: number): NormalizedJobSpec[][] {
  const slices: NormalizedJobSpec[][] = [];
  let slice: NormalizedJobSpec[] = [];
  let chars = 0;
  for (const job of jobs) {
    const length = job.payloadJson.length + 1;
    if (slice.length > 0 && chars + length > maxChars) {
      slices.push(slice);
      slice = [];
      chars = 0;
    }
    slice.push(job);
    chars += length;
  }
  if (slice.length > 0) slices.push(slice);
  return slices;
}

/**
 * The payloads of `jobs` as one JSON array in jsonb's binary format (a version byte, 1, then the
 * UTF-8 text), in a buffer of its own: sent as it is (node-postgres sends a Buffer parameter in
 * binary), and freed once sent ({@link releaseBytes}) rather than left to the collector.
 */
function jsonbArrayBytes(jobs: readonly NormalizedJobSpec[]): Buffer {
  let bytes = 3 + Math.max(0, jobs.length - 1);
  for (const job of jobs) bytes += Buffer.byteLength(job.payloadJson);
  const out = Buffer.allocUnsafeSlow(bytes);
  out[0] = 1;
  let offset = out.write("[", 1, "latin1");
  offset += 1;
  jobs.forEach((job, i) => {
    if (i > 0) offset += out.write(",", offset, "latin1");
    offset += out.write(job.payloadJson, offset, "utf8");
  });
  out.write("]", offset, "latin1");
  return out;
}

/**
 * Frees the memory of `bytes` (a buffer of its own, from `Buffer.allocUnsafeSlow`, no longer
 * needed) now: its ArrayBuffer is transferred to a short-lived owner that the next minor collection
 * frees, instead of waiting in the old generation for a full one. `bytes` is empty afterwards.
 */
function releaseBytes(bytes: Buffer): void {
  const { buffer } = bytes;
  if (bytes.byteOffset !== 0 || buffer.byteLength !== bytes.length) return;
  structuredClone(buffer, { transfer: [buffer as ArrayBuffer] });
}

/**
 * One insert statement of `jobs`; the rows in the given order. The payloads go as `payloads`
 * ({@link jsonbArrayBytes}) when given, else as one JSON text.
 */
async function insertStatement(
  db: Queryable,
  schema: string,
  jobs: readonly NormalizedJobSpec[],
  payloadBytes?: Buffer,
): Promise<InsertedRow[]> {
  const payloads = payloadBytes ?? jsonTextArray(jobs.map((j) => j.payloadJson));
  const { rows } = await db.query<InsertedRow>({
    ...enqueueJobs(schema, typeof payloads === "string" ? jsonArrayType(payloads) : "jsonb"),
    values: [
      jobs.map((j) => j.type),
      payloads,
      numberArray(jobs.map((j) => j.priority)),
      numberArray(jobs.map((j) => j.maxRetries)),
      jobs.map((j) => j.runAt),
    ],
  });
  // Identity values are handed out in insertion order, which follows the input order.
  return rows.sort((a, b) => a.id - b.id);
}

/** The database's part of a new job: its id and times (epoch milliseconds). */
export interface InsertedRow {
  id: number;
  run_at_ms: number;
  created_at_ms: number;
}

/**
 * A new job as the insert knows it, before it is built into a {@link Job}: the validated spec (its
 * payload as the JSON text that was stored) and the database's part. Answering with these instead
 * of jobs spares parsing every payload back (see src/api/job-response.ts `newJobsAnswer`).
 * `existing`: the spec named an idempotency key that a job already held, and this is that job, as
 * read after the insert (nothing was created for the spec; `row` is that job's).
 */
export interface InsertedJob {
  spec: NormalizedJobSpec;
  row: InsertedRow;
  existing?: Job;
}

/**
 * A new job as stored: the database's id and times, the rest as sent, and every other field as a
 * new job holds it (job-shape.ts `newJob`). The payload is parsed back from the JSON text that was
 * stored, as a read of the row would return it.
 */
export function insertedJob(job: NormalizedJobSpec, row: InsertedRow): Job {
  return newJob({
    id: row.id,
    type: job.type,
    payload: JSON.parse(job.payloadJson) as JsonValue,
    priority: job.priority,
    maxRetries: job.maxRetries,
    runAt: new Date(row.run_at_ms),
    createdAt: new Date(row.created_at_ms),
    idempotencyKey: job.idempotencyKey,
    timeoutSeconds: job.timeoutSeconds,
  });
}

interface PendingInsert {
  job: NormalizedJobSpec;
  resolve: (job: Job) => void;
  reject: (error: unknown) => void;
}

/**
 * Coalesces concurrent single inserts. Everything added during one event-loop turn goes out as one
 * statement, with at most `maxInFlight` statements at once; while they are busy, new jobs wait and
 * leave together. A failed batch is retried one job at a time, so one caller's failure is never
 * another's.
 */
export class EnqueueBatcher {
  private queue: PendingInsert[] = [];
  private inFlight = 0;
  private scheduled = false;

  constructor(
    private readonly db: Queryable,
    private readonly schema: string,
    private readonly maxInFlight = 4,
    private readonly maxBatch = 1000,
  ) {}

  /** Inserts `job`, resolving with the stored row once its batch commits. */
  add(job: NormalizedJobSpec): Promise<Job> {
    return new Promise<Job>((resolve, reject) => {
      this.queue.push({ job, resolve, reject });
      this.schedule();
    });
  }

  private schedule(): void {
    if (this.scheduled || this.inFlight >= this.maxInFlight || this.queue.length === 0) return;
    this.scheduled = true;
    setImmediate(() => {
      this.scheduled = false;
      while (this.inFlight < this.maxInFlight && this.queue.length > 0) {
        void this.send(this.queue.splice(0, this.maxBatch));
      }
    });
  }

  private async send(batch: PendingInsert[]): Promise<void> {
    this.inFlight++;
    try {
      const stored = await insertJobs(
        this.db,
        this.schema,
        batch.map((p) => p.job),
      );
      for (const [i, p] of batch.entries()) p.resolve(stored[i] as Job);
    } catch (error) {
      // The database out of reach is no job's fault: retrying each job alone would only wait again.
      if (batch.length === 1 || error instanceof DatabaseUnavailableError)
        for (const p of batch) p.reject(error);
      else
        await Promise.all(
          batch.map((p) =>
            insertJobs(this.db, this.schema, [p.job]).then(
              ([stored]) => p.resolve(stored as Job),
              (single: unknown) => p.reject(single),
            ),
          ),
        );
    } finally {
      this.inFlight--;
      this.schedule();
    }
  }
}
