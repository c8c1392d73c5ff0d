/**
 * A worker process's runtime (DESIGN.md §5–6): one lock session that claims batches and writes
 * batched, fenced state changes (on its two connections: see LockSession); a LISTEN session and a
 * poll that wake it; `workerCount` handlers running at once from a bounded local buffer;
 * heartbeats; the stale reaper; graceful shutdown.
 *
 * Data flow: claim (lock connection) → buffer → handler → completion queue → one batched write per
 * flush (write connection), then unlock (lock connection). Handlers never hold a connection.
 */

import { randomBytes } from "node:crypto";
import { EventEmitter } from "node:events";
import { hostname } from "node:os";
import type { ResolvedConfig } from "../config.js";
import { reconnectDelayMs } from "../db/pool.js";
import { SchemaVersionError } from "../errors.js";
import type { Logger } from "../log.js";
import type { Ledger } from "../queue/ledger.js";
import {
  type ClaimedJob,
  type ClaimRef,
  type Completion,
  type Failure,
  LockSession,
  type OnUnlocked,
  type WorkerIdentity,
  type WriteOutcome,
} from "../queue/lock-session.js";
import { latestSchemaVersion } from "../queue/migrate.js";
import type { Job } from "../queue/types.js";
import { jsonBytes, MAX_PAYLOAD_BYTES, toStorableJson } from "../queue/validate.js";
import { NotifyListener } from "./listener.js";
import type { HandlerRegistry } from "./registry.js";

/** Events a worker emits; tests and metrics subscribe instead of polling. */
export interface WorkerEvents {
  "worker:started": [{ workerId: string }];
  "job:claimed": [{ jobs: ClaimedJob[] }];
  "job:completed": [{ id: number }];
  "job:failed": [{ id: number; error: string; status: string }];
  "job:released": [{ id: number }];
  /** A write for this job was refused by the fence, or dropped because the lock session was lost. */
  "job:fenced": [{ id: number; kind: string }];
  "session:lost": [{ error: Error }];
  "session:restored": [];
  "listener:reconnected": [];
  /** A claim ran (`claimed` jobs). */
  "poll:claimed": [{ claimed: number; requested: number }];
  "reaper:reaped": [{ jobs: Job[] }];
  "worker:stopped": [StopReport];
}

/** What {@link Worker.stop} did with the jobs it held. */
export interface StopReport {
  /** Claimed jobs never started, given back to pending. */
  releasedJobIds: number[];
  /** Jobs still running at the grace deadline: aborted and given back to pending. */
  abandonedJobIds: number[];
}

export interface WorkerOptions {
  config: ResolvedConfig & { databaseUrl: string };
  registry: HandlerRegistry;
  /** Ledger on the shared pool (used by the reaper). */
  ledger: Ledger;
  logger: Logger;
  /** Run the stale reaper in this process. Default true. */
  runReaper?: boolean;
  /** Claim only these registered types. Default: every registered type. */
  types?: string[];
  /**
   * Internal: this worker is one lane of a worker with several lock sessions (config
   * `lockSessions`): its id, the share of the lock table its prefetch is capped to (1/n), and the
   * `unreported` map its lanes share (a lane may claim again a job another lane has failed).
   */
  lane?: { id: string; lockTableShare: number; unreported: Map<number, Promise<void>> };
}

/** Events a worker with several lock sessions passes on from its lanes. */
const LANE_EVENTS = [
  "job:claimed",
  "job:completed",
  "job:failed",
  "job:released",
  "job:fenced",
  "session:lost",
  "session:restored",
  "listener:reconnected",
  "poll:claimed",
  "reaper:reaped",
] as const satisfies readonly (keyof WorkerEvents)[];

interface RunningJob {
  job: ClaimedJob;
  generation: number;
  controller: AbortController;
  startedAt: number;
  /**
   * Set when its outcome must not be written: given back at the shutdown deadline, its lock
   * session lost, or its claim gone at a heartbeat. Abandoned jobs get no more heartbeats.
   */
  abandoned: false | "shutdown" | "session lost" | "claim lost";
}

/**
 * The claimed jobs waiting for a handler slot, first in first out. Taking from the front is O(1)
 * (`Array#shift` moves every element: a batch of 800 cost 320,000 moves).
 */
class JobBuffer {
  private items: ClaimedJob[] = [];
  private head = 0;

  get length(): number {
    return this.items.length - this.head;
  }

  push(job: ClaimedJob): void {
    this.items.push(job);
  }

