/**
 * The lock session: the dedicated lock-holding connection of a worker process (DESIGN.md §5; one
 * per lane with `lockSessions` > 1, docs/architecture.md), which claims jobs and holds their advisory locks, with its write connection, which writes every
 * fenced state change for them. Handlers never touch either. It owns the order of statements
 * across the two connections; connection setup is in `session/connection.ts`, the unlock queue in
 * `session/unlock-queue.ts`, the fenced writes in `session/writes.ts`.
 *
 * Why two connections: one connection runs one statement at a time, so with one the database
 * would write a batch's outcome and claim the next batch one after the other, on one core. The
 * write connection holds no lock (docs/architecture.md, "Two connections per lock session").
 */

import type pg from "pg";
import { closeSession } from "../db/pool.js";
import { LockSessionLostError } from "../errors.js";
import type { BackoffPolicy } from "./ledger.js";
import { lockClassFor } from "./lock-class.js";
import type { ProbeQuery } from "./pooling.js";
import { type ClaimRow, RowVersions } from "./session/claim-rows.js";
import {
  type ConnectionLimits,
  DEFAULT_CONNECTION_LIMITS,
  openSessionConnections,
  type SerialConnection,
} from "./session/connection.js";
import { UnlockQueue } from "./session/unlock-queue.js";
import {
  type BatchWritten,
  type ClaimRef,
  type Completion,
  deleteWorkerRow,
  type Failure,
  type WorkerIdentity,
  type WriteOutcome,
  type WriteTarget,
  writeDoneBatch,
  writeFailureBatch,
  writeHeartbeat,
  writeReleaseBatch,
  writeRunning,
} from "./session/writes.js";
import { backendPid, claimAloneJob, claimJobs } from "./sql/claim.js";
import { claimLimitedJobs, limitedTypesOf } from "./sql/claim-limited.js";
import { numberArray } from "./sql/params.js";
import { roundTrip } from "./sql/schema.js";
import type { ClaimedJob } from "./types.js";

export type {
  ClaimRef,
  Completion,
  FailedStatus,
  Failure,
  WorkerIdentity,
  WriteOutcome,
} from "./session/writes.js";

/** A job as handed to a worker by a claim (defined with the job's shape in types.ts). */
export type { ClaimedJob };

/**
 * A batch of outcomes written and committed on the write connection: what the write says, and the
 * batch's unlock, asked for as the write returned (it runs before any claim asked for later, or
 * with the claim asked for in the same turn); it resolves once the locks are released.
 */
export interface Written<T> {
  outcome: T;
  unlocked: Promise<void>;
}

/**
 * Called once a written batch's unlock has run (`unlockError` null) or failed, with what the
 * write said. It runs before anything else learns of the statement that carried the unlock: before
 * a claim that carried it hands out its jobs, so a job's outcome is always reported before its next
 * attempt is claimed.
 */
export type OnUnlocked<T> = (outcome: T, unlockError: unknown) => void;

/** What a claim returns: the jobs it claimed, and whether run-alone jobs of its types are due. */
export interface ClaimResult {
  jobs: ClaimedJob[];
  /** Run-alone jobs (DESIGN.md §6) of the claim's types are due; the claim took none of them. */
  aloneDue: boolean;
}

/** What a limited claim returns (sql/claim-limited.ts): a {@link ClaimResult}, and why it took no more. */
export interface LimitedClaimResult extends ClaimResult {
  /**
   * Seconds until the next token of the soonest limited type whose rate held it back while it has
   * due jobs left: claim again then. Null when no rate held a type back.
   */
  waitSeconds: number | null;
  /** A type with due jobs left was held back by its `max_running`: claim again once a job ends. */
  heldBack: boolean;
}

/** An empty batch: nothing sent, nothing to unlock. */
const nothingWritten = <T>(outcome: T): Promise<Written<T>> =>
  Promise.resolve({ outcome, unlocked: Promise.resolve() });

export class LockSession {
  private readonly lockClass: number;
  private lost = false;
  private readonly unlocks: UnlockQueue;
  private readonly target: WriteTarget;
  /** Each held job's row version, which its completion reads the row at (session/claim-rows.ts). */
  private readonly rowVersions = new RowVersions();

