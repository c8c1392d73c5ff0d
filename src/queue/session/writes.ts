/**
 * The fenced writes of a lock session, on its write connection: claimed → running, done, failed
 * attempt, give-back, heartbeat. Each takes a batch (`unnest`) and applies only to jobs whose claim
 * this worker still owns (the fence); none releases a lock (the lock session does that once the
 * write has committed).
 */
import type { BackoffPolicy } from "../ledger.js";
import { deleteWorker, heartbeat, markRunning } from "../sql/claim.js";
import { writeDone, writeFailures, writeReleases } from "../sql/finish.js";
import { jsonArrayType, jsonTextArray, numberArray, tidArray } from "../sql/params.js";
import type { JobStatus } from "../types.js";
import type { SerialConnection } from "./connection.js";

/** Identifies one claim: the fence every later write must pass. */
export interface ClaimRef {
  id: number;
  attempt: number;
}

/** A handler's result, to be written as the job's outcome. */
export interface Completion extends ClaimRef {
  /** Result as JSON text. */
  resultJson: string;
  /** Handler run time, milliseconds. */
  runMs: number;
}

/** A failed attempt, to be written as a retry or a dead letter. */
export interface Failure extends ClaimRef {
  error: string;
  runMs: number;
  /** The handler asked for no more retries (a permanent error): the job dies now. Default false. */
  permanent?: boolean;
}

/** Where a failed attempt leaves its job: `pending` (will retry) or `dead`. */
export type FailedStatus = Extract<JobStatus, "pending" | "dead">;

/** Outcome of a fenced write for one job. `applied` false: the claim was lost, nothing changed. */
export interface WriteOutcome {
  id: number;
  applied: boolean;
  /** For failures: `pending` (will retry) or `dead`. */
  status?: FailedStatus;
  /** For failures that will retry: seconds until the job is due again. */
  retry_in_seconds?: number;
}

/** The worker's row in `workers`, written with every heartbeat. */
export interface WorkerIdentity {
  id: string;
  host: string;
  pid: number;
  types: string[];
  concurrency: number;
}

/** What a committed batch says, and whom its unlock wakes (comma-separated types, or null). */
export interface BatchWritten<T> {
  outcome: T;
  wakeTypes: string | null;
}

/** The one row of a batched completion or release: ids the fence refused (bigint[] as strings). */
interface RefusedRow {
  refused_ids: (string | number)[];
  /** Releases only: types given back, to wake once unlocked. */
  due_types?: string | null;
}

const refusedIds = (rows: RefusedRow[]): number[] => (rows[0]?.refused_ids ?? []).map(Number);

/** Where the writes go and whose fence they pass. */
export interface WriteTarget {
  writes: SerialConnection;
  schema: string;
  workerId: string;
}

/** Fenced claimed → running. Returns the ids that moved. */
export async function writeRunning(target: WriteTarget, refs: readonly ClaimRef[]): Promise<Set<number>> {
  const { rows } = await target.writes.query<{ id: number }>({
    ...markRunning(target.schema),
    values: [numberArray(refs.map((r) => r.id)), numberArray(refs.map((r) => r.attempt)), target.workerId],
  });
  return new Set(rows.map((r) => r.id));
}

/**
 * Fenced done (`ids`: the batch's ids, computed once by the caller; `rowVersions`: each job's row
 * version as its claim returned it, or null, in the batch's order; see sql/finish.ts). Resolves
 * once committed with the ids the fence refused (usually none).
 */
export async function writeDoneBatch(
  target: WriteTarget,
  batch: readonly Completion[],
  ids: readonly number[],
  rowVersions: readonly (string | null)[],
): Promise<BatchWritten<number[]>> {
  const results = jsonTextArray(batch.map((c) => c.resultJson));
  const { rows } = await target.writes.query<RefusedRow>({
    ...writeDone(target.schema, jsonArrayType(results)),
    values: [
      numberArray(ids),
      numberArray(batch.map((c) => c.attempt)),
      results,
      numberArray(batch.map((c) => c.runMs)),
      target.workerId,
      tidArray(rowVersions),
    ],
  });
  return { outcome: refusedIds(rows), wakeTypes: null };
}

/** Fenced failed attempts (retry with backoff, or dead-letter): one outcome per job. */
export async function writeFailureBatch(
  target: WriteTarget,
  batch: readonly Failure[],
  ids: readonly number[],
  policy: BackoffPolicy,
): Promise<BatchWritten<WriteOutcome[]>> {
  const { rows } = await target.writes.query<WriteOutcome & { due_types: string | null }>({
    ...writeFailures(target.schema),
    values: [
      numberArray(ids),
      numberArray(batch.map((f) => f.attempt)),
      batch.map((f) => f.error),
      numberArray(batch.map((f) => f.runMs)),
      target.workerId,
      policy.backoffBaseSeconds,
      policy.backoffMaxSeconds,
      policy.backoffJitter,
      `{${batch.map((f) => (f.permanent ? "t" : "f")).join(",")}}`,
    ],
  });
  return { outcome: rows.map(({ due_types: _, ...o }) => o), wakeTypes: rows[0]?.due_types ?? null };
}

/** Fenced give-back to pending (no attempt counted): the ids the fence refused. */
export async function writeReleaseBatch(
  target: WriteTarget,
  refs: readonly ClaimRef[],
  ids: readonly number[],
): Promise<BatchWritten<number[]>> {
  const { rows } = await target.writes.query<RefusedRow>({
    ...writeReleases(target.schema),
    values: [numberArray(ids), numberArray(refs.map((r) => r.attempt)), target.workerId],
  });
  return { outcome: refusedIds(rows), wakeTypes: rows[0]?.due_types ?? null };
}

/**
 * Upserts the worker row and touches every held job, within the heartbeat deadline (a heartbeat
 * that misses it loses the session). Returns the ids still held.
 */
export async function writeHeartbeat(
  target: WriteTarget,
  worker: WorkerIdentity,
  fencedWrites: number,
  held: readonly ClaimRef[],
): Promise<Set<number>> {
  const { rows } = await target.writes.query<{ id: number }>(
    {
      ...heartbeat(target.schema),
      values: [
        worker.id,
        worker.host,
        worker.pid,
        worker.types,
        worker.concurrency,
        fencedWrites,
        numberArray(held.map((r) => r.id)),
        numberArray(held.map((r) => r.attempt)),
      ],
    },
    "roundTrip",
  );
  return new Set(rows.map((r) => r.id));
}

/** Deletes the worker row (clean shutdown). */
export async function deleteWorkerRow(target: WriteTarget): Promise<void> {
  await target.writes.query({ ...deleteWorker(target.schema), values: [target.workerId] });
}