  /** The oldest job, or undefined when empty. */
  take(): ClaimedJob | undefined {
    if (this.head >= this.items.length) return undefined;
    const job = this.items[this.head++];
    if (this.head === this.items.length) {
      this.items = [];
      this.head = 0;
    }
    return job;
  }

  /** The jobs waiting, oldest first (a copy). */
  jobs(): ClaimedJob[] {
    return this.items.slice(this.head);
  }

  /** Empties the buffer and returns what it held, oldest first. */
  takeAll(): ClaimedJob[] {
    const all = this.jobs();
    this.items = [];
    this.head = 0;
    return all;
  }
}

/** Bounded local buffer: at most this share of the server's lock table per worker process. */
const LOCK_TABLE_SHARE = 8;

export class Worker extends EventEmitter<WorkerEvents> {
  /** Unique per process start: `host:pid:random`. */
  readonly id: string;
  private readonly config: WorkerOptions["config"];
  private readonly registry: HandlerRegistry;
  private readonly ledger: Ledger;
  private readonly logger: Logger;
  private readonly runReaper: boolean;
  private readonly types: string[];
  private readonly typeSet: Set<string>;
  private identity: WorkerIdentity;
  private readonly lockTableShare: number;
  /** Set when this worker is a lane of another. */
  private readonly lane: WorkerOptions["lane"];
  /**
   * With `lockSessions` > 1: the lanes, one worker per lock session, each with its share of
   * `workerCount` and `prefetch`. This worker then only starts, stops and speaks for them.
   */
  private readonly lanes: Worker[] | null = null;

  private session: LockSession | null = null;
  private generation = 0;
  private sessionFailures = 0;
  private prefetch: number;
  private listener: NotifyListener | null = null;

  /** Claimed jobs not started yet, all of the current generation (a lost session clears it). */
  private readonly buffer = new JobBuffer();
  private readonly running = new Map<number, RunningJob>();
  private startQueue: ClaimRef[] = [];
  private doneQueue: Completion[] = [];
  private failQueue: Failure[] = [];
  private releaseQueue: ClaimRef[] = [];

  private wakeRequested = false;
  /**
   * Nothing is claimed until start has passed every check (a NOTIFY can arrive while the schema
   * check is still running), and a lane claims nothing until every lane of its process has
   * started (releaseClaims): no job event comes before `start()` resolves.
   */
  private claimsHeld = true;
  private claiming: Promise<void> | null = null;
  private flushing: Promise<void> | null = null;
  /** Written batches whose unlock has not run yet (see afterUnlock). */
  private readonly unlocking = new Set<Promise<void>>();
  /**
   * Jobs whose failed attempt or give-back is being written and not yet reported, each with the
   * report's promise. A claim can take such a job again before its write's answer arrives (the
   * claim runs on the other connection; the session already holds the lock; or another lane's
   * session claims it once the unlock commits), so a claim waits for these reports before it
   * announces or runs the jobs it took: events come in attempt order. Shared by the lanes.
   */
  private readonly unreported: Map<number, Promise<void>>;
  private flushScheduled = false;
  private fencedWrites = 0;
  private started = false;
  private starting: Promise<void> | null = null;
  /** Jobs a claim in flight at stop() brought back: given back at once, part of the stop report. */
  private readonly claimedWhileStopping: number[] = [];
  private stopping = false;
  private stopPromise: Promise<StopReport> | null = null;
  private idleWaiters: (() => void)[] = [];
  private timers: NodeJS.Timeout[] = [];
  private reaping: Promise<void> | null = null;
  private reconnectTimer: NodeJS.Timeout | null = null;
  /** A reconnect attempt in flight (scheduleReconnect), awaited by stop. */
  private reconnecting: Promise<void> | null = null;
  private retryWake: { at: number; timer: NodeJS.Timeout } | null = null;

