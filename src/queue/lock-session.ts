/**
 * The lock session: the one dedicated connection per worker process that claims jobs, holds their
 * advisory locks, and writes every fenced state change for them (DESIGN.md §5). Handlers never
 * touch it. Each write takes a batch (`unnest`), so a busy worker needs a few round trips per
 * batch, not per job.
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
  lockSessionSettings,
  markRunning,
} from "./sql/claim.js";
import { completeJobs, failJobs, releaseJobs } from "./sql/finish.js";
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

/** A claimed job's row (CLAIMED_COLUMNS). */
interface ClaimedRow {
  id: number;
  type: string;
  payload: JsonValue;
  priority: number;
  attempt: number;
  max_retries: number;
}

const toClaimedJob = (r: ClaimedRow): ClaimedJob => ({
  id: r.id,
  type: r.type,
  payload: r.payload,
  priority: r.priority,
  attempt: r.attempt,
  maxRetries: r.max_retries,
});

/** The one row of a batched completion or release: ids the fence refused (bigint[] as strings). */
interface RefusedRow {
  refused_ids: (string | number)[];
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

/** The worker's row in `workers`, written with every heartbeat. */
export interface WorkerIdentity {
  id: string;
  host: string;
  pid: number;
  types: string[];
  concurrency: number;
}

export class LockSession {
  private readonly lockClass: number;
  private lost = false;
  /** The tail of the statement queue: one statement at a time on this session. */
  private tail: Promise<unknown> = Promise.resolve();

  private constructor(
    private readonly client: pg.Client,
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
    client.on("error", lose);
    client.on("end", () => lose(new Error("lock session ended")));
  }

  /**
   * Opens a lock session. `onLost` is called once if the connection fails or ends; from then on
   * every advisory lock it held is gone and the session must not be used.
   */
  static async open(options: {
    connectionString: string;
    schema: string;
    workerId: string;
    onLost: (error: Error) => void;
  }): Promise<LockSession> {
    const client = await connectSession({
      connectionString: options.connectionString,
      applicationName: `taskqueue lock session ${options.workerId}`.slice(0, 63),
    });
    // Plans that hold whatever the statistics say: see lockSessionSettings.
    await client.query(lockSessionSettings);
    return new LockSession(client, options.schema, options.workerId, options.onLost);
  }

  /**
   * Runs one statement after every earlier one has finished. Claims, flushes and heartbeats come
   * from independent loops; node-postgres would queue them too, but only as a deprecated
   * behaviour, and the order they reach the server in is part of the protocol.
   */
  private query<R extends pg.QueryResultRow = pg.QueryResultRow>(
    config: string | pg.QueryConfig,
  ): Promise<pg.QueryResult<R>> {
    const result = this.tail.then(() => this.client.query<R>(config as pg.QueryConfig));
    this.tail = result.catch(() => undefined);
    return result;
  }

  /** True once the connection failed or ended. */
  get isLost(): boolean {
    return this.lost;
  }

  /** Advisory-lock slots of the server's shared lock table (max_locks_per_transaction * max_connections). */
  async lockTableSlots(): Promise<number> {
    const { rows } = await this.query<{ slots: number }>(lockTableSize);
    return rows[0]?.slots ?? 6400;
  }

  /** Claims up to `limit` due jobs of `types`, in claim order (priority DESC, run_at, id). */
  async claim(types: readonly string[], limit: number): Promise<ClaimedJob[]> {
    const { rows } = await this.query<ClaimedRow>({
      ...claimJobs(this.schema),
      values: [types, limit, this.lockClass, this.workerId],
    });
    return rows.map(toClaimedJob);
  }

  /** Fenced claimed → running. Returns the ids that moved. */
  async markRunning(refs: readonly ClaimRef[]): Promise<Set<number>> {
    if (refs.length === 0) return new Set();
    const { rows } = await this.query<{ id: number }>({
      ...markRunning(this.schema),
      values: [refs.map((r) => r.id), refs.map((r) => r.attempt), this.workerId],
    });
    return new Set(rows.map((r) => r.id));
  }

  /**
   * Fenced done + unlock. Returns the ids whose write was refused by the fence (their claim was
   * lost; nothing changed for them); usually empty.
   */
  async complete(batch: readonly Completion[]): Promise<number[]> {
    if (batch.length === 0) return [];
    const { rows } = await this.query<RefusedRow>({
      ...completeJobs(this.schema),
      values: [
        batch.map((c) => c.id),
        batch.map((c) => c.attempt),
        batch.map((c) => c.resultJson),
        batch.map((c) => c.runMs),
        this.workerId,
        this.lockClass,
      ],
    });
    return refusedIds(rows);
  }

  /** Fenced failed attempt (retry with backoff or dead-letter) + unlock. */
  async fail(batch: readonly Failure[], policy: BackoffPolicy): Promise<WriteOutcome[]> {
    if (batch.length === 0) return [];
    const { rows } = await this.query<WriteOutcome>({
      ...failJobs(this.schema),
      values: [
        batch.map((f) => f.id),
        batch.map((f) => f.attempt),
        batch.map((f) => f.error),
        batch.map((f) => f.runMs),
        this.workerId,
        this.lockClass,
        policy.backoffBaseSeconds,
        policy.backoffMaxSeconds,
        policy.backoffJitter,
      ],
    });
    return rows;
  }

  /**
   * Fenced give-back to pending (no attempt counted) + unlock; wakes other workers. Returns the
   * ids whose write was refused by the fence, like {@link complete}.
   */
  async release(refs: readonly ClaimRef[]): Promise<number[]> {
    if (refs.length === 0) return [];
    const { rows } = await this.query<RefusedRow>({
      ...releaseJobs(this.schema),
      values: [refs.map((r) => r.id), refs.map((r) => r.attempt), this.workerId, this.lockClass],
    });
    return refusedIds(rows);
  }

  /** Upserts the worker row and touches every held job. Returns the ids still held. */
  async heartbeat(
    worker: WorkerIdentity,
    fencedWrites: number,
    held: readonly ClaimRef[],
  ): Promise<Set<number>> {
    const { rows } = await this.query<{ id: number }>({
      ...heartbeat(this.schema),
      values: [
        worker.id,
        worker.host,
        worker.pid,
        worker.types,
        worker.concurrency,
        fencedWrites,
        held.map((r) => r.id),
        held.map((r) => r.attempt),
      ],
    });
    return new Set(rows.map((r) => r.id));
  }

  /** Deletes the worker row (clean shutdown). */
  async deleteWorker(): Promise<void> {
    await this.query({ ...deleteWorker(this.schema), values: [this.workerId] });
  }

  /** Closes the connection; PostgreSQL releases any advisory lock still held. */
  async close(): Promise<void> {
    this.lost = true;
    await this.client.end().catch(() => undefined);
  }

  /** The backend pid of this session (for tests and inspect). */
  async backendPid(): Promise<number> {
    const { rows } = await this.query<{ pid: number }>(backendPid);
    return rows[0]?.pid ?? -1;
  }
}
