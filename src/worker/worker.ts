/**
 * The public `Worker` (DESIGN.md §5–6): a pool of lanes, each with its own lock session (see
 * lane.ts). It owns only what is common to its lanes: splitting `workerCount` and `prefetch` among
 * them, the schema check, starting and stopping them together, the events they emit (every lane
 * emits through this worker's safe emit, see events.ts), the run-alone gate they share (a job
 * reclaimed from a lost process runs only while the process holds nothing else, run-alone.ts) and
 * the pool's lifecycle, {@link WorkerState}.
 *
 * Data flow in a lane: claim (lock connection) → buffer → handler → outcome queue → one batched
 * write per flush (write connection), then unlock (riding on the next claim). Handlers never hold
 * a connection.
 */

import { randomBytes } from "node:crypto";
import { hostname } from "node:os";
import type { ResolvedConfig } from "../config.js";
import { HandlerMissingError, PoolingModeError, SchemaVersionError, WorkerStateError } from "../errors.js";
import type { Logger } from "../log.js";
import { type MetricsServer, serveMetrics, WorkerProcessMetrics } from "../metrics/worker.js";
import type { Ledger } from "../queue/ledger.js";
import { latestSchemaVersion } from "../queue/migrate.js";
import {
  assertSessionPooling,
  type PoolingProbe,
  type ProbeQuery,
  resolvePooling,
} from "../queue/pooling.js";
import { type StopReport, WorkerEmitter } from "./events.js";
import { JobObserver } from "./job-observer.js";
import { Lane } from "./lane.js";
import type { UnreportedReports } from "./outcome-writer.js";
import type { HandlerRegistry } from "./registry.js";
import { RunAloneGate } from "./run-alone.js";
import { Scheduler } from "./scheduler.js";

export type { FencedWrite, FenceReason, JobCompletedEvent, StopReport, WorkerEvents } from "./events.js";

export interface WorkerOptions {
  config: ResolvedConfig & { databaseUrl: string };
  registry: HandlerRegistry;
  /** Ledger on the shared pool (used by the schema check and the reaper). */
  ledger: Ledger;
  logger: Logger;
  /** Run the stale reaper in this process (on lane 1). Default true. */
  runReaper?: boolean;
  /** Claim only these registered types. Default: every registered type. */
  types?: string[];
  /**
   * The pooling mode in front of PostgreSQL (src/queue/pooling.ts); the start refuses anything but
   * a session of its own. Called with the first lane's lock session's connections to probe on, or
   * with none (that session did not open: a probe on connections of its own). Default:
   * {@link resolvePooling} of `config` (a probe when `"auto"`).
   */
  pooling?: (connections?: readonly [ProbeQuery, ProbeQuery]) => Promise<PoolingProbe>;
  /** Run the cron scheduler in this process (enqueues schedules' ticks, scheduler.ts). Default true. */
  runScheduler?: boolean;
}

/**
 * - `created`: constructed; `start()` allowed once;
 * - `starting`: lanes opening; `running`: every lane claims;
 * - `stopping`: `stop()` began (during start, it waits for the start to settle);
 * - `stopped`: every lane stopped; `failed`: start failed, everything opened is closed.
 */
export type WorkerState = "created" | "starting" | "running" | "stopping" | "stopped" | "failed";

/**
 * What `Worker.health()` reports (for `/ready` and operators):
 * - `state`: the worker's lifecycle state;
 * - `lockSessions`: each lane's lock session, by lane id: `open`, `lost` (a reconnect is armed),
 *   `reconnecting` (an attempt in flight) or `closed`;
 * - `listener`: `listening` if every lane's LISTEN connection is up, `reconnecting` if one is being
 *   re-established, else `stopped`;
 * - `notifyTrigger`: whether the insert trigger that NOTIFYs workers exists (checked at start and at
 *   every LISTEN reconnect; false if any lane found it missing), null until checked.
 */
export interface WorkerHealth {
  state: WorkerState;
  lockSessions: { id: string; state: "open" | "lost" | "reconnecting" | "closed" }[];
  listener: "listening" | "reconnecting" | "stopped";
  notifyTrigger: boolean | null;
}

/** Bounded local buffer: at most this share of the server's lock table per worker process. */
const LOCK_TABLE_SHARE = 8;

export class Worker extends WorkerEmitter {
  /** Unique per process start: `host:pid:random`. */
  readonly id: string;
  private workerState: WorkerState = "created";
  private readonly config: WorkerOptions["config"];
  private readonly ledger: Ledger;
  /** The pooling mode in front of PostgreSQL, asked once at start (see WorkerOptions.pooling). */
  private readonly pooling: NonNullable<WorkerOptions["pooling"]>;
  private readonly types: string[];
  /** One lane per lock session, each with its share of `workerCount` and `prefetch`; at least one. */
  private readonly lanes: Lane[];
  private starting: Promise<void> | null = null;
  /** Enqueues schedules' ticks while the worker runs; null with `runScheduler: false`. */
  private readonly scheduler: Scheduler | null;
  private stopPromise: Promise<StopReport> | null = null;
  /** This process's own metrics, when `workerMetricsPort` is set (metrics/worker.ts). */
  private readonly processMetrics: WorkerProcessMetrics | null;
  private readonly observer: JobObserver;
  private metricsServer: MetricsServer | null = null;