  constructor(options: WorkerOptions) {
    super();
    this.config = options.config;
    this.registry = options.registry;
    this.ledger = options.ledger;
    this.logger = options.logger;
    this.runReaper = options.runReaper ?? true;
    const unknown = (options.types ?? []).filter((t) => !this.registry.get(t));
    if (unknown.length > 0) throw new Error(`no handler registered for ${unknown.join(", ")}`);
    this.types = options.types ? [...new Set(options.types)].sort() : this.registry.types();
    this.typeSet = new Set(this.types);
    this.id = options.lane?.id ?? `${hostname()}:${process.pid}:${randomBytes(3).toString("hex")}`;
    this.prefetch = Math.max(this.config.prefetch ?? this.config.workerCount, 1);
    this.lockTableShare = options.lane?.lockTableShare ?? LOCK_TABLE_SHARE;
    this.lane = options.lane;
    this.unreported = options.lane?.unreported ?? new Map();
    // Every lane needs a handler slot and a job of the prefetch, or the process would hold more.
    const laneCount = Math.min(this.config.lockSessions, this.config.workerCount, this.prefetch);
    if (!options.lane && laneCount < this.config.lockSessions)
      this.logger.warn(
        {
          lockSessions: this.config.lockSessions,
          workerCount: this.config.workerCount,
          prefetch: this.prefetch,
          running: laneCount,
        },
        "fewer lock sessions than asked: every lock session needs a handler slot and a job of the prefetch",
      );
    if (!options.lane && laneCount > 1) {
      const share = (total: number, i: number) =>
        Math.floor(total / laneCount) + (i < total % laneCount ? 1 : 0);
      this.lanes = Array.from(
        { length: laneCount },
        (_, i) =>
          new Worker({
            ...options,
            config: {
              ...this.config,
              lockSessions: 1,
              workerCount: share(this.config.workerCount, i),
              prefetch: Math.max(share(this.prefetch, i), 1),
            },
            runReaper: this.runReaper && i === 0,
            types: this.types,
            lane: {
              id: `${this.id}/${i + 1}`,
              lockTableShare: LOCK_TABLE_SHARE * laneCount,
              unreported: this.unreported,
            },
          }),
      );
    }
    this.identity = {
      id: this.id,
      host: hostname(),
      pid: process.pid,
      types: this.types,
      concurrency: this.config.workerCount,
    };
  }

  /** Handlers currently running. */
  get runningCount(): number {
    return this.lanes ? this.lanes.reduce((sum, lane) => sum + lane.runningCount, 0) : this.running.size;
  }

  /** Jobs whose advisory lock this process holds or is about to release. */
  private get heldCount(): number {
    return (
      this.buffer.length +
      this.running.size +
      this.doneQueue.length +
      this.failQueue.length +
      this.releaseQueue.length
    );
  }

  /**
   * Opens the lock session and LISTEN, registers the worker row, starts poll, heartbeat and
   * reaper, and issues the first claim (whose events come after this resolves).
   * @throws if no handler is registered, the schema is older than this code, or the first
   * connection to the database fails.
   */
  async start(): Promise<void> {
    if (this.started) throw new Error("worker already started");
    if (this.types.length === 0)
      throw new Error("no handlers registered: a worker needs at least one job type");
    this.started = true;
    this.starting = this.lanes ? this.startLanes(this.lanes) : this.startSession();
    await this.starting;
  }

  /** Start of a single-session worker (or of one lane). */
  private async startSession(): Promise<void> {
    const listener = new NotifyListener({
      connectionString: this.config.databaseUrl,
      channel: this.config.notifyChannel,
      logger: this.logger,
      onNotify: (payload) => this.onNotify(payload),
      onReconnect: () => {
        this.emit("listener:reconnected");
        this.wake();
      },
    });
    this.listener = listener;
    // The schema check, the lock session and the LISTEN connection at once; then the worker row
    // (on a schema that passed the check); the first claim (wake, below) comes after all of them,
    // so no notification before it can be missed and the row exists once start() resolves.
    const results = await Promise.allSettled([
      this.lane ? Promise.resolve() : this.checkSchemaVersion(),
      this.openSession(),
      listener.start(),
    ]);
    const failure = results.find((r): r is PromiseRejectedResult => r.status === "rejected");
    try {
      if (failure) throw failure.reason;
      await this.session?.heartbeat(this.identity, this.fencedWrites, []);
    } catch (error) {
      // A failed worker stays stopped: no reconnect of a session lost meanwhile either.
      this.stopping = true;
      if (this.reconnectTimer) clearTimeout(this.reconnectTimer);
      this.reconnectTimer = null;
      await listener.stop();
      const session = this.session;
      this.session = null;
      await session?.close();
      throw error;
    }
    const session = this.session as LockSession | null;
    if (session) {
      const cap = Math.max(1, Math.floor(session.lockTableSlots / this.lockTableShare));
      if (this.prefetch > cap) {
        this.logger.warn({ prefetch: this.prefetch, cap }, "prefetch capped to stay within the lock table");
        this.prefetch = cap;
      }
    }
    this.every(this.config.pollIntervalSeconds, true, () => this.wake());
    this.every(this.config.heartbeatIntervalSeconds, false, () => void this.heartbeat());
    if (this.runReaper) this.every(this.config.reaperIntervalSeconds, true, () => void this.reap());
    this.logger.info(
      { workerId: this.id, types: this.types, concurrency: this.config.workerCount, prefetch: this.prefetch },
      "worker started",
    );
    this.emit("worker:started", { workerId: this.id });
    // A lane waits for the others (releaseClaims); a single worker claims from here on.
    if (!this.lane) this.claimsHeld = false;
    this.wake();
  }

