/**
 * Waiting for a job's outcome (issue 13, item 4): {@link JobWaits.wait} resolves with the job once
 * it is done, dead or cancelled, through LISTEN (no poll loop), and reports its progress meanwhile.
 *
 * One LISTEN connection per `JobWaits` (one per ledger, so one per `TaskQueue` and one per API),
 * shared by every wait, opened by the first wait and closed when the last one ends. Only jobs
 * someone waits for notify: a wait marks its job `watched` (schema version 12), and the statements
 * that end a job or write its progress send the id of each watched job they change on
 * {@link waitChannel} (`notifyWatched`, sql/waits.ts). The drain of jobs nobody waits for sends
 * nothing.
 *
 * The race between a job finishing and its wait starting: the wait LISTENs first, then marks the
 * job watched and reads it in one UPDATE (which waits for a write in flight on the row and returns
 * what it committed). A job that finished before is seen finished by that read; one that finishes
 * after finds the flag set, and its notification reaches the connection that already listens.
 * A notification only says "read this job again": the row is the truth, so a lost, duplicated or
 * foreign notification changes nothing. Reads of one job are serialised (a notification arriving
 * during a read makes one more read), so progress is reported in the order it was written.
 * A lost LISTEN connection is opened again (capped backoff) while waits remain, and every waited
 * job is read again once it listens.
 */
import pg from "pg";
import { closeSession, destroySession, reconnectDelayMs, withDeadline } from "../db/pool.js";
import { JobNotFoundError, JobValidationError, TaskQueueError } from "../errors.js";
import { checkJobId } from "./checks.js";
import { getJob } from "./sql/read.js";
import { listenForWaits, waitChannel, watchJob } from "./sql/waits.js";
import type { Job, JobStatus, JsonValue } from "./types.js";

export { waitChannel } from "./sql/waits.js";

/** The states a job does not leave by itself: a wait ends when its job reaches one. */
export const FINAL_STATUSES: readonly JobStatus[] = ["done", "dead", "cancelled"];

/** Default of {@link WaitOptions.timeoutMs}: 30 s. */
export const DEFAULT_WAIT_TIMEOUT_MS = 30_000;

/** Longest {@link WaitOptions.timeoutMs}: what a Node.js timer holds, about 24.8 days. */
export const MAX_WAIT_TIMEOUT_MS = 2 ** 31 - 1;

/** Options of {@link JobWaits.wait} (and `TaskQueue.waitForJob`). */
export interface WaitOptions {
  /** Longest wait, milliseconds (1 to 2^31 − 1). Default 30,000. */
  timeoutMs?: number;
  /**
   * Called with the job's progress each time a new value is read while waiting (the value is
   * compared as JSON; the first call comes with the first read if the job already has progress).
   * A throw is ignored.
   */
  onProgress?: (progress: JsonValue, job: Job) => void;
  /** Ends the wait early: it rejects with the signal's reason. */
  signal?: AbortSignal;
}

/**
 * `waitForJob` reached its `timeoutMs` before the job reached a final state (done, dead,
 * cancelled). `job` is the job as last read (null if no read answered in time).
 */
export class JobWaitTimeoutError extends TaskQueueError {
  constructor(
    readonly jobId: number,
    readonly timeoutMs: number,
    readonly job: Job | null,
  ) {
    super("job_wait_timeout", `job ${jobId} did not reach a final state within ${timeoutMs} ms`);
  }
}

interface Waiter {
  resolve(job: Job): void;
  reject(error: unknown): void;
  onProgress: WaitOptions["onProgress"];
  /** The progress last reported to this waiter, as JSON text ("" before any). */
  progressJson: string;
  /** The job as last read. */
  last: Job | null;
}

/** One job's waits and its reads: one read at a time, `again` when a notification came meanwhile. */
interface Watched {
  waiters: Set<Waiter>;
  reading: boolean;
  again: boolean;
  /** The next read must also mark the job watched (its first read, whichever call makes it). */
  watch: boolean;
}

