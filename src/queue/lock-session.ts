/**
 * The lock session: the one dedicated lock-holding connection per worker process (DESIGN.md §5),
 * which claims jobs and holds their advisory locks, with its write connection, which writes every
 * fenced state change for them. Handlers never touch either. Each write takes a batch (`unnest`),
 * so a busy worker needs a few round trips per batch, not per job.
 *
 * Why two connections: one connection runs one statement at a time, so with one the database
 * would write a batch's outcome and claim the next batch one after the other, on one core. The
 * write connection holds no lock; a job's lock is released on the lock connection only after its
 * outcome has committed, so the lock still covers the job until its final state is written
 * (docs/architecture.md, "Two connections per lock session").
 */
import type pg from "pg";
import { connectSession } from "../db/pool.js";
import type { BackoffPolicy } from "./ledger.js";
import { lockClassFor } from "./lock-class.js";
import {
  backendPid,
  claimJobs,
  deleteWorker,
  heartbeat,
  lockConnectionSettings,
  lockSessionSettings,
  markRunning,
} from "./sql/claim.js";
import { unlockJobs, writeDone, writeFailures, writeReleases } from "./sql/finish.js";
import { jsonArrayType, jsonTextArray, numberArray } from "./sql/params.js";
import { lockTableSize } from "./sql/schema.js";
import type { JsonValue } from "./types.js";

/** A job as handed to a worker by a claim. */
export interface ClaimedJob {
  id: number;
  type: string;
  payload: JsonValue;
  priority: number;
  /** Failed attempts before this one (0 on the first execution). */
  attempt: number;
  maxRetries: number;
}

/** Identifies one claim: the fence every later write must pass. */
export interface ClaimRef {
  id: number;
  attempt: number;
}

export interface Completion extends ClaimRef {
  /** Result as JSON text. */
  resultJson: string;
  /** Handler run time, milliseconds. */
  runMs: number;
}

export interface Failure extends ClaimRef {
  error: string;
  runMs: number;
}

/** The one row of a batched completion or release: ids the fence refused (bigint[] as strings). */
interface RefusedRow {
  refused_ids: (string | number)[];
  /** Releases only: types given back, to wake once unlocked. */
  due_types?: string | null;
}

const refusedIds = (rows: RefusedRow[]): number[] => (rows[0]?.refused_ids ?? []).map(Number);

/** Outcome of a fenced write for one job. `applied` false: the claim was lost, nothing changed. */
export interface WriteOutcome {
  id: number;
  applied: boolean;
  /** For failures: `pending` (will retry) or `dead`. */
  status?: string;
  /** For failures that will retry: seconds until the job is due again. */
  retry_in_seconds?: number;
}

/**
 * A batch of outcomes written and committed on the write connection: what the write says, and the
 * batch's unlock, asked for as the write returned (it runs before any claim asked for later, or
 * with the claim asked for in the same turn); it resolves once the locks are released.
 */
export interface Written<T> {
  outcome: T;
  unlocked: Promise<void>;
}

/** The outcome of a write, once its unlock has run too. */
async function unlockedOutcome<T>(written: Promise<Written<T>>): Promise<T> {
  const { outcome, unlocked } = await written;
  await unlocked;
  return outcome;
}

/** The worker's row in `workers`, written with every heartbeat. */
export interface WorkerIdentity {
  id: string;
  host: string;
  pid: number;
  types: string[];
  concurrency: number;
}

/**
 * One connection whose statements run one after another, in the order they were asked for. Claims,
 * flushes and heartbeats come from independent loops; node-postgres would queue them too, but only
 * as a deprecated behaviour, and the order they reach the server in is part of the protocol.
 */
class SerialConnection {
  private tail: Promise<unknown> = Promise.resolve();

  constructor(readonly client: pg.Client) {}

  query<R extends pg.QueryResultRow = pg.QueryResultRow>(
    config: string | pg.QueryConfig,
  ): Promise<pg.QueryResult<R>> {
    const result = this.tail.then(() => this.client.query<R>(config as pg.QueryConfig));
    this.tail = result.catch(() => undefined);
    return result;
  }
}

/**
 * Opens a connection of a lock session, with the planner settings its statements need. The lock
 * connection also reads the size of the server's lock table in the same round trip.
 */