  /** Lets a lane claim, once every lane of the process has started; claims what it was woken for. */
  private releaseClaims(): void {
    this.claimsHeld = false;
    this.claimLoop();
  }

  /** @throws {SchemaVersionError} unless the schema is at the version this code needs. */
  private async checkSchemaVersion(): Promise<void> {
    const required = latestSchemaVersion();
    const found = await this.ledger.schemaVersion();
    if (found < required) throw new SchemaVersionError(this.config.schema, found, required);
  }

  /** Starts every lane and passes their events on; if any fails to start, every lane is stopped. */
  private async startLanes(lanes: Worker[]): Promise<void> {
    await this.checkSchemaVersion();
    for (const lane of lanes)
      for (const event of LANE_EVENTS)
        lane.on(event, (...args: unknown[]) =>
          (this.emit as (e: string, ...a: unknown[]) => boolean)(event, ...args),
        );
    const results = await Promise.allSettled(lanes.map((lane) => lane.start()));
    const failure = results.find((r) => r.status === "rejected");
    if (failure) {
      await Promise.all(lanes.map((lane) => lane.stop(0)));
      throw failure.reason;
    }
    if (!this.stopping) for (const lane of lanes) lane.releaseClaims();
    this.logger.info(
      { workerId: this.id, lockSessions: lanes.length, concurrency: this.config.workerCount },
      "worker started",
    );
    this.emit("worker:started", { workerId: this.id });
  }

  /** Runs `fn` every `seconds` (± 10 % when `jitter`), until stop. */
  private every(seconds: number, jitter: boolean, fn: () => void): void {
    const slot = this.timers.length;
    const arm = () => {
      const factor = jitter ? 0.9 + Math.random() * 0.2 : 1;
      const timer = setTimeout(
        () => {
          if (this.stopping) return;
          fn();
          arm();
        },
        seconds * 1000 * factor,
      );
      this.timers[slot] = timer;
    };
    arm();
  }

  /** Wakes once at the earliest retry due time this worker knows of (retries do not NOTIFY). */
  private wakeIn(seconds: number): void {
    const at = Date.now() + seconds * 1000;
    if (this.retryWake && this.retryWake.at <= at) return;
    if (this.retryWake) clearTimeout(this.retryWake.timer);
    const timer = setTimeout(
      () => {
        this.retryWake = null;
        this.wake();
      },
      seconds * 1000 + 5,
    );
    this.retryWake = { at, timer };
  }

  private onNotify(payload: string): void {
    if (payload === "*" || payload.split(",").some((type) => this.typeSet.has(type))) this.wake();
  }

  /** Asks for a claim as soon as there is room. */
  wake(): void {
    if (this.lanes) {
      for (const lane of this.lanes) lane.wake();
      return;
    }
    this.wakeRequested = true;
    this.claimLoop();
  }

  /** Claims as many jobs as there is room for, when asked to and no claim is in flight. */
  private claimLoop(): void {
    if (this.claiming || this.stopping || this.claimsHeld) return;
    const session = this.session;
    if (!session || session.isLost || !this.wakeRequested) return;
    const free = this.prefetch - this.heldCount;
    if (free <= 0) return;
    this.wakeRequested = false;
    const generation = this.generation;
    this.claiming = (async () => {
      try {
        const jobs = await session.claim(this.types, free);
        if (this.unreported.size > 0) {
          const reports = new Set(jobs.flatMap((job) => this.unreported.get(job.id) ?? []));
          if (reports.size > 0) await Promise.all(reports);
        }
        this.emit("poll:claimed", { claimed: jobs.length, requested: free });
        if (jobs.length === free) this.wakeRequested = true;
        if (jobs.length > 0) this.emit("job:claimed", { jobs });
        if (generation === this.generation) {
          // (else the session was lost meanwhile: the locks are gone, the reaper returns the jobs)
          for (const job of jobs) {
            if (this.stopping) {
              this.releaseQueue.push({ id: job.id, attempt: job.attempt });
              this.claimedWhileStopping.push(job.id);
            } else this.buffer.push(job);
          }
          if (this.stopping) this.scheduleFlush();
        }
      } catch (error) {
        // A failed claim may have taken advisory locks it never reports: drop the session, which
        // releases every lock it held, and let the reaper return its jobs.
        this.logger.error({ err: error }, "claim failed; resetting the lock session");
        this.sessionLost(session, error as Error);
      } finally {
        this.claiming = null;
      }
      this.dispatch();
      this.claimLoop();
    })();
  }

