/**
 * The writes a running handler makes to its own job (issue 13, items 4 and 5), each fenced like
 * every write after a claim (DESIGN.md §5): it applies only while the claim's worker and attempt
 * still hold the job (claimed or running).
 * - progress: `job.progress(value)`, on the shared pool;
 * - transactional completion: `job.complete(client, result)`, on the application's client inside
 *   its own transaction, with the worker's own completion statement (counters and histograms
 *   included), so the job is done exactly when the application's transaction commits;
 * - the check that follows it, once the handler has returned: did that transaction commit?
 */
import type pg from "pg";
import { namedStatements, type Queryable, unnamedQueryable } from "../db/pool.js";
import { JobClaimLostError, JobValidationError } from "../errors.js";
import { LIMITS } from "./job-shape.js";
import { writeDone } from "./sql/finish.js";
import { numberArray } from "./sql/params.js";
import { claimStanding, writeProgress } from "./sql/waits.js";
import { jsonBytes, toStorableJson } from "./validate.js";

/** The claim a handler writes under: its job, attempt and worker (lane) id. */
export interface HandlerClaim {
  id: number;
  attempt: number;
  workerId: string;
}

/** Where a claim stands once its handler, which completed it in a transaction, has returned. */
export type ClaimStanding =
  /** Done by this attempt: the transaction committed. */
  | "completed"
  /** Still held by this attempt: the transaction rolled back (or never committed). */
  | "held"
  /** Neither: another writer took it (cancelled, reclaimed) or it no longer exists. */
  | "lost";

/**
 * A value as storable JSON text, at most `maxBytes`.
 * @throws {JobValidationError} naming `field` if it is not JSON-serialisable or too large.
 */
export function storableJson(value: unknown, field: string, maxBytes: number): string {
  const stored = toStorableJson(value, field);
  if ("problem" in stored) throw new JobValidationError([stored.problem]);
  const bytes = jsonBytes(stored.json);
  if (bytes > maxBytes)
    throw new JobValidationError([
      { field, message: `is ${bytes} bytes as JSON; the most it may be is ${maxBytes}` },
    ]);
  return stored.json;
}

export class HandlerWriteLedger {
  constructor(
    private readonly pool: pg.Pool,
    private readonly schema: string,
  ) {}

  /**
   * Stores `value` as the job's progress (the same statement notifies the job's waiters).
   * @throws {JobValidationError} `progress` not JSON or over `LIMITS.progressBytes` (8 KiB).
   * @throws {JobClaimLostError} the fence refused it: nothing was written.
   */
  async writeProgress(claim: HandlerClaim, value: unknown): Promise<void> {
    const json = storableJson(value, "progress", LIMITS.progressBytes);
    const { rowCount } = await this.pool.query({
      ...writeProgress(this.schema),
      values: [claim.id, claim.attempt, claim.workerId, json],
    });
    if (rowCount !== 1) throw new JobClaimLostError(claim.id, "progress");
  }

  /**
   * Completes the job on `client`, inside the caller's transaction: done with `resultJson` (valid
   * JSON text), counted, its run-alone flag cleared; `runMs` the handler's run time so far.
   * @throws {JobClaimLostError} the fence refused it: nothing was written.
   */
  async completeOn(client: Queryable, claim: HandlerClaim, resultJson: string, runMs: number): Promise<void> {
    const target = namedStatements(this.pool) ? client : unnamedQueryable(client);
    const { rows } = await target.query<{ refused_ids: (string | number)[] }>({
      ...writeDone(this.schema),
      values: [
        numberArray([claim.id]),
        numberArray([claim.attempt]),
        `[${resultJson}]`,
        numberArray([runMs]),
        claim.workerId,
        "{NULL}", // no row version: the job is found by its id (sql/finish.ts)
      ],
    });
    if ((rows[0]?.refused_ids.length ?? 1) > 0) throw new JobClaimLostError(claim.id, "complete");
  }

  /** Where `claim` stands now (see {@link ClaimStanding}). */
  async standing(claim: HandlerClaim): Promise<ClaimStanding> {
    const { rows } = await this.pool.query<{ held: boolean; completed: boolean }>({
      ...claimStanding(this.schema),
      values: [claim.id, claim.attempt, claim.workerId],
    });
    const row = rows[0];
    if (row?.completed) return "completed";
    return row?.held ? "held" : "lost";
  }
}
