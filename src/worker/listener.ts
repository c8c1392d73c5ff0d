/**
 * The LISTEN session: a dedicated connection that only wakes workers (DESIGN.md §6). A dropped
 * connection is re-established with capped backoff, and `onReconnect` runs right after, so the
 * worker polls for anything announced while it was away.
 */
import type pg from "pg";
import { connectSession, reconnectDelayMs } from "../db/pool.js";
import type { Logger } from "../log.js";
import { listenTo } from "../queue/sql/schema.js";

export interface NotifyListenerOptions {
  connectionString: string;
  channel: string;
  logger: Logger;
  /** A notification arrived; `payload` is the comma-separated job types, or `*`. */
  onNotify: (payload: string) => void;
  /** The connection came back after a loss. */
  onReconnect: () => void;
}

export class NotifyListener {
  private client: pg.Client | null = null;
  private stopped = false;
  private retryTimer: NodeJS.Timeout | null = null;
  private failures = 0;

  constructor(private readonly options: NotifyListenerOptions) {}

  /** Connects and LISTENs. A failure here is retried in the background, never thrown. */
  async start(): Promise<void> {
    await this.connect(false);
  }

  /** True while a LISTEN connection is up. */
  get connected(): boolean {
    return this.client !== null;
  }

  private async connect(isReconnect: boolean): Promise<void> {
    if (this.stopped) return;
    let client: pg.Client | null = null;
    try {
      client = await connectSession({
        connectionString: this.options.connectionString,
        applicationName: "taskqueue listener",
      });
      client.on("notification", (message) => this.options.onNotify(message.payload ?? "*"));
      const onLoss = (error?: Error) => this.lost(client as pg.Client, error);
      client.on("error", onLoss);
      client.on("end", () => onLoss());
      await client.query(listenTo(this.options.channel));
      if (this.stopped) {
        await client.end().catch(() => undefined);
        return;
      }
      this.client = client;
      this.failures = 0;
      if (isReconnect) {
        this.options.logger.info({ channel: this.options.channel }, "LISTEN connection re-established");
        this.options.onReconnect();
      }
    } catch (error) {
      await client?.end().catch(() => undefined);
      this.options.logger.warn({ err: error }, "LISTEN connection failed; retrying");
      this.scheduleReconnect();
    }
  }

  private lost(client: pg.Client, error?: Error): void {
    if (this.client !== client) return;
    this.client = null;
    client.removeAllListeners("notification");
    void client.end().catch(() => undefined);
    if (this.stopped) return;
    this.options.logger.warn({ err: error }, "LISTEN connection lost; reconnecting");
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

  /** Stops listening and closes the connection. Idempotent. */
  async stop(): Promise<void> {
    this.stopped = true;
    if (this.retryTimer) clearTimeout(this.retryTimer);
    this.retryTimer = null;
    const client = this.client;
    this.client = null;
    await client?.end().catch(() => undefined);
  }
}
