/**
 * The supervisor of one lane's lock session: opens it, notices it lost, and reopens it with capped,
 * jittered exponential backoff (DESIGN.md §6). The backoff grows with every session lost or
 * reconnect failed, and is reset only by a claim that succeeded ({@link SessionSupervisor.healthy}),
 * so that a database that accepts connections but refuses work (read-only, shared/cases 02) is
 * not reconnected to in a tight loop. Its state is one of `open | lost | reconnecting | closed`, and the
 * `generation` counts the sessions lost: a job claimed under an older generation has lost its lock.
 */
import type { ResolvedConfig } from "../config.js";
import { reconnectDelayMs } from "../db/pool.js";
import type { Logger } from "../log.js";
import { LockSession } from "../queue/lock-session.js";
import { connectionLimits } from "../queue/session/connection.js";
import type { WorkerEmitter } from "./events.js";
import { RepeatedLog } from "./repeat-log.js";

/**
 * - `open`: the session is up (it may have failed without telling yet: see `LockSession.isLost`);
 * - `lost`: it was lost; a reconnect attempt is armed on `timer`;
 * - `reconnecting`: a reconnect attempt is in flight;
 * - `closed`: never opened, closed on stop, or a failed lane's: nothing reconnects.
 */
export type SessionState =
  | { kind: "open"; session: LockSession }
  | { kind: "lost"; timer: NodeJS.Timeout }
  | { kind: "reconnecting"; attempt: Promise<void> }
  | { kind: "closed" };

/** What the lane does when its session goes or comes back. */
export interface SessionHooks {
  /** The session is gone, with every lock it held: drop what it held (before `session:lost`). */
  onLost(error: Error): void;
  /** A new session is open and the lane may use it (`session:restored` was emitted). */
  onRestored(): void;
  /** False once the lane drains, stopped or failed: a lost session is then not reopened. */
  mayReconnect(): boolean;
}

export class SessionSupervisor {
  private current: SessionState = { kind: "closed" };
  private sessionGeneration = 0;
  private failures = 0;
  /** The lane's log of repeated failures (a few lines per distinct error, see repeat-log.ts). */
  readonly log: RepeatedLog;

  /**
   * The first session this supervisor opened, or the error of its first attempt (the worker's
   * pooling probe runs on it: worker.ts). Settled once; later opens do not change it.
   */
  readonly firstOpen: Promise<LockSession>;
  private readonly firstOpened: { resolve(s: LockSession): void; reject(e: unknown): void };

  constructor(
    private readonly config: ResolvedConfig & { databaseUrl: string },
    private readonly workerId: string,
    private readonly logger: Logger,
    private readonly events: WorkerEmitter,
    private readonly hooks: SessionHooks,
  ) {
    this.log = new RepeatedLog(logger);
    let opened: SessionSupervisor["firstOpened"] = { resolve: () => undefined, reject: () => undefined };
    this.firstOpen = new Promise<LockSession>((resolve, reject) => {
      opened = { resolve, reject };
    });
    this.firstOpen.catch(() => undefined);
    this.firstOpened = opened;
  }

  /** The state, for the lane's stop procedure and tests of this module. */
  get state(): SessionState {
    return this.current;
  }

  /** Incremented with every session lost: claims of an older generation hold no lock. */
  get generation(): number {
    return this.sessionGeneration;
  }

  /** The state as `Worker.health()` shows it: an open session that failed counts as `lost`. */
  get health(): "open" | "lost" | "reconnecting" | "closed" {
    const state = this.current;
    if (state.kind === "open") return state.session.isLost ? "lost" : "open";
    return state.kind;
  }

  /**
   * The session did useful work (a claim succeeded): the reconnect backoff starts again from its
   * shortest delay, and the summaries of the failures logged meanwhile are written.
   */
  healthy(): void {
    if (this.failures === 0) return;
    this.failures = 0;
    this.log.settle();
  }

  /** The open session, or null (lost, reconnecting or closed). May be lost without knowing yet. */
  get session(): LockSession | null {
    return this.current.kind === "open" ? this.current.session : null;
  }

  /** The open session if it still works, else null: what a claim or write may use. */
  get usable(): LockSession | null {
    const session = this.session;
    return session && !session.isLost ? session : null;
  }

  /**
   * Transition closed → open (first open) or reconnecting → open.
   * @throws if either connection of the session cannot be opened.
   */
  async open(): Promise<LockSession> {
    let session: LockSession;
    try {
      session = await LockSession.open({
        connectionString: this.config.databaseUrl,
        schema: this.config.schema,
        workerId: this.workerId,
        onLost: (error) => this.lose(session, error),
        limits: connectionLimits(this.config),
      });
    } catch (error) {
      this.firstOpened.reject(error);
      throw error;
    }
    this.current = { kind: "open", session };
    this.firstOpened.resolve(session);
    return session;
  }

  /**
   * Transition open → lost: the session is gone, and with it every advisory lock; nothing it held
   * may be written any more (the reaper hands those jobs out again). Arms a reconnect. Ignored for
   * a session that is not the current one.
   */
  lose(session: LockSession, error: Error): void {
    if (this.session !== session) return;
    this.sessionGeneration++;
    this.current = { kind: "closed" };
    void session.close();
    this.hooks.onLost(error);
    this.events.emit("session:lost", { error });
    this.armReconnect();
  }

  /** Transition → lost with a timer armed, unless the lane may no longer reconnect (→ closed). */
  private armReconnect(): void {
    if (!this.hooks.mayReconnect()) {
      this.current = { kind: "closed" };
      return;
    }
    const timer = setTimeout(
      () => {
        if (this.current.kind !== "lost" || this.current.timer !== timer) return;
        if (!this.hooks.mayReconnect()) {
          this.current = { kind: "closed" };
          return;
        }
        this.current = { kind: "reconnecting", attempt: this.reconnect() };
      },
      reconnectDelayMs(this.failures++),
    );
    this.current = { kind: "lost", timer };
  }

  /** One attempt: reconnecting → open, or → lost again (backoff grows). */
  private async reconnect(): Promise<void> {
    try {
      await this.open();
    } catch (error) {
      this.log.log("warn", { err: error }, "lock session reconnect failed; retrying");
      this.armReconnect();
      return;
    }
    // A stop that began meanwhile waits for this attempt (halt), then closes the new session
    // itself, deleting the worker row through it: nothing is claimed or announced here.
    if (!this.hooks.mayReconnect()) return;
    this.log.log("info", {}, "lock session re-established");
    this.events.emit("session:restored");
    this.hooks.onRestored();
  }

  /**
   * Stops reconnecting (the lane drains): a lost session's timer is cleared (→ closed), and an
   * attempt in flight is awaited (it ends open or closed). An open session stays open.
   */
  async halt(): Promise<void> {
    const state = this.current;
    if (state.kind === "lost") {
      clearTimeout(state.timer);
      this.current = { kind: "closed" };
    } else if (state.kind === "reconnecting") {
      await state.attempt;
      const after = this.current;
      if (after.kind === "lost") {
        clearTimeout(after.timer);
        this.current = { kind: "closed" };
      }
    }
  }

  /**
   * Transition → closed: closes the session (which releases any lock it still holds), deleting
   * the worker row through it first when it still works (`deleteWorker`). Call after {@link halt}.
   */
  async close(deleteWorker: boolean): Promise<void> {
    const session = this.session;
    this.current = { kind: "closed" };
    if (!session) return;
    if (deleteWorker && !session.isLost)
      await session
        .deleteWorker()
        .catch((error: unknown) => this.logger.warn({ err: error }, "worker row not deleted"));
    await session.close();
  }
}
