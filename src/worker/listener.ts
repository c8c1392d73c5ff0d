/**
 * The LISTEN session: a dedicated connection that only wakes workers (DESIGN.md §6).
 *
 * Liveness (shared/cases 01): a LISTEN connection is silent by nature, so a link that stops
 * carrying bytes would go unnoticed. Every `pingIntervalSeconds` it makes a round trip (the LISTEN
 * again, a no-op) within
 * `heartbeatTimeoutSeconds`; a missed one, an error or an end counts as lost (`onLost`), the
 * socket is destroyed and the connection re-established with capped, jittered backoff, and
 * `onReconnect` runs right after, so the worker polls for anything announced while it was away.
 * A cut-off LISTEN connection is noticed within `pingIntervalSeconds + heartbeatTimeoutSeconds`.
 *
 * At every (re)connect it also checks that the insert trigger that NOTIFYs exists
 * ({@link NotifyListener.notifyTrigger}); a missing one is logged at error level: pickups then
 * wait for the poll.
 */
import type pg from "pg";
import { closeSession, connectSession, destroySession, reconnectDelayMs, withDeadline } from "../db/pool.js";
import type { Logger } from "../log.js";
import type { ConnectionLimits } from "../queue/session/connection.js";
import { listenTo, notifyTriggerPresent, sessionTimeouts } from "../queue/sql/schema.js";
import { quoteIdentifier } from "../queue/sql/statement.js";
import { RepeatedLog } from "./repeat-log.js";

export interface NotifyListenerOptions {
  connectionString: string;
  channel: string;
  /** The taskqueue schema, whose insert trigger is checked. */
  schema: string;
  logger: Logger;
  /** Connect timeout, ping deadline and server-side idle timeout of the connection. */
  limits: ConnectionLimits;
  /** A round trip this often, seconds (the heartbeat interval). */
  pingIntervalSeconds: number;
  /** A notification arrived; `payload` is the comma-separated job types, or `*`. */
  onNotify: (payload: string) => void;
  /** The connection came back after a loss. */
  onReconnect: () => void;
  /** The connection was lost (a missed ping, an error, or its end); a reconnect is armed. */
  onLost: (error: Error) => void;
}

/** `listening`: LISTEN is up; `reconnecting`: lost, being re-established; `stopped`: not started or stopped. */
export type ListenerState = "listening" | "reconnecting" | "stopped";

export class NotifyListener {
  private client: pg.Client | null = null;
  private started = false;
  private stopped = false;
  private retryTimer: NodeJS.Timeout | null = null;
  private pingTimer: NodeJS.Timeout | null = null;
  private failures = 0;
  private readonly log: RepeatedLog;
  /** Whether the insert trigger that NOTIFYs exists: null until checked (at every connect). */
  notifyTrigger: boolean | null = null;

  /** The LISTEN statement, also sent as the periodic round trip. */
  private readonly listen: string;

  constructor(private readonly options: NotifyListenerOptions) {
    this.log = new RepeatedLog(options.logger);
    this.listen = listenTo(options.channel);
  }

  /** Connects and LISTENs. A failure here is retried in the background, never thrown. */
  async start(): Promise<void> {
    this.started = true;
    await this.connect(false);
  }

  /** True while a LISTEN connection is up. */
  get connected(): boolean {
    return this.client !== null;
  }

  /** The listener's state, for `Worker.health()`. */
  get state(): ListenerState {
    if (!this.started || this.stopped) return "stopped";
    return this.client ? "listening" : "reconnecting";
  }