  private constructor(
    /**
     * Advisory-lock slots of the server's shared lock table (`lockTableSize`), read when the
     * session opened.
     */
    readonly lockTableSlots: number,
    /** Claims and unlocks: holds every advisory lock of this worker. */
    private readonly locks: SerialConnection,
    /** Fenced outcome writes and heartbeats: holds no lock. */
    private readonly writes: SerialConnection,
    private readonly schema: string,
    private readonly workerId: string,
    onLost: (error: Error) => void,
  ) {
    this.lockClass = lockClassFor(schema);
    this.unlocks = new UnlockQueue(locks, schema, this.lockClass);
    this.target = { writes, schema, workerId };
    const lose = (error: Error) => {
      if (this.lost) return;
      this.lost = true;
      onLost(error);
    };
    locks.client.on("error", lose);
    locks.client.on("end", () => lose(new LockSessionLostError("lock session ended")));
    writes.client.on("error", lose);
    writes.client.on("end", () => lose(new LockSessionLostError("lock session's write connection ended")));
    // A statement without an answer within its deadline (connection.ts): the session is lost.
    locks.onDeadlineMissed = lose;
    writes.onDeadlineMissed = lose;
  }

  /**
   * Opens a lock session: its lock connection and its write connection. `onLost` is called once if
   * either fails or ends; from then on every advisory lock it held is gone and the session must
   * not be used. `limits` bound its connects and statements (default: the config's defaults); a
   * statement that misses its deadline loses the session.
   * @throws if either connection cannot be opened within the connect timeout (neither is left
   * open).
   */
  static async open(options: {
    connectionString: string;
    schema: string;
    workerId: string;
    onLost: (error: Error) => void;
    limits?: ConnectionLimits;
  }): Promise<LockSession> {
    const { locks, writes, lockTableSlots } = await openSessionConnections(
      options.connectionString,
      options.workerId,
      options.limits ?? DEFAULT_CONNECTION_LIMITS,
    );
    return new LockSession(lockTableSlots, locks, writes, options.schema, options.workerId, options.onLost);
  }

  /** True once the connection failed or ended. */
  get isLost(): boolean {
    return this.lost;
  }

  /**
   * Releases the advisory locks of jobs whose claim this worker lost (the fence refused their
   * running mark or heartbeat) once their abandoned handlers have returned: nothing is written for
   * them, and no lock may stay held for a job this session does not own. Resolves once released.
   */
  releaseLocks(ids: readonly number[]): Promise<void> {
    this.rowVersions.forget(ids);
    return ids.length === 0 ? Promise.resolve() : this.unlocks.request(ids, null);
  }

  /**
   * Rule (d): a claim carries the pending unlocks, released before its scan for candidates (an
   * InitPlan of the scan, see `claimJobs`), so the session never holds the released batch and the
   * claimed one at once. Proved by test/queue/claim.test.ts "a claim asked for while a written
   * batch waits for its unlock releases that batch, in the same round trip" and "a retry due at
   * once can be claimed again by the claim that carries its unlock, and holds no lock once done".
   *
   * Claims up to `limit` due jobs of `types`, in claim order (priority DESC, run_at, id), after
   * releasing the locks of every pending unlock: those that wake workers in a statement of their
   * own, the others in the claim statement itself. Their `onSettled` callbacks run before this
   * resolves.
   * A failed claim may have taken advisory locks it never reports: from then on the session counts
   * as lost ({@link isLost}), and its owner must close it, which releases every lock it held.
   * Never returns a run-alone job (see {@link claimReporting}).
   */
  async claim(types: readonly string[], limit: number): Promise<ClaimedJob[]> {
    return (await this.claimReporting(types, limit)).jobs;
  }