  /** @throws {HandlerMissingError} if a type of `types` has no registered handler. */
  constructor(options: WorkerOptions) {
    super(options.logger);
    const { config, registry } = options;
    this.config = config;
    this.ledger = options.ledger;
    this.pooling = options.pooling ?? ((connections) => resolvePooling(config, connections));
    const unknown = (options.types ?? []).filter((t) => !registry.get(t));
    if (unknown.length > 0) throw new HandlerMissingError(unknown);
    this.types = options.types ? [...new Set(options.types)].sort() : registry.types();
    this.id = `${hostname()}:${process.pid}:${randomBytes(3).toString("hex")}`;
    const prefetch = Math.max(config.prefetch ?? config.workerCount, 1);
    // Every lane needs a handler slot and a job of the prefetch, or the process would hold more.
    const laneCount = Math.max(1, Math.min(config.lockSessions, config.workerCount, prefetch));
    if (laneCount < config.lockSessions)
      this.logger.warn(
        { lockSessions: config.lockSessions, workerCount: config.workerCount, prefetch, running: laneCount },
        "fewer lock sessions than asked: every lock session needs a handler slot and a job of the prefetch",
      );
    const share = (total: number, i: number) =>
      Math.floor(total / laneCount) + (i < total % laneCount ? 1 : 0);
    const unreported: UnreportedReports = new Map();
    this.lanes = Array.from({ length: laneCount }, (_, i) => {
      const id = laneCount === 1 ? this.id : `${this.id}/${i + 1}`;
      const lanePrefetch = Math.max(share(prefetch, i), 1);
      const laneConfig =
        laneCount === 1
          ? config
          : { ...config, lockSessions: 1, workerCount: share(config.workerCount, i), prefetch: lanePrefetch };
      return new Lane({
        id,
        config: laneConfig,
        prefetch: lanePrefetch,
        lockTableShare: LOCK_TABLE_SHARE * laneCount,
        types: this.types,
        registry,
        ledger: this.ledger,
        logger: this.logger,
        runReaper: (options.runReaper ?? true) && i === 0,
        events: this,
        unreported,
        identity: {
          id,
          host: hostname(),
          pid: process.pid,
          types: this.types,
          concurrency: laneConfig.workerCount,
        },
      });
    });
    this.processMetrics =
      config.workerMetricsPort === undefined ? null : new WorkerProcessMetrics(() => this.runningCount);
    this.observer = new JobObserver(this, this.logger, this.id, this.ledger, this.processMetrics);
    this.scheduler =
      (options.runScheduler ?? true) ? new Scheduler(this.ledger, config, this, this.logger) : null;
    // A run-alone job runs only while the whole process holds nothing else (DESIGN.md §6).
    const gate = new RunAloneGate();
    for (const lane of this.lanes) lane.dispatcher.joinGate(gate);
  }

  /** The pool's lifecycle state. */
  get state(): WorkerState {
    return this.workerState;
  }

  /** The state of the worker's connections (see {@link WorkerHealth}). Never throws, sends nothing. */
  health(): WorkerHealth {
    const listeners = this.lanes.map((lane) => lane.listenerState);
    const triggers = this.lanes.map((lane) => lane.listener?.notifyTrigger ?? null);
    return {
      state: this.workerState,
      lockSessions: this.lanes.map((lane) => ({ id: lane.id, state: lane.supervisor.health })),
      listener: listeners.includes("reconnecting")
        ? "reconnecting"
        : listeners.every((state) => state === "listening")
          ? "listening"
          : "stopped",
      notifyTrigger: triggers.includes(false) ? false : triggers.includes(true) ? true : null,
    };
  }

  /**
   * Address of this process's metrics server (GET /metrics), once started; null when
   * `workerMetricsPort` is not set.
   */
  get metricsAddress(): { host: string; port: number } | null {
    return this.metricsServer ? { host: this.metricsServer.host, port: this.metricsServer.port } : null;
  }

  /** Handlers currently running, over every lane. */
  get runningCount(): number {
    let sum = 0;
    for (const lane of this.lanes) sum += lane.runningCount;
    return sum;
  }

