/**
 * One lane of a worker: one lock session (and its supervisor), one LISTEN connection, the poll,
 * heartbeat and (on lane 1) reaper timers, composed with its dispatcher and outcome writer. Its
 * lifecycle is {@link LaneState}, changed only by the transition functions below.
 */
import type { ResolvedConfig } from "../config.js";
import { WorkerStateError } from "../errors.js";
import type { Logger } from "../log.js";
import type { Ledger } from "../queue/ledger.js";
import type { WorkerIdentity } from "../queue/lock-session.js";
import { connectionLimits } from "../queue/session/connection.js";
import { Dispatcher } from "./dispatcher.js";
import type { StopReport, WorkerEmitter } from "./events.js";
import { type ListenerState, NotifyListener } from "./listener.js";
import { OutcomeWriter, type UnreportedReports } from "./outcome-writer.js";
import type { HandlerRegistry } from "./registry.js";
import { HistoryPruner } from "./retention.js";
import { SessionSupervisor } from "./session-supervisor.js";
import { drainLane } from "./shutdown.js";

/**
 * - `created`: nothing opened;
 * - `starting`: opening its session and LISTEN, or open and waiting for the other lanes (it claims
 *   nothing yet, so no job event comes before `Worker.start()` resolves);
 * - `running`: claims and runs jobs;
 * - `draining`: stop() began: claims nothing more, gives back what it holds, closes;
 * - `stopped`: everything closed;
 * - `failed`: start failed; everything it opened is closed.
 */
export type LaneState = "created" | "starting" | "running" | "draining" | "stopped" | "failed";

/** NOTIFY payload prefix of a cancelled held job: `cancel:<id>` (sql/read.ts cancelAnyJob). */
const CANCEL_PREFIX = "cancel:";

/** NOTIFY payload prefix of a changed type limit: `limits:<type>` (sql/type-limits.ts). */
const LIMITS_PREFIX = "limits:";

/** Everything a lane needs from its worker. */
export interface LaneOptions {
  /** The lane's id: the worker's id, or `<worker id>/<n>` when the worker has several lanes. */
  id: string;
  /** This lane's share: `workerCount` handler slots and `prefetch` jobs held at most. */
  config: ResolvedConfig & { databaseUrl: string };
  prefetch: number;
  /** The share of the server's lock table the lane's prefetch is capped to (1/n). */
  lockTableShare: number;
  types: string[];
  registry: HandlerRegistry;
  ledger: Ledger;
  logger: Logger;
  runReaper: boolean;
  /** The worker, whose safe emit every lane event goes through. */
  events: WorkerEmitter;
  unreported: UnreportedReports;
  identity: WorkerIdentity;
}

export class Lane {
  private laneState: LaneState = "created";
  private readonly typeSet: Set<string>;
  readonly supervisor: SessionSupervisor;
  readonly writer: OutcomeWriter;
  readonly dispatcher: Dispatcher;
  listener: NotifyListener | null = null;
  reaping: Promise<void> | null = null;
  /** The retention passes, on the lane that runs the reaper (retention.ts); null elsewhere. */
  readonly pruner: HistoryPruner | null;
  /** The poll and (lane 1) reaper timers, which end as the lane starts draining. */
  private claimTimers: NodeJS.Timeout[] = [];
  /** The heartbeat timer, which goes on while the lane drains (until its last outcome is written). */
  private heartbeatTimer: NodeJS.Timeout[] = [];
  private stopping: Promise<StopReport> | null = null;

  constructor(private readonly options: LaneOptions) {
    const { config, events, logger } = options;
    this.typeSet = new Set(options.types);
    this.supervisor = new SessionSupervisor(config, options.id, logger, events, {
      onLost: (error) => this.sessionLost(error),
      onRestored: () => {
        this.dispatcher.wake();
        void this.heartbeat();
      },
      mayReconnect: () => this.laneState === "starting" || this.laneState === "running",
    });
    this.writer = new OutcomeWriter(this.supervisor, config, events, logger, options.unreported, {
      isRunning: (id) => this.dispatcher.isRunning(id),
      claimLost: (id) => void this.claimsGone([id]),
      claimMore: () => this.dispatcher.claimLoop(),
      retryDueIn: (seconds) => this.dispatcher.wakeIn(seconds),
      flushed: () => this.dispatcher.flushed(),
    });
    this.pruner = options.runReaper ? new HistoryPruner(options.ledger, config, events, logger) : null;
    this.dispatcher = new Dispatcher(
      this,
      this.supervisor,
      this.writer,
      options.registry,
      config,
      options.types,
      options.prefetch,
      events,
      logger,
      { writes: options.ledger.handlerWrites, workerId: options.id },
    );
  }

  /** The lane's lifecycle state (see {@link LaneState}). */
  get state(): LaneState {
    return this.laneState;
  }

  /** The lane's worker id (its row in `workers`, its connections' application name). */
  get id(): string {
    return this.options.id;
  }