  private async connect(isReconnect: boolean): Promise<void> {
    if (this.stopped) return;
    const { limits } = this.options;
    const connectMs = limits.connectTimeoutSeconds * 1000;
    let client: pg.Client | null = null;
    try {
      client = await connectSession({
        connectionString: this.options.connectionString,
        applicationName: "taskqueue listener",
        connectTimeoutSeconds: limits.connectTimeoutSeconds,
      });
      const opened = client;
      opened.on("notification", (message) => this.options.onNotify(message.payload ?? "*"));
      const onLoss = (error?: Error) => this.lost(opened, error ?? new Error("LISTEN connection ended"));
      opened.on("error", onLoss);
      opened.on("end", () => onLoss());
      const timeouts = sessionTimeouts(
        limits.idleSessionTimeoutSeconds * 1000,
        limits.heartbeatTimeoutSeconds * 1000,
      );
      await this.bounded(opened, opened.query(timeouts), connectMs);
      const trigger = await this.bounded(
        opened,
        opened.query<{ present: boolean }>({
          ...notifyTriggerPresent(this.options.schema),
          values: [`${quoteIdentifier(this.options.schema)}.jobs`],
        }),
        connectMs,
      );
      // LISTEN last, and again as the ping (a no-op on a channel already listened to): the
      // session's statement in pg_stat_activity stays the LISTEN, which names its channel.
      await this.bounded(opened, opened.query(this.listen), connectMs);
      if (this.stopped) {
        await closeSession(opened);
        return;
      }
      this.client = opened;
      this.checkTrigger(trigger.rows[0]?.present === true);
      this.armPing(opened);
      if (isReconnect) {
        this.log.log("info", { channel: this.options.channel }, "LISTEN connection re-established");
        this.options.onReconnect();
      }
    } catch (error) {
      if (client) destroySession(client);
      this.log.log("warn", { err: error }, "LISTEN connection failed; retrying");
      this.scheduleReconnect();
    }
  }

  private checkTrigger(present: boolean): void {
    if (!present && this.notifyTrigger !== false)
      this.options.logger.error(
        { schema: this.options.schema },
        "the insert trigger that wakes workers (jobs_notify_insert) is missing or disabled: new jobs wait for the poll; run migrate",
      );
    this.notifyTrigger = present;
  }

  /** `promise` within `ms`, else the connection is destroyed (which also counts it lost). */
  private bounded<T>(client: pg.Client, promise: Promise<T>, ms: number): Promise<T> {
    return withDeadline(promise, ms, () => {
      const error = new Error(`the LISTEN connection did not answer within ${ms / 1000} s`);
      this.lost(client, error);
      destroySession(client);
      return error;
    });
  }

  /** A round trip every `pingIntervalSeconds` while `client` is the connection. */
  private armPing(client: pg.Client): void {
    this.pingTimer = setTimeout(async () => {
      this.pingTimer = null;
      if (this.client !== client) return;
      try {
        await this.bounded(
          client,
          client.query(this.listen),
          this.options.limits.heartbeatTimeoutSeconds * 1000,
        );
      } catch (error) {
        this.lost(client, error as Error);
        return;
      }
      if (this.client !== client) return;
      // Alive for a whole interval: the backoff starts again from its shortest delay.
      if (this.failures > 0) {
        this.failures = 0;
        this.log.settle();
      }
      this.armPing(client);
    }, this.options.pingIntervalSeconds * 1000);
  }

  private lost(client: pg.Client, error: Error): void {
    if (this.client !== client) return;
    this.client = null;
    if (this.pingTimer) clearTimeout(this.pingTimer);
    this.pingTimer = null;
    client.removeAllListeners("notification");
    void closeSession(client);
    if (this.stopped) return;
    this.log.log("warn", { err: error }, "LISTEN connection lost; reconnecting");
    this.options.onLost(error);
    this.scheduleReconnect();
  }

  private scheduleReconnect(): void {
    if (this.stopped || this.retryTimer) return;
    const delay = reconnectDelayMs(this.failures++);
    this.retryTimer = setTimeout(() => {
      this.retryTimer = null;
      void this.connect(true);
    }, delay);
  }

  /** Stops listening and closes the connection (within a second). Idempotent. */
  async stop(): Promise<void> {
    this.stopped = true;
    if (this.retryTimer) clearTimeout(this.retryTimer);
    this.retryTimer = null;
    if (this.pingTimer) clearTimeout(this.pingTimer);
    this.pingTimer = null;
    const client = this.client;
    this.client = null;
    if (client) await closeSession(client);
  }
}