async function openConnection(
  connectionString: string,
  role: "lock session" | "writes",
  workerId: string,
): Promise<{ connection: SerialConnection; lockTableSlots: number | null }> {
  const client = await connectSession({
    connectionString,
    applicationName: `taskqueue ${role} ${workerId}`.slice(0, 63),
  });
  try {
    // Cached plans that hold whatever the statistics say (lockSessionSettings); claims commit
    // without waiting for the disk (lockConnectionSettings). One simple query, several statements.
    if (role === "writes") {
      await client.query(lockSessionSettings);
      return { connection: new SerialConnection(client), lockTableSlots: null };
    }
    const results = (await client.query(
      `${lockConnectionSettings}; ${lockTableSize}`,
    )) as unknown as pg.QueryResult<{ slots: number }>[];
    const slots = results[results.length - 1]?.rows[0]?.slots;
    return { connection: new SerialConnection(client), lockTableSlots: slots ?? null };
  } catch (error) {
    await client.end().catch(() => undefined);
    throw error;
  }
}

/**
 * PostgreSQL's default lock table (see `lockTableSize`): max_locks_per_transaction 64 × 122 server
 * processes (100 connections, 3 autovacuum workers and their launcher, 8 worker processes, 10 WAL
 * senders).
 */
const DEFAULT_LOCK_TABLE_SLOTS = 7808;

/** An unlock waiting for the lock connection (see `LockSession.unlock`). */
interface PendingUnlock {
  ids: readonly number[];
  wakeTypes: string | null;
  /** Called first when the statement carrying the unlock returns: `error` null once released. */
  onSettled: ((error: unknown) => void) | undefined;
  resolve: () => void;
  reject: (error: unknown) => void;
}

/**
 * Called once a written batch's unlock has run (`unlockError` null) or failed, with what the
 * write said. It runs before anything else learns of the statement that carried the unlock: before
 * a claim that carried it hands out its jobs, so a job's outcome is always reported before its next
 * attempt is claimed.
 */
export type OnUnlocked<T> = (outcome: T, unlockError: unknown) => void;