  /** Starts handlers from the buffer while there is a free slot. */
  private dispatch(): void {
    while (!this.stopping && this.running.size < this.config.workerCount && this.buffer.length > 0)
      this.runJob(this.buffer.take() as ClaimedJob);
  }

  /** Runs a buffered job, which belongs to the current generation (see `buffer`). */
  private runJob(job: ClaimedJob): void {
    const generation = this.generation;
    const controller = new AbortController();
    const entry: RunningJob = { job, generation, controller, startedAt: performance.now(), abandoned: false };
    this.running.set(job.id, entry);
    this.startQueue.push(job);
    this.scheduleFlush();
    const handler = this.registry.get(job.type);
    void (async () => {
      let result: unknown;
      let failure: string | null = null;
      try {
        if (!handler) throw new Error(`no handler registered for type ${job.type}`);
        result = await handler(
          {
            id: job.id,
            type: job.type,
            payload: job.payload,
            attempt: job.attempt,
            maxRetries: job.maxRetries,
          },
          controller.signal,
        );
      } catch (error) {
        failure = describeError(error);
      }
      this.finishJob(entry, result, failure);
    })().catch((error: unknown) => {
      // finishJob does not throw; should it ever, the process must not die with the other jobs.
      this.logger.error({ err: error, jobId: job.id }, "recording a job's outcome failed");
    });
  }

  private finishJob(entry: RunningJob, result: unknown, failure: string | null): void {
    const { job } = entry;
    this.running.delete(job.id);
    const runMs = performance.now() - entry.startedAt;
    if (entry.abandoned === "shutdown") {
      this.logger.debug({ jobId: job.id }, "job given back at shutdown finished; its outcome is not written");
    } else if (entry.abandoned || entry.generation !== this.generation) {
      this.fenced(job.id, entry.abandoned || "session lost");
      // A claim lost while its session lives: nothing is written, but the session still holds the
      // job's lock, which kept anyone else from running it until this handler returned.
      if (entry.abandoned === "claim lost" && entry.generation === this.generation && this.session)
        this.waitForUnlock(this.session.releaseLocks([job.id]));
    } else if (failure === null) {
      const stored = toStorableJson(result, "result");
      if ("json" in stored && jsonBytes(stored.json) > MAX_PAYLOAD_BYTES)
        this.failQueue.push({
          id: job.id,
          attempt: job.attempt,
          error: `handler result is ${jsonBytes(stored.json)} bytes as JSON; the most a job stores is ${MAX_PAYLOAD_BYTES} (1 MiB)`,
          runMs,
        });
      else if ("json" in stored)
        this.doneQueue.push({ id: job.id, attempt: job.attempt, resultJson: stored.json, runMs });
      else
        this.failQueue.push({
          id: job.id,
          attempt: job.attempt,
          error: `handler result cannot be stored: ${stored.problem.field} ${stored.problem.message}`,
          runMs,
        });
    } else {
      this.failQueue.push({ id: job.id, attempt: job.attempt, error: failure, runMs });
    }
    this.scheduleFlush();
    this.dispatch();
    if (this.running.size === 0) for (const resolve of this.idleWaiters.splice(0)) resolve();
  }

  private fenced(id: number, kind: string): void {
    this.fencedWrites++;
    this.logger.warn({ jobId: id, kind }, "late write refused: this worker no longer owns the job's claim");
    this.emit("job:fenced", { id, kind });
  }

  /** Coalesces every queued write of this tick into one flush. */
  private scheduleFlush(): void {
    if (this.flushScheduled) return;
    this.flushScheduled = true;
    setImmediate(() => {
      this.flushScheduled = false;
      if (!this.flushing) this.flushing = this.flushLoop().finally(() => (this.flushing = null));
    });
  }

  private async flushLoop(): Promise<void> {
    do {
      while (this.queuedWrites > 0) await this.flushOnce();
      // Every written batch is reported once its unlock has run; more may have queued meanwhile.
      await Promise.all(this.unlocking);
    } while (this.queuedWrites > 0);
    if (this.running.size === 0 && this.heldCount === 0)
      for (const resolve of this.idleWaiters.splice(0)) resolve();
    this.claimLoop();
  }

  private get queuedWrites(): number {
    return this.startQueue.length + this.doneQueue.length + this.failQueue.length + this.releaseQueue.length;
  }