/** Where a {@link JobWaits} reads jobs and how it opens its LISTEN connection. */
export interface JobWaitsOptions {
  /** Connect and LISTEN deadline, seconds. Default 5. */
  connectTimeoutSeconds?: number;
}

export class JobWaits {
  private readonly jobs = new Map<number, Watched>();
  private client: pg.Client | null = null;
  private opening: Promise<void> | null = null;
  private retryTimer: NodeJS.Timeout | null = null;
  private failures = 0;

  /** @param pool reads and the watch flag; its connection options also open the LISTEN connection. */
  constructor(
    private readonly pool: pg.Pool,
    private readonly schema: string,
    private readonly options: JobWaitsOptions = {},
  ) {}

  /** Waits in progress (for tests and metrics). */
  get size(): number {
    let n = 0;
    for (const w of this.jobs.values()) n += w.waiters.size;
    return n;
  }

  /**
   * Resolves with job `id` once it is done, dead or cancelled (at once if it already is).
   * @throws {JobValidationError} if `id` is not a positive integer or `timeoutMs` is out of range.
   * @throws {JobNotFoundError} if no such job exists (or it was deleted while waited for).
   * @throws {JobWaitTimeoutError} after `timeoutMs` without a final state.
   * @throws the connection error if the LISTEN connection cannot be opened within its deadline.
   */
  wait(id: number, options: WaitOptions = {}): Promise<Job> {
    checkJobId(id);
    const timeoutMs = options.timeoutMs ?? DEFAULT_WAIT_TIMEOUT_MS;
    if (!Number.isInteger(timeoutMs) || timeoutMs < 1 || timeoutMs > MAX_WAIT_TIMEOUT_MS)
      throw new JobValidationError([
        { field: "timeoutMs", message: `must be an integer from 1 to ${MAX_WAIT_TIMEOUT_MS}` },
      ]);
    options.signal?.throwIfAborted();
    return new Promise<Job>((resolve, reject) => {
      let timer: NodeJS.Timeout | undefined;
      const end = () => {
        clearTimeout(timer);
        options.signal?.removeEventListener("abort", aborted);
        this.remove(id, waiter);
      };
      const waiter: Waiter = {
        resolve: (job) => {
          end();
          resolve(job);
        },
        reject: (error) => {
          end();
          reject(error);
        },
        onProgress: options.onProgress,
        progressJson: "",
        last: null,
      };
      const aborted = () => waiter.reject(options.signal?.reason);
      options.signal?.addEventListener("abort", aborted, { once: true });
      timer = setTimeout(() => waiter.reject(new JobWaitTimeoutError(id, timeoutMs, waiter.last)), timeoutMs);
      let watched = this.jobs.get(id);
      if (!watched) {
        watched = { waiters: new Set(), reading: false, again: false, watch: true };
        this.jobs.set(id, watched);
      }
      watched.waiters.add(waiter);
      // LISTEN first, then read (and on a first wait, mark the job watched): see the top of the file.
      this.listen().then(
        () => this.refresh(id),
        (error: unknown) => waiter.reject(error),
      );
    });
  }

  /** Ends every wait (rejecting it) and closes the LISTEN connection. Idempotent; never throws. */
  async close(): Promise<void> {
    const closing = new TaskQueueError("queue_closed", "the queue was closed while waiting for the job");
    for (const watched of [...this.jobs.values()])
      for (const waiter of [...watched.waiters]) waiter.reject(closing);
    await this.disconnect();
  }

  private remove(id: number, waiter: Waiter): void {
    const watched = this.jobs.get(id);
    if (!watched) return;
    watched.waiters.delete(waiter);
    if (watched.waiters.size === 0) this.jobs.delete(id);
    if (this.jobs.size === 0) void this.disconnect();
  }

