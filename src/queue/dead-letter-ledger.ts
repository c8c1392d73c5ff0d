/**
 * The ledger's dead letters and retry now (DESIGN.md §4, "Dead letters", "Replay", "Retry now"):
 * a layer of {@link Ledger} between enqueueing (enqueue.ts) and the rest.
 */
import type pg from "pg";
import { checkJobId } from "./checks.js";
import {
  type DeadLetterBatch,
  type DeadLetterFilter,
  type DeadLetterQuery,
  discardBatch,
  discardOne,
  type ListDeadLettersQuery,
  listDeadLetters,
  type ReplayOutcome,
  type RetryOutcome,
  replayBatch,
  replayOne,
  retryNow,
} from "./dead-letters.js";
import { EnqueueLedger } from "./enqueue.js";
import { getDeadLetter } from "./sql/read.js";
import type { DeadLetterJob } from "./types.js";
import type { FieldNaming } from "./validate.js";

/** Options of a bulk replay or discard. */
export interface DeadLetterBatchOptions {
  /** Most entries taken by this call (one statement), 1–10,000. Default 1,000. */
  limit?: number;
  /** Spelling of field names in validation errors: `"camel"` (default) or the HTTP API's `"snake"`. */
  naming?: FieldNaming;
}

export class DeadLetterLedger extends EnqueueLedger {
  /**
   * Retry now (DESIGN.md §4): a pending job waiting for its run time (a backoff, a future `runAt`)
   * becomes due at once; a dead job is replayed ({@link replayDeadLetter}); a worker is woken.
   * @throws {JobNotFoundError} no such job. @throws {JobStateConflictError} claimed, running, done or cancelled.
   */
  retryJob(id: number): Promise<RetryOutcome> {
    checkJobId(id);
    return retryNow(this.pool, this.schema, id);
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
   * Dead-letter entries, newest death first, filtered and paged (see {@link ListDeadLettersQuery});
   * payloads over 64 KiB left out (`payloadOmitted`).
   * @throws {JobValidationError} for a bad filter, limit (1–1000) or offset.
   */
  listDeadLetters(query: ListDeadLettersQuery = {}, naming: FieldNaming = "camel"): Promise<DeadLetterJob[]> {
    return listDeadLetters(this.pool, this.schema, query, naming);
  }

  /**
   * Replays a dead letter (DESIGN.md §4, "Replay"): its dead job goes back to pending, due now,
   * attempt count reset, history kept; the entry is marked replayed. Idempotent: a job no longer
   * dead is left alone (`replayed: false`).
   * @throws {DeadLetterNotFoundError} no entry for this job.
   */
  replayDeadLetter(jobId: number): Promise<ReplayOutcome> {
    checkJobId(jobId);
    return replayOne(this.pool, this.schema, jobId);
  }

  /**
   * Replays up to `limit` (default 1,000) dead letters matching `filter` whose job is still dead,
   * oldest death first, in one statement; `more` says whether to call again.
   * @throws {JobValidationError} for a bad filter, an empty one without `all: true`, or a bad limit.
   */
  replayDeadLetters(
    filter: DeadLetterFilter,
    options: DeadLetterBatchOptions = {},
  ): Promise<DeadLetterBatch> {
    return replayBatch(this.pool, this.schema, filter, options.limit, options.naming);
  }

  /**
   * Deletes a dead-letter entry and returns it; the job stays `dead` until retention deletes it.
   * @throws {DeadLetterNotFoundError} no entry for this job.
   */
  discardDeadLetter(jobId: number): Promise<DeadLetterJob> {
    checkJobId(jobId);
    return discardOne(this.pool, this.schema, jobId);
  }

  /**
   * Deletes up to `limit` (default 1,000) dead-letter entries matching `filter`, oldest death
   * first, in one statement; `more` says whether to call again.
   * @throws {JobValidationError} for a bad filter, an empty one without `all: true`, or a bad limit.
   */
  discardDeadLetters(
    filter: DeadLetterQuery,
    options: DeadLetterBatchOptions = {},
  ): Promise<DeadLetterBatch> {
    return discardBatch(this.pool, this.schema, filter, options.limit, options.naming);
  }
}