  /**
   * Writes everything queued, one statement per kind, on the write connection. Each batch's unlock
   * is asked for as its write returns (the claim sent by the next flush, in the same turn, carries it; see
   * `LockSession.unlock`); the next flush does not wait for it.
   */
  private async flushOnce(): Promise<void> {
    const session = this.session;
    const starts = this.startQueue;
    let done = this.doneQueue;
    let failed = this.failQueue;
    let released = this.releaseQueue;
    this.startQueue = [];
    this.doneQueue = [];
    this.failQueue = [];
    this.releaseQueue = [];
    if (!session || session.isLost) {
      for (const item of [...done, ...failed, ...released]) this.fenced(item.id, "session lost");
      return;
    }
    // Only jobs still running are marked running: one that already finished (no longer in
    // `running`) goes straight to done/failed, its started_at derived from runMs.
    const toStart = starts.filter((s) => this.running.get(s.id)?.abandoned === false);
    // Pipelining: the next claim goes out on the lock connection right as these writes go out
    // on the write connection, so the database claims the next batch while it writes this one,
    // and the handlers of the next batch run while this one is written.
    const failuresReported = this.trackReports(failed);
    const releasesReported = this.trackReports(released);
    this.claimLoop();
    try {
      if (toStart.length > 0) {
        const moved = await session.markRunning(toStart);
        for (const s of toStart) if (!moved.has(s.id)) this.claimLost(s.id);
      }
      const completedBatch = done;
      const completed = await session.writeCompletions(
        completedBatch,
        this.afterUnlock(
          session,
          () => undefined,
          (refused: number[]) =>
            this.applied(completedBatch, refused, "complete", (id) => this.emit("job:completed", { id })),
        ),
      );
      done = [];
      this.waitForUnlock(completed.unlocked);
      const errors = new Map(failed.map((f) => [f.id, f.error]));
      const failures = await session.writeFailures(
        failed,
        this.config,
        this.afterUnlock(session, failuresReported, (outcomes: WriteOutcome[]) => {
          this.outcomes(outcomes, "fail", (o) => {
            this.emit("job:failed", {
              id: o.id,
              error: errors.get(o.id) ?? "",
              status: o.status ?? "pending",
            });
            if (o.status === "pending" && o.retry_in_seconds !== undefined) this.wakeIn(o.retry_in_seconds);
          });
        }),
      );
      failed = [];
      this.waitForUnlock(failures.unlocked);
      const releasedBatch = released;
      const releases = await session.writeReleases(
        releasedBatch,
        this.afterUnlock(session, releasesReported, (refused: number[]) => {
          this.applied(releasedBatch, refused, "release", (id) => this.emit("job:released", { id }));
        }),
      );
      released = [];
      this.waitForUnlock(releases.unlocked);
    } catch (error) {
      if (!session.isLost) {
        this.logger.error({ err: error }, "batched write failed; resetting the lock session");
        this.sessionLost(session, error as Error);
      }
      // Batches already written are reported through their unlock; the rest were not written.
      for (const item of [...done, ...failed, ...released]) this.fenced(item.id, "write failed");
      if (failed.length > 0) failuresReported();
      if (released.length > 0) releasesReported();
    }
  }

  /**
   * The callback that reports a written batch once its unlock has run (LockSession calls it before
   * anything else learns of that statement, so a job's outcome is reported before its next attempt
   * is claimed). If the unlock failed, the session is reset (which releases the locks); the
   * outcomes were committed either way.
   */
  private afterUnlock<T>(
    session: LockSession,
    reported: () => void,
    report: (outcome: T) => void,
  ): OnUnlocked<T> {
    return (outcome, unlockError) => {
      try {
        if (unlockError !== null && !session.isLost) {
          this.logger.error({ err: unlockError }, "unlock failed; resetting the lock session");
          this.sessionLost(session, unlockError as Error);
        }
        report(outcome);
      } catch (error) {
        this.logger.error({ err: error }, "a listener of a job event threw");
      } finally {
        reported();
      }
    };
  }

  /**
   * Marks `batch` as being written and not yet reported (see `unreported`), before its write goes
   * out; returns the function that marks it reported (idempotent). An empty batch is reported.
   */
  private trackReports(batch: readonly ClaimRef[]): () => void {
    if (batch.length === 0) return () => undefined;
    let resolve: () => void = () => undefined;
    const reported = new Promise<void>((r) => {
      resolve = r;
    });
    for (const { id } of batch) this.unreported.set(id, reported);
    return () => {
      for (const { id } of batch) if (this.unreported.get(id) === reported) this.unreported.delete(id);
      resolve();
    };
  }

  /** Lets flushes and stop() wait until `unlocked` (whose report runs first) has settled. */
  private waitForUnlock(unlocked: Promise<void>): void {
    const settled: Promise<void> = unlocked
      .catch(() => undefined)
      .finally(() => this.unlocking.delete(settled));
    this.unlocking.add(settled);
  }