  /** Transition `from` → `to`. @throws {WorkerStateError} from any other state. */
  private transition(from: readonly LaneState[], to: LaneState): void {
    if (!from.includes(this.laneState))
      throw new WorkerStateError(`lane ${this.options.id} cannot go from ${this.laneState} to ${to}`);
    this.laneState = to;
  }

  /**
   * created → starting: opens the lock session and LISTEN while `schemaChecked` settles, then
   * writes the worker row (on a schema that passed the check) and arms the timers. The lane stays
   * `starting` (claiming nothing) until {@link run}. On failure → failed, with everything closed.
   * @throws the schema check's error, or the first connection error.
   */
  async start(schemaChecked: Promise<void>): Promise<void> {
    this.transition(["created"], "starting");
    const { config, logger } = this.options;
    const listener = new NotifyListener({
      connectionString: config.databaseUrl,
      channel: config.notifyChannel,
      schema: config.schema,
      logger,
      limits: connectionLimits(config),
      pingIntervalSeconds: config.heartbeatIntervalSeconds,
      onNotify: (payload) => this.onNotify(payload),
      onReconnect: () => {
        this.options.events.emit("listener:reconnected");
        this.dispatcher.wake();
      },
      onLost: (error) => this.options.events.emit("listener:lost", { error }),
    });
    this.listener = listener;
    const results = await Promise.allSettled([schemaChecked, this.supervisor.open(), listener.start()]);
    const failure = results.find((r): r is PromiseRejectedResult => r.status === "rejected");
    try {
      if (failure) throw failure.reason;
      await this.supervisor.session?.heartbeat(this.options.identity, 0, []);
      await this.readLimits();
    } catch (error) {
      await this.fail();
      throw error;
    }
    this.capPrefetch();
    this.every(this.claimTimers, config.pollIntervalSeconds, true, ["starting", "running"], () =>
      this.dispatcher.wake(),
    );
    // Heartbeats go on while the lane drains: a job that runs through a long grace period must not
    // look stale to the reaper, nor the worker row (shared/cases 09).
    this.every(
      this.heartbeatTimer,
      config.heartbeatIntervalSeconds,
      false,
      ["starting", "running", "draining"],
      () => void this.heartbeat(),
    );
    if (this.options.runReaper)
      this.every(
        this.claimTimers,
        config.reaperIntervalSeconds,
        true,
        ["starting", "running"],
        () => void this.reap(),
      );
    this.pruner?.start();
    logger.info(
      {
        workerId: this.options.id,
        types: this.options.types,
        concurrency: config.workerCount,
        prefetch: this.dispatcher.prefetch,
      },
      "lock session started",
    );
  }

  /** starting → failed: closes whatever start opened; a session lost meanwhile is not reopened. */
  private async fail(): Promise<void> {
    this.transition(["starting"], "failed");
    await this.supervisor.halt();
    await this.listener?.stop();
    await this.supervisor.close(false);
  }

  /** starting → running: the lane claims from here on (first the claim it was woken for). */
  run(): void {
    if (this.laneState !== "starting") return;
    this.transition(["starting"], "running");
    this.dispatcher.wake();
  }

  /**
   * → draining → stopped (see shutdown.ts); from created or failed straight to stopped with an
   * empty report. Idempotent: repeated calls return the same promise. Never throws.
   */
  stop(graceSeconds: number): Promise<StopReport> {
    this.stopping ??= this.drain(graceSeconds);
    return this.stopping;
  }

  private async drain(graceSeconds: number): Promise<StopReport> {
    if (this.laneState === "created" || this.laneState === "failed") {
      this.transition(["created", "failed"], "stopped");
      return { releasedJobIds: [], abandonedJobIds: [] };
    }
    this.transition(["starting", "running"], "draining");
    const report = await drainLane(this, graceSeconds);
    this.transition(["draining"], "stopped");
    return report;
  }

  /** Wakes the lane's claim loop (a NOTIFY, a poll, or `Worker.wake`). */
  wake(): void {
    this.dispatcher.wake();
  }

  /** The LISTEN connection's state (`stopped` before start). */
  get listenerState(): ListenerState {
    return this.listener?.state ?? "stopped";
  }

  /** Handlers currently running. */
  get runningCount(): number {
    return this.dispatcher.runningCount;
  }

  /** Clears the poll and reaper timers (the lane drains: it claims and reaps no more). */
  stopClaimTimers(): void {
    for (const timer of this.claimTimers) clearTimeout(timer);
  }

  /** Clears the heartbeat timer (every outcome of the drain is written). */
  stopHeartbeat(): void {
    for (const timer of this.heartbeatTimer) clearTimeout(timer);
  }

  /** The worker's logger (for the stop procedure). */
  get logger(): Logger {
    return this.options.logger;
  }

  /** Keeps the prefetch within this lane's share of the server's lock table. */
  private capPrefetch(): void {
    const session = this.supervisor.session;
    if (!session) return;
    const cap = Math.max(1, Math.floor(session.lockTableSlots / this.options.lockTableShare));
    if (this.dispatcher.prefetch > cap) {
      this.options.logger.warn(
        { prefetch: this.dispatcher.prefetch, cap },
        "prefetch capped to stay within the lock table",
      );
      this.dispatcher.prefetch = cap;
    }
  }