  /**
   * {@link claim}, and whether run-alone jobs of `types` are due (DESIGN.md §6): jobs reclaimed
   * from a lost worker process, which the claim never takes; the worker process runs one with
   * {@link claimAlone} once it holds nothing else.
   */
  async claimReporting(types: readonly string[], limit: number): Promise<ClaimResult> {
    const rows = await this.claimRows((unlockIds) => ({
      ...claimJobs(this.schema, types.length === 1),
      values: [types, limit, this.lockClass, this.workerId, unlockIds],
    }));
    // The report row, all NULL, comes after the claimed ones (claim.ts).
    const aloneDue = rows.length > 0 && (rows[rows.length - 1] as { id: number | null }).id === null;
    if (aloneDue) rows.pop();
    return { jobs: rows, aloneDue };
  }

  /**
   * {@link claimReporting} for limited types (rows of type_limits, which the ordinary claim never
   * takes): up to `limit` due jobs of `types` within each type's global limits (sql/claim-limited.ts),
   * and when to claim again. Same failure rule as {@link claim}.
   */
  async claimLimited(types: readonly string[], limit: number): Promise<LimitedClaimResult> {
    const rows = await this.claimRows((unlockIds) => ({
      ...claimLimitedJobs(this.schema),
      values: [types, limit, this.lockClass, this.workerId, unlockIds],
    }));
    // The report row (id NULL, the report as its payload) comes after the claimed ones.
    const report = (rows.pop()?.payload ?? {}) as {
      aloneDue?: boolean;
      waitSeconds?: number | null;
      heldBack?: boolean;
    };
    return {
      jobs: rows,
      aloneDue: report.aloneDue === true,
      waitSeconds: typeof report.waitSeconds === "number" ? report.waitSeconds : null,
      heldBack: report.heldBack === true,
    };
  }

  /**
   * Which of `types` are limited now (rows of type_limits), read on the write connection (a worker
   * asks at start, at each heartbeat and when told a limit changed; never per claim).
   */
  async limitedTypes(types: readonly string[]): Promise<string[]> {
    const { rows } = await this.writes.query<{ type: string }>(
      { ...limitedTypesOf(this.schema), values: [types] },
      "roundTrip",
    );
    return rows.map((r) => r.type);
  }

  /**
   * Claims the first due run-alone job of `types` (or none), carrying the pending unlocks like
   * {@link claim}. The caller must hold no other job in its whole process, and claim nothing else
   * until this job's outcome is written (DESIGN.md §6). Same failure rule as {@link claim}.
   */
  async claimAlone(types: readonly string[]): Promise<ClaimedJob | null> {
    const rows = await this.claimRows((unlockIds) => ({
      ...claimAloneJob(this.schema),
      values: [types, this.lockClass, this.workerId, unlockIds],
    }));
    return rows[0] ?? null;
  }

  /**
   * Sends a claim statement (built around the ids it carries to unlock) and returns its rows as
   * jobs, keeping each claimed row's version for the job's completion (session/claim-rows.ts).
   */
  private async claimRows(query: (unlockIds: string) => pg.QueryConfig): Promise<ClaimedJob[]> {
    this.unlocks.send(true);
    const carried = this.unlocks.takeForClaim();
    const claimed = this.locks.query<ClaimRow>({
      ...query(numberArray(carried?.ids ?? [])),
      rowMode: "array",
    } as pg.QueryConfig);
    // Registered before the carried unlocks' callbacks, so that they already see the session lost.
    claimed.catch(() => {
      this.lost = true;
    });
    carried?.settle(claimed);
    return this.rowVersions.jobsOf((await claimed).rows);
  }

  /** Fenced claimed → running. Returns the ids that moved. */
  markRunning(refs: readonly ClaimRef[]): Promise<Set<number>> {
    return refs.length === 0 ? Promise.resolve(new Set()) : writeRunning(this.target, refs);
  }

  /**
   * Fenced done. Resolves once the write has committed, with the ids the fence refused (their
   * claim was lost; nothing changed for them; usually none) and the batch's unlock, asked for at
   * that moment; `onUnlocked` is called once it has run.
   */
  writeCompletions(
    batch: readonly Completion[],
    onUnlocked?: OnUnlocked<number[]>,
  ): Promise<Written<number[]>> {
    if (batch.length === 0) return nothingWritten([]);
    const ids = batch.map((c) => c.id);
    return this.unlockAfter(
      ids,
      writeDoneBatch(this.target, batch, ids, this.rowVersions.of(ids)),
      onUnlocked,
    );
  }