  /** Reports each written job as applied, except those the fence refused. */
  private applied(
    batch: readonly ClaimRef[],
    refused: number[],
    kind: string,
    onApplied: (id: number) => void,
  ) {
    const refusedSet = refused.length > 0 ? new Set(refused) : null;
    for (const { id } of batch) {
      if (refusedSet?.has(id)) this.fenced(id, kind);
      else onApplied(id);
    }
  }

  private outcomes(rows: WriteOutcome[], kind: string, onApplied: (o: WriteOutcome) => void): void {
    for (const o of rows) {
      if (o.applied) onApplied(o);
      else this.fenced(o.id, kind);
    }
  }

  /** The database no longer shows this worker owning a job it runs: never write its outcome. */
  private claimLost(id: number): void {
    const entry = this.running.get(id);
    if (entry && !entry.abandoned) {
      entry.abandoned = "claim lost";
      this.logger.warn({ jobId: id }, "claim lost while running; the outcome will not be written");
    }
  }

  private async heartbeat(): Promise<void> {
    const session = this.session;
    if (!session || session.isLost) return;
    const held: ClaimRef[] = [
      ...this.buffer.jobs().map((job) => ({ id: job.id, attempt: job.attempt })),
      ...[...this.running.values()]
        .filter((r) => !r.abandoned)
        .map((r) => ({ id: r.job.id, attempt: r.job.attempt })),
    ];
    try {
      const alive = await session.heartbeat(this.identity, this.fencedWrites, held);
      for (const ref of held) if (!alive.has(ref.id) && this.running.has(ref.id)) this.claimLost(ref.id);
    } catch (error) {
      if (!session.isLost) this.logger.warn({ err: error }, "heartbeat failed");
    }
  }

  private async reap(): Promise<void> {
    if (this.reaping) return;
    this.reaping = (async () => {
      try {
        const jobs = await this.ledger.reapStale(this.config);
        if (jobs.length > 0) {
          this.logger.warn({ jobIds: jobs.map((j) => j.id) }, "reaper reclaimed stale jobs");
          this.emit("reaper:reaped", { jobs });
        }
      } catch (error) {
        this.logger.warn({ err: error }, "reaper pass failed");
      } finally {
        this.reaping = null;
      }
    })();
    await this.reaping;
  }

  /** Opens a lock session and makes it the current one. @throws if either connection fails. */
  private async openSession(): Promise<void> {
    const session = await LockSession.open({
      connectionString: this.config.databaseUrl,
      schema: this.config.schema,
      workerId: this.id,
      onLost: (error) => this.sessionLost(session, error),
    });
    this.session = session;
    this.sessionFailures = 0;
  }

  /**
   * The lock session is gone, and with it every advisory lock: nothing it held may be written any
   * more (the reaper hands those jobs out again). Reconnects with capped backoff.
   */
  private sessionLost(session: LockSession, error: Error): void {
    if (this.session !== session) return;
    this.session = null;
    this.generation++;
    void session.close();
    const dropped = this.buffer.takeAll().length;
    this.startQueue = [];
    // Outcomes queued but not yet written belong to the lost session's claims: never hand them in
    // through the next session, which would pass the row fence (same worker id) without the lock.
    for (const item of [...this.doneQueue, ...this.failQueue, ...this.releaseQueue])
      this.fenced(item.id, "session lost");
    this.doneQueue = [];
    this.failQueue = [];
    this.releaseQueue = [];
    // Their locks are gone: stop the handlers and the heartbeats, so the reaper can hand the jobs
    // out again once their heartbeat is stale.
    for (const entry of this.running.values()) {
      if (entry.abandoned) continue;
      entry.abandoned = "session lost";
      entry.controller.abort(new Error("lock session lost: this job will be run again elsewhere"));
    }
    this.logger.error(
      { err: error, dropped, running: this.running.size },
      "lock session lost; its jobs will be reclaimed by the reaper",
    );
    this.emit("session:lost", { error });
    this.scheduleReconnect();
  }

  private scheduleReconnect(): void {
    if (this.stopping || this.reconnectTimer) return;
    this.reconnectTimer = setTimeout(() => {
      this.reconnectTimer = null;
      if (this.stopping) return;
      this.reconnecting = this.reconnect().finally(() => {
        this.reconnecting = null;
      });
    }, reconnectDelayMs(this.sessionFailures));
  }