  /** Resolves once the LISTEN connection listens (opening it if needed). */
  private listen(): Promise<void> {
    if (this.client) return Promise.resolve();
    this.opening ??= this.open().finally(() => {
      this.opening = null;
    });
    return this.opening;
  }

  private async open(): Promise<void> {
    const connectMs = Math.round((this.options.connectTimeoutSeconds ?? 5) * 1000);
    const client = new pg.Client({
      ...this.pool.options,
      application_name: "taskqueue waits",
      keepAlive: true,
      connectionTimeoutMillis: connectMs,
    });
    client.on("error", () => undefined);
    const missed = () => {
      destroySession(client);
      return new Error(`the LISTEN connection for job waits did not answer within ${connectMs / 1000} s`);
    };
    try {
      await withDeadline(client.connect(), connectMs, missed);
      await withDeadline(client.query(listenForWaits(this.schema)), connectMs, missed);
    } catch (error) {
      destroySession(client);
      throw error;
    }
    const channel = waitChannel(this.schema);
    client.on("notification", (message) => {
      if (message.channel !== channel) return;
      const id = Number(message.payload);
      if (this.jobs.has(id)) void this.refresh(id);
    });
    client.on("error", () => this.lost(client));
    client.on("end", () => this.lost(client));
    this.failures = 0;
    if (this.jobs.size === 0) {
      // Every wait ended while it opened.
      await closeSession(client);
      return;
    }
    this.client = client;
  }

  /** The connection failed or ended: open it again while waits remain, and read every waited job. */
  private lost(client: pg.Client): void {
    if (this.client !== client) return;
    this.client = null;
    destroySession(client);
    this.reconnect();
  }

  private reconnect(): void {
    if (this.jobs.size === 0 || this.retryTimer) return;
    this.retryTimer = setTimeout(() => {
      this.retryTimer = null;
      if (this.jobs.size === 0) return;
      this.listen().then(
        () => {
          for (const id of this.jobs.keys()) void this.refresh(id);
        },
        () => {
          this.failures++;
          this.reconnect();
        },
      );
    }, reconnectDelayMs(this.failures));
  }

  private async disconnect(): Promise<void> {
    if (this.retryTimer) clearTimeout(this.retryTimer);
    this.retryTimer = null;
    const client = this.client;
    this.client = null;
    if (client) await closeSession(client);
  }

  /**
   * Reads job `id` (marking it watched on its first read) and settles its waits: resolved in a
   * final state, rejected if it does not exist, else told of new progress. One read at a time per
   * job. Called only once the connection listens.
   */
  private async refresh(id: number): Promise<void> {
    const watched = this.jobs.get(id);
    if (!watched) return;
    if (watched.reading) {
      watched.again = true;
      return;
    }
    watched.reading = true;
    try {
      do {
        watched.again = false;
        let job: Job | null;
        try {
          const statement = watched.watch ? watchJob(this.schema) : getJob(this.schema);
          const { rows } = await this.pool.query<Job & pg.QueryResultRow>({ ...statement, values: [id] });
          job = rows[0] ?? null;
        } catch (error) {
          for (const waiter of [...watched.waiters]) waiter.reject(error);
          return;
        }
        watched.watch = false;
        this.settle(watched, id, job);
      } while (watched.again && watched.waiters.size > 0);
    } finally {
      watched.reading = false;
    }
  }

  private settle(watched: Watched, id: number, job: Job | null): void {
    for (const waiter of [...watched.waiters]) {
      if (!job) {
        waiter.reject(new JobNotFoundError(id));
        continue;
      }
      waiter.last = job;
      if (FINAL_STATUSES.includes(job.status)) {
        waiter.resolve(job);
        continue;
      }
      if (job.progress === null || !waiter.onProgress) continue;
      const progressJson = JSON.stringify(job.progress);
      if (progressJson === waiter.progressJson) continue;
      waiter.progressJson = progressJson;
      try {
        waiter.onProgress(job.progress, job);
      } catch {
        // A throwing progress callback must not end the wait.
      }
    }
  }
}