  /**
   * Fenced failed attempts (retry with backoff, or dead-letter). Resolves once committed, with one
   * outcome per job, and the unlock, which also wakes the workers of retries already due;
   * `onUnlocked` is called once it has run.
   */
  writeFailures(
    batch: readonly Failure[],
    policy: BackoffPolicy,
    onUnlocked?: OnUnlocked<WriteOutcome[]>,
  ): Promise<Written<WriteOutcome[]>> {
    if (batch.length === 0) return nothingWritten([]);
    const ids = batch.map((f) => f.id);
    return this.unlockAfter(ids, writeFailureBatch(this.target, batch, ids, policy), onUnlocked);
  }

  /**
   * Fenced give-back to pending (no attempt counted). Resolves once committed, with the ids the
   * fence refused, and the unlock, which also wakes the workers of the jobs given back;
   * `onUnlocked` is called once it has run.
   */
  writeReleases(refs: readonly ClaimRef[], onUnlocked?: OnUnlocked<number[]>): Promise<Written<number[]>> {
    if (refs.length === 0) return nothingWritten([]);
    const ids = refs.map((r) => r.id);
    return this.unlockAfter(ids, writeReleaseBatch(this.target, refs, ids), onUnlocked);
  }

  /**
   * Rule (a): a job's lock is released only after its outcome has committed: the unlock is asked
   * for once the write's promise has resolved, never before, and never for a write that failed.
   * Proved by test/worker/ordering.test.ts "a job's lock stays held while its completion
   * waits on the job's row, with the lock connection idle" (and test/worker/write-connection.test.ts
   * "a job's advisory lock stays held until its outcome has committed").
   */
  private async unlockAfter<T>(
    ids: readonly number[],
    write: Promise<BatchWritten<T>>,
    onUnlocked: OnUnlocked<T> | undefined,
  ): Promise<Written<T>> {
    const { outcome, wakeTypes } = await write;
    this.rowVersions.forget(ids);
    return {
      outcome,
      unlocked: this.unlocks.request(ids, wakeTypes, onUnlocked && ((error) => onUnlocked(outcome, error))),
    };
  }

  /**
   * Upserts the worker row and touches every held job (write connection), and makes a round trip
   * on the lock connection, which keeps it busy for the server's `idle_session_timeout` (a session
   * that stops heartbeating is ended by the server, its locks with it). Both within the heartbeat
   * deadline. Returns the ids still held.
   * @throws {LockSessionLostError} if either misses its deadline (the session is then lost).
   */
  async heartbeat(
    worker: WorkerIdentity,
    fencedWrites: number,
    held: readonly ClaimRef[],
  ): Promise<Set<number>> {
    const ping = this.locks.query(roundTrip);
    ping.catch(() => undefined);
    const alive = await writeHeartbeat(this.target, worker, fencedWrites, held);
    await ping;
    return alive;
  }

  /**
   * This session's two connections as the pooling probe runs on them (pooling.ts
   * `probeConnections`): a worker probes on its first session instead of opening two more.
   */
  probeQueries(): readonly [ProbeQuery, ProbeQuery] {
    return [(sql) => this.locks.query(sql), (sql) => this.writes.query(sql)];
  }

  /** Deletes the worker row (clean shutdown). */
  deleteWorker(): Promise<void> {
    return deleteWorkerRow(this.target);
  }

  /**
   * Closes both connections, within a second even on a link that no longer answers (the sockets
   * are destroyed then); PostgreSQL releases any advisory lock still held. Never throws.
   */
  async close(): Promise<void> {
    this.lost = true;
    await Promise.all([closeSession(this.writes.client), closeSession(this.locks.client)]);
  }

  /** How many row versions the session keeps (tests: none once it holds no job). */
  get rowVersionsKept(): number {
    return this.rowVersions.size;
  }

  /** The backend pid of the lock connection, which holds the locks (for tests and inspect). */
  async backendPid(): Promise<number> {
    const { rows } = await this.locks.query<{ pid: number }>(backendPid);
    return rows[0]?.pid ?? -1;
  }
}