  /** The session is gone: drop what it held (the supervisor then emits `session:lost`). */
  private sessionLost(error: Error): void {
    this.writer.dropQueued();
    const { dropped, running } = this.dispatcher.dropForLostSession();
    this.supervisor.log.log(
      "error",
      { err: error, dropped, running },
      "lock session lost; its jobs will be reclaimed by the reaper",
    );
  }

  private onNotify(payload: string): void {
    if (payload.startsWith(LIMITS_PREFIX) && this.typeSet.has(payload.slice(LIMITS_PREFIX.length))) {
      // A limit of one of our types changed: re-read which are limited (a change wakes the lane).
      void this.readLimits().catch((error: unknown) =>
        this.options.logger.warn({ err: error }, "could not read the type limits"),
      );
      if (!this.typeSet.has(payload)) return;
    }
    if (payload.startsWith(CANCEL_PREFIX)) {
      // A job cancelled while held (sql/read.ts cancelAnyJob): checked against the database before
      // its handler is aborted, since a job type may be spelled like this payload.
      const id = Number(payload.slice(CANCEL_PREFIX.length));
      if (Number.isSafeInteger(id) && this.dispatcher.holds(id)) void this.claimsGone([id], false);
      if (!this.typeSet.has(payload)) return;
    }
    if (payload === "*" || payload.split(",").some((type) => this.typeSet.has(type))) this.dispatcher.wake();
  }

  /**
   * The database no longer shows this lane owning `ids` (a refused heartbeat or running mark, or a
   * cancel NOTIFY): a cancelled job's handler is aborted with a `JobCancelledError`; with
   * `lostIfNot`, any other is a lost claim. If the check fails, every one is a lost claim (nothing
   * of theirs is written either way).
   */
  private async claimsGone(ids: number[], lostIfNot = true): Promise<void> {
    let cancelled: Set<number>;
    try {
      cancelled = await this.options.ledger.cancelledAmong(ids);
    } catch (error) {
      this.options.logger.warn(
        { err: error, jobIds: ids },
        "could not read whether lost claims were cancelled",
      );
      cancelled = new Set();
    }
    for (const id of ids) {
      if (cancelled.has(id)) this.dispatcher.cancelled(id);
      else if (lostIfNot) this.dispatcher.claimLost(id);
    }
  }

  /**
   * Runs `fn` every `seconds` (± 10 % when `jitter`) while the lane is in one of `states`; the
   * timer is kept in `timers` (one slot) so that the lane can clear it.
   */
  private every(
    timers: NodeJS.Timeout[],
    seconds: number,
    jitter: boolean,
    states: readonly LaneState[],
    fn: () => void,
  ): void {
    const slot = timers.length;
    const arm = () => {
      const factor = jitter ? 0.9 + Math.random() * 0.2 : 1;
      timers[slot] = setTimeout(
        () => {
          if (!states.includes(this.laneState)) return;
          fn();
          arm();
        },
        seconds * 1000 * factor,
      );
    };
    arm();
  }

  /** Upserts the worker row and touches every held job; a job no longer held has lost its claim. */
  private async heartbeat(): Promise<void> {
    const session = this.supervisor.usable;
    if (!session) return;
    const held = this.dispatcher.heldRefs();
    try {
      const limited = session.limitedTypes(this.options.types);
      limited.catch(() => undefined);
      const alive = await session.heartbeat(this.options.identity, this.writer.fencedWrites, held);
      this.setLimited(await limited);
      const gone = held.filter((ref) => !alive.has(ref.id) && this.dispatcher.holds(ref.id));
      if (gone.length > 0) await this.claimsGone(gone.map((ref) => ref.id));
      this.options.events.emit("worker:heartbeat", { laneId: this.options.id });
    } catch (error) {
      if (!session.isLost) this.supervisor.log.log("warn", { err: error }, "heartbeat failed");
    }
  }

  /**
   * Reads which of the lane's types are limited (type_limits) on its session, if usable.
   * @throws the read's error.
   */
  private async readLimits(): Promise<void> {
    const session = this.supervisor.usable;
    if (session) this.setLimited(await session.limitedTypes(this.options.types));
  }

  /** The claim rounds send the limited claim for `limited` from now on; a change wakes the lane. */
  private setLimited(limited: readonly string[]): void {
    if (this.dispatcher.round.setLimited(limited)) this.dispatcher.wake();
  }

  /** One stale-reaper pass (DESIGN.md §6), unless one is in flight. */
  private async reap(): Promise<void> {
    if (this.reaping) return;
    this.reaping = (async () => {
      try {
        const jobs = await this.options.ledger.reapStale(this.options.config);
        if (jobs.length > 0) {
          this.options.logger.warn({ jobIds: jobs.map((j) => j.id) }, "reaper reclaimed stale jobs");
          this.options.events.emit("reaper:reaped", { jobs });
        }
      } catch (error) {
        this.options.logger.warn({ err: error }, "reaper pass failed");
      } finally {
        this.reaping = null;
      }
    })();
    await this.reaping;
  }
}