export class LockSession {
  private readonly lockClass: number;
  private lost = false;
  private pendingUnlocks: PendingUnlock[] = [];

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
    const lose = (error: Error) => {
      if (this.lost) return;
      this.lost = true;
      onLost(error);
    };
    locks.client.on("error", lose);
    locks.client.on("end", () => lose(new Error("lock session ended")));
    writes.client.on("error", lose);
    writes.client.on("end", () => lose(new Error("lock session's write connection ended")));
  }

  /**
   * Opens a lock session: its lock connection and its write connection. `onLost` is called once if
   * either fails or ends; from then on every advisory lock it held is gone and the session must
   * not be used.
   * @throws if either connection cannot be opened (neither is left open).
   */
  static async open(options: {
    connectionString: string;
    schema: string;
    workerId: string;
    onLost: (error: Error) => void;
  }): Promise<LockSession> {
    const [locks, writes] = await Promise.allSettled([
      openConnection(options.connectionString, "lock session", options.workerId),
      openConnection(options.connectionString, "writes", options.workerId),
    ]);
    if (locks.status === "rejected" || writes.status === "rejected") {
      for (const opened of [locks, writes])
        if (opened.status === "fulfilled") await opened.value.connection.client.end().catch(() => undefined);
      throw locks.status === "rejected" ? locks.reason : (writes as PromiseRejectedResult).reason;
    }
    return new LockSession(
      locks.value.lockTableSlots ?? DEFAULT_LOCK_TABLE_SLOTS,
      locks.value.connection,
      writes.value.connection,
      options.schema,
      options.workerId,
      options.onLost,
    );
  }

  /**
   * Releases the advisory locks of `ids`, whose outcome has committed, then wakes the workers of
   * `wakeTypes` (comma-separated; null: nobody). Calls `onSettled` once the statement that carries
   * the unlock has returned, before resolving.
   *
   * The unlock waits for the end of this event-loop turn. A claim asked for meanwhile carries an
   * unlock that wakes nobody (the claim statement unlocks before it locks, see `claimJobs`), which
   * saves a busy worker one round trip per batch on the lock connection; an unlock that wakes
   * workers goes out alone, ahead of that claim, so that its NOTIFY commits whatever the claim
   * does. Either way it reaches the lock connection before any claim asked for later.
   */
  private unlock(
    ids: readonly number[],
    wakeTypes: string | null,
    onSettled?: (error: unknown) => void,
  ): Promise<void> {
    return new Promise((resolve, reject) => {
      this.pendingUnlocks.push({ ids, wakeTypes, onSettled, resolve, reject });
      if (this.pendingUnlocks.length === 1) setImmediate(() => this.sendPendingUnlocks(() => true));
    });
  }

  /**
   * Releases the advisory locks of jobs whose claim this worker lost (the fence refused their
   * running mark or heartbeat) once their abandoned handlers have returned: nothing is written for
   * them, and no lock may stay held for a job this session does not own. Resolves once released.
   */
  releaseLocks(ids: readonly number[]): Promise<void> {
    return ids.length === 0 ? Promise.resolve() : this.unlock(ids, null);
  }

  /** Sends the pending unlocks that `which` selects, as one statement. */
  private sendPendingUnlocks(which: (request: PendingUnlock) => boolean): void {
    const pending = this.takePendingUnlocks(which);
    if (!pending) return;
    pending.settle(
      this.locks.query({
        ...unlockJobs(this.schema),
        values: [numberArray(pending.ids), this.lockClass, pending.wakeTypes],
      }),
    );
  }

  /**
   * Takes the pending unlocks that `which` selects: their ids, the types to wake (distinct,
   * comma-separated, or null), and `settle`, which settles each of them with the statement that
   * carries them (its `onSettled` first).
   */
  private takePendingUnlocks(which: (request: PendingUnlock) => boolean): {
    ids: number[];
    wakeTypes: string | null;
    settle: (statement: Promise<unknown>) => void;
  } | null {
    const requests = this.pendingUnlocks.filter(which);
    if (requests.length === 0) return null;
    this.pendingUnlocks = this.pendingUnlocks.filter((r) => !which(r));
    const types = new Set(requests.flatMap((r) => (r.wakeTypes === null ? [] : r.wakeTypes.split(","))));
    const settleAll = (error: unknown) => {
      for (const r of requests) {
        try {
          r.onSettled?.(error);
        } catch {
          // A callback's failure is its own: every unlock of the statement still settles.
        }
      }
      for (const r of requests) {
        if (error === null) r.resolve();
        else r.reject(error);
      }
    };
    return {
      ids: requests.flatMap((r) => r.ids),
      wakeTypes: types.size > 0 ? [...types].join(",") : null,
      settle: (statement) =>
        void statement.then(
          () => settleAll(null),
          (error: unknown) => settleAll(error ?? new Error("unlock failed")),
        ),
    };
  }

  /** True once the connection failed or ended. */
  get isLost(): boolean {
    return this.lost;
  }

  /**
   * Claims up to `limit` due jobs of `types`, in claim order (priority DESC, run_at, id), after
   * releasing the locks of every pending unlock (see {@link unlock}): those that wake workers in a
   * statement of their own, the others in the claim statement itself. Their `onSettled` callbacks
   * run before this resolves.
   * A failed claim may have taken advisory locks it never reports: from then on the session counts
   * as lost ({@link isLost}), and its owner must close it, which releases every lock it held.
   */
  async claim(types: readonly string[], limit: number): Promise<ClaimedJob[]> {
    this.sendPendingUnlocks((r) => r.wakeTypes !== null);
    const unlocks = this.takePendingUnlocks(() => true);
    // The claim names its columns as ClaimedJob's fields (claim.ts): rows are used as they are.
    const claimed = this.locks.query<ClaimedJob & pg.QueryResultRow>({
      ...claimJobs(this.schema),
      values: [types, limit, this.lockClass, this.workerId, numberArray(unlocks?.ids ?? [])],
    });
    // Registered before the carried unlocks' callbacks, so that they already see the session lost.
    claimed.catch(() => {
      this.lost = true;
    });
    unlocks?.settle(claimed);
    return (await claimed).rows;
  }

  /** Fenced claimed → running. Returns the ids that moved. */
  async markRunning(refs: readonly ClaimRef[]): Promise<Set<number>> {
    if (refs.length === 0) return new Set();
    const { rows } = await this.writes.query<{ id: number }>({
      ...markRunning(this.schema),
      values: [numberArray(refs.map((r) => r.id)), numberArray(refs.map((r) => r.attempt)), this.workerId],
    });
    return new Set(rows.map((r) => r.id));
  }

  /**
   * Fenced done. Resolves once the write has committed, with the ids the fence refused (their
   * claim was lost; nothing changed for them; usually none) and the batch's unlock, asked for at
   * that moment (see {@link unlock}); `onUnlocked` is called once it has run.
   */
  async writeCompletions(
    batch: readonly Completion[],
    onUnlocked?: OnUnlocked<number[]>,
  ): Promise<Written<number[]>> {
    if (batch.length === 0) return { outcome: [], unlocked: Promise.resolve() };
    const ids = batch.map((c) => c.id);
    const results = jsonTextArray(batch.map((c) => c.resultJson));
    const { rows } = await this.writes.query<RefusedRow>({
      ...writeDone(this.schema, jsonArrayType(results)),
      values: [
        numberArray(ids),
        numberArray(batch.map((c) => c.attempt)),
        results,
        numberArray(batch.map((c) => c.runMs)),
        this.workerId,
      ],
    });
    const outcome = refusedIds(rows);
    return { outcome, unlocked: this.unlock(ids, null, (error) => onUnlocked?.(outcome, error)) };
  }

  /**
   * Fenced failed attempts (retry with backoff, or dead-letter). Resolves once committed, with one
   * outcome per job, and the unlock, which also wakes the workers of retries already due;
   * `onUnlocked` is called once it has run.
   */
  async writeFailures(
    batch: readonly Failure[],
    policy: BackoffPolicy,
    onUnlocked?: OnUnlocked<WriteOutcome[]>,
  ): Promise<Written<WriteOutcome[]>> {
    if (batch.length === 0) return { outcome: [], unlocked: Promise.resolve() };
    const ids = batch.map((f) => f.id);
    const { rows } = await this.writes.query<WriteOutcome & { due_types: string | null }>({
      ...writeFailures(this.schema),
      values: [
        numberArray(ids),
        numberArray(batch.map((f) => f.attempt)),
        batch.map((f) => f.error),
        numberArray(batch.map((f) => f.runMs)),
        this.workerId,
        policy.backoffBaseSeconds,
        policy.backoffMaxSeconds,
        policy.backoffJitter,
      ],
    });
    const outcome = rows.map(({ due_types: _, ...o }) => o);
    return {
      outcome,
      unlocked: this.unlock(ids, rows[0]?.due_types ?? null, (error) => onUnlocked?.(outcome, error)),
    };
  }

  /**
   * Fenced give-back to pending (no attempt counted). Resolves once committed, with the ids the
   * fence refused, and the unlock, which also wakes the workers of the jobs given back;
   * `onUnlocked` is called once it has run.
   */
  async writeReleases(
    refs: readonly ClaimRef[],
    onUnlocked?: OnUnlocked<number[]>,
  ): Promise<Written<number[]>> {
    if (refs.length === 0) return { outcome: [], unlocked: Promise.resolve() };
    const ids = refs.map((r) => r.id);
    const { rows } = await this.writes.query<RefusedRow>({
      ...writeReleases(this.schema),
      values: [numberArray(ids), numberArray(refs.map((r) => r.attempt)), this.workerId],
    });
    const outcome = refusedIds(rows);
    return {
      outcome,
      unlocked: this.unlock(ids, rows[0]?.due_types ?? null, (error) => onUnlocked?.(outcome, error)),
    };
  }

  /** {@link writeCompletions}, resolving once the batch is also unlocked: the refused ids. */
  complete(batch: readonly Completion[]): Promise<number[]> {
    return unlockedOutcome(this.writeCompletions(batch));
  }

  /** {@link writeFailures}, resolving once the batch is also unlocked: one outcome per job. */
  fail(batch: readonly Failure[], policy: BackoffPolicy): Promise<WriteOutcome[]> {
    return unlockedOutcome(this.writeFailures(batch, policy));
  }

  /** {@link writeReleases}, resolving once the batch is also unlocked: the refused ids. */
  release(refs: readonly ClaimRef[]): Promise<number[]> {
    return unlockedOutcome(this.writeReleases(refs));
  }

  /** Upserts the worker row and touches every held job. Returns the ids still held. */
  async heartbeat(
    worker: WorkerIdentity,
    fencedWrites: number,
    held: readonly ClaimRef[],
  ): Promise<Set<number>> {
    const { rows } = await this.writes.query<{ id: number }>({
      ...heartbeat(this.schema),
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
    });
    return new Set(rows.map((r) => r.id));
  }

  /** Deletes the worker row (clean shutdown). */
  async deleteWorker(): Promise<void> {
    await this.writes.query({ ...deleteWorker(this.schema), values: [this.workerId] });
  }

  /** Closes both connections; PostgreSQL releases any advisory lock still held. */
  async close(): Promise<void> {
    this.lost = true;
    await Promise.all([
      this.writes.client.end().catch(() => undefined),
      this.locks.client.end().catch(() => undefined),
    ]);
  }

  /** The backend pid of the lock connection, which holds the locks (for tests and inspect). */
  async backendPid(): Promise<number> {
    const { rows } = await this.locks.query<{ pid: number }>(backendPid);
    return rows[0]?.pid ?? -1;
  }
}