  /**
   * created → starting → running: checks the schema while every lane opens its lock session and
   * LISTEN, then lets every lane claim (whose events come after this resolves). On failure →
   * failed, with every lane closed.
   * @throws {WorkerStateError} if called more than once.
   * @throws {HandlerMissingError} if no handler is registered.
   * @throws {SchemaVersionError} if the schema is older than this code; or the first connection
   * error.
   */
  async start(): Promise<void> {
    if (this.workerState !== "created")
      throw new WorkerStateError(`worker already ${this.workerState === "stopped" ? "stopped" : "started"}`);
    if (this.types.length === 0) throw new HandlerMissingError([]);
    this.workerState = "starting";
    this.starting = this.startLanes();
    await this.starting;
  }

  private async startLanes(): Promise<void> {
    if (this.processMetrics && this.config.workerMetricsPort !== undefined) {
      this.metricsServer = await serveMetrics(
        this.processMetrics.registry,
        this.config.workerMetricsHost,
        this.config.workerMetricsPort,
      ).catch((error: unknown) => {
        this.workerState = "failed";
        throw error;
      });
      const { host, port } = this.metricsServer;
      this.logger.info(
        { url: `http://${host.includes(":") ? `[${host}]` : host}:${port}/metrics` },
        "worker metrics served",
      );
    }
    // The pooling check runs on the first lane's lock session as soon as it is open, before any
    // claim (no connections of its own on a worker's start). Its refusal is the one reported:
    // behind a transaction pooler a lane may fail first, for a reason that names no pooler; if
    // that session does not open, a probe on connections of its own says whether a pooler is why.
    const poolingChecked = (this.lanes[0] as Lane).supervisor.firstOpen
      .then(
        (session) => this.pooling(session.probeQueries()),
        () => this.pooling(),
      )
      .then(assertSessionPooling);
    const schemaChecked = Promise.all([this.checkSchemaVersion(), poolingChecked]).then(() => undefined);
    schemaChecked.catch(() => undefined);
    const results = await Promise.allSettled(this.lanes.map((lane) => lane.start(schemaChecked)));
    const failure = results.find((r): r is PromiseRejectedResult => r.status === "rejected");
    if (failure) {
      // The probe's verdict before the lanes stop: it may be running on the first lane's session.
      const refusal = await poolingChecked.then(
        () => null,
        (error: unknown) => error,
      );
      await Promise.all(this.lanes.map((lane) => lane.stop(0)));
      await this.metricsServer?.close();
      if (this.workerState === "starting") this.workerState = "failed";
      // Only a pooler found is reported instead of the lane's failure (a probe that could not run
      // failed for the same reason as the lane, or because the lane's session was closed).
      throw refusal instanceof PoolingModeError ? refusal : failure.reason;
    }
    // A stop that began during the start keeps every lane from claiming.
    if (this.workerState === "starting") {
      this.workerState = "running";
      for (const lane of this.lanes) lane.run();
      this.scheduler?.start();
    }
    if (this.workerState !== "running") return;
    this.logger.info(
      {
        workerId: this.id,
        types: this.types,
        lockSessions: this.lanes.length,
        concurrency: this.config.workerCount,
      },
      "worker started",
    );
    this.emit("worker:started", { workerId: this.id });
  }

  /** @throws {SchemaVersionError} unless the schema is at the version this code needs. */
  private async checkSchemaVersion(): Promise<void> {
    const required = latestSchemaVersion();
    const found = await this.ledger.schemaVersion();
    if (found < required) throw new SchemaVersionError(this.config.schema, found, required);
  }

  /** Asks every lane for a claim as soon as it has room. */
  wake(): void {
    for (const lane of this.lanes) lane.wake();
  }

  /**
   * → stopping → stopped. Graceful stop (DESIGN.md §6) of every lane at once (see shutdown.ts):
   * stop claiming, give back claimed jobs not started, let running handlers finish within
   * `graceSeconds`, then abort the rest and give them back to pending; release every lock, delete
   * the worker rows, close connections. Idempotent: repeated calls return the same promise. Never
   * throws.
   * @param graceSeconds overrides config.shutdownGraceSeconds (0: abort at once).
   */
  stop(graceSeconds = this.config.shutdownGraceSeconds): Promise<StopReport> {
    this.stopPromise ??= this.stopLanes(graceSeconds);
    return this.stopPromise;
  }

  private async stopLanes(graceSeconds: number): Promise<StopReport> {
    if (this.workerState !== "failed") this.workerState = "stopping";
    // A stop during start waits for it, so that whatever it opened is closed below.
    await this.starting?.catch(() => undefined);
    await this.scheduler?.stop();
    const reports = await Promise.all(this.lanes.map((lane) => lane.stop(graceSeconds)));
    const report: StopReport = {
      releasedJobIds: reports.flatMap((r) => r.releasedJobIds),
      abandonedJobIds: reports.flatMap((r) => r.abandonedJobIds),
    };
    await this.observer.settled();
    await this.metricsServer?.close();
    this.workerState = "stopped";
    this.logger.info(report, "worker stopped");
    this.emit("worker:stopped", report);
    return report;
  }
}