  /** One attempt to open a new lock session, then claims through it unless a stop began. */
  private async reconnect(): Promise<void> {
    try {
      await this.openSession();
    } catch (error) {
      this.sessionFailures++;
      this.logger.warn({ err: error }, "lock session reconnect failed; retrying");
      this.scheduleReconnect();
      return;
    }
    // A stop that began meanwhile waits for this attempt (doStop), then closes the new session
    // itself, deleting the worker row through it: nothing is claimed or announced here.
    if (this.stopping) return;
    this.logger.info("lock session re-established");
    this.emit("session:restored");
    this.wake();
    void this.heartbeat();
  }

  /**
   * Graceful stop (DESIGN.md §6): stop claiming, give back claimed jobs not started, let running
   * handlers finish within `shutdownGraceSeconds`, then abort the rest and give them back to
   * pending; release every lock, delete the worker row, close connections. Idempotent: repeated
   * calls return the same promise. Never throws.
   * @param graceSeconds overrides config.shutdownGraceSeconds (0: abort at once).
   */
  stop(graceSeconds = this.config.shutdownGraceSeconds): Promise<StopReport> {
    this.stopPromise ??= this.doStop(graceSeconds);
    return this.stopPromise;
  }

  private async doStop(graceSeconds: number): Promise<StopReport> {
    this.stopping = true;
    // A stop during start waits for it, so that whatever it opened is closed below.
    await this.starting?.catch(() => undefined);
    if (this.lanes) {
      const reports = await Promise.all(this.lanes.map((lane) => lane.stop(graceSeconds)));
      const report = {
        releasedJobIds: reports.flatMap((r) => r.releasedJobIds),
        abandonedJobIds: reports.flatMap((r) => r.abandonedJobIds),
      };
      this.emit("worker:stopped", report);
      return report;
    }
    for (const timer of this.timers) clearTimeout(timer);
    if (this.reconnectTimer) clearTimeout(this.reconnectTimer);
    await this.reconnecting;
    if (this.retryWake) clearTimeout(this.retryWake.timer);
    await this.listener?.stop();
    await this.claiming;
    const unstarted = this.buffer.takeAll();
    const releasedJobIds = [...this.claimedWhileStopping, ...unstarted.map((job) => job.id)];
    for (const job of unstarted) this.releaseQueue.push({ id: job.id, attempt: job.attempt });
    this.scheduleFlush();

    if (this.running.size > 0) {
      let timer: NodeJS.Timeout | undefined;
      await Promise.race([
        new Promise<void>((resolve) => this.idleWaiters.push(resolve)),
        new Promise<void>((resolve) => {
          timer = setTimeout(resolve, graceSeconds * 1000);
        }),
      ]);
      clearTimeout(timer);
    }
    const abandonedJobIds: number[] = [];
    for (const entry of this.running.values()) {
      if (entry.abandoned) continue;
      entry.abandoned = "shutdown";
      entry.controller.abort(new Error("worker shutting down: grace period over"));
      if (entry.generation === this.generation) {
        abandonedJobIds.push(entry.job.id);
        this.releaseQueue.push({ id: entry.job.id, attempt: entry.job.attempt });
      }
    }
    if (abandonedJobIds.length > 0)
      this.logger.warn(
        { jobIds: abandonedJobIds },
        "jobs still running at the grace deadline were given back",
      );
    this.scheduleFlush();
    await new Promise<void>((resolve) => setImmediate(resolve));
    while (this.flushing || this.flushScheduled) {
      await this.flushing;
      await new Promise<void>((resolve) => setImmediate(resolve));
    }
    await this.reaping;
    // A failure in the last flush may have armed a retry wake-up; nothing is left to wake.
    if (this.retryWake) clearTimeout(this.retryWake.timer);
    this.retryWake = null;
    const session = this.session;
    this.session = null;
    if (session && !session.isLost) {
      await session
        .deleteWorker()
        .catch((error: unknown) => this.logger.warn({ err: error }, "worker row not deleted"));
    }
    await session?.close();
    const report = { releasedJobIds, abandonedJobIds };
    this.logger.info(report, "worker stopped");
    this.emit("worker:stopped", report);
    return report;
  }
}

/** A failed attempt's error text: `Name: message`, NUL-free and at most 4,000 characters. */
export function describeError(error: unknown): string {
  let text: string;
  try {
    text =
      error instanceof Error
        ? `${error.name === "Error" ? "" : `${error.name}: `}${error.message}`
        : String(error);
  } catch {
    // A thrown value with no way to become a string (Object.create(null), a throwing toString).
    text = "handler threw a value that cannot be turned into a message";
  }
  return String(text).replaceAll("\u0000", "\\u0000").slice(0, 4000) || "handler failed without a message";
}
