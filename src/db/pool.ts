/**
 * Connections. The API and ledger reads share a `pg.Pool`; each worker process also opens two
 * dedicated sessions (lock session, LISTEN session) that never go back to a pool, because
 * advisory locks and LISTEN belong to the session that took them (DESIGN.md §5).
 */
import pg from "pg";
import { TASKQUEUE_TYPES } from "./types.js";

/** A client that can run queries: a pooled client, a dedicated client, or the pool itself. */
export type Queryable = Pick<pg.ClientBase, "query">;

/** Options for every connection taskqueue opens. */
export interface ConnectionOptions {
  connectionString: string;
  /** Reported in `pg_stat_activity.application_name`. */
  applicationName?: string;
}

/**
 * Creates the shared pool, reading int8 as numbers (./types.ts) on its connections only. Idle
 * errors (server restart) are logged by the owner, never thrown.
 */
export function createPool(options: ConnectionOptions & { max?: number }): pg.Pool {
  return new pg.Pool({
    connectionString: options.connectionString,
    application_name: options.applicationName ?? "taskqueue",
    max: options.max ?? 10,
    // Also for the plain-text queries sent on taskqueue's own connections (see ./types.ts).
    types: TASKQUEUE_TYPES,
  });
}

/** TCP keepalive probes on dedicated connections start after this much silence. */
export const KEEPALIVE_INITIAL_DELAY_MS = 10_000;

/** Options of a dedicated session: {@link ConnectionOptions} and its connect bound. */
export interface SessionOptions extends ConnectionOptions {
  /**
   * Bound on opening the connection: TCP connect, TLS and authentication, up to the server's first
   * ReadyForQuery. Seconds; default 5.
   */
  connectTimeoutSeconds?: number;
}

/**
 * Opens one dedicated session (not pooled), with TCP keepalive and a connect timeout. The caller
 * owns it and must close it ({@link closeSession}).
 * @throws the connection error, or `timeout expired` after `connectTimeoutSeconds`.
 */
export async function connectSession(options: SessionOptions): Promise<pg.Client> {
  const client = new pg.Client({
    connectionString: options.connectionString,
    application_name: options.applicationName ?? "taskqueue",
    types: TASKQUEUE_TYPES,
    keepAlive: true,
    keepAliveInitialDelayMillis: KEEPALIVE_INITIAL_DELAY_MS,
    connectionTimeoutMillis: Math.max(1, Math.round((options.connectTimeoutSeconds ?? 5) * 1000)),
  });
  await client.connect();
  return client;
}

/**
 * Closes a dedicated session within `boundMs`: a polite `end()` first, and if it has not finished
 * by then (a blackholed link never answers, nor closes), the socket is destroyed. Never throws.
 */
export async function closeSession(client: pg.Client, boundMs = 1000): Promise<void> {
  let timer: NodeJS.Timeout | undefined;
  const ended = client.end().then(
    () => true,
    () => true,
  );
  const late = new Promise<false>((resolve) => {
    timer = setTimeout(() => resolve(false), boundMs);
  });
  const closed = await Promise.race([ended, late]);
  clearTimeout(timer);
  if (!closed) destroySession(client);
}

/** Destroys a session's socket at once (nothing is sent). Never throws. */
export function destroySession(client: pg.Client): void {
  try {
    client.connection.stream.destroy();
  } catch {
    // Never connected: nothing to destroy.
  }
}

/**
 * Capped exponential backoff with equal jitter for every retry of a connection or a statement:
 * min(100 ms × 2^attempt, `maxMs`) (default 5 s), times a random factor in [0.5, 1) so that
 * workers failing together do not retry together. Milliseconds.
 */
export function reconnectDelayMs(attempt: number, maxMs = 5000, random: () => number = Math.random): number {
  const capped = Math.min(100 * 2 ** Math.min(attempt, 30), maxMs);
  return capped * (0.5 + random() * 0.5);
}

/**
 * Bounds `promise` by `ms`: it settles as `promise` does, or, if that takes longer, rejects with
 * what `onMissed` returns (called once, at the deadline; it usually destroys the connection). A
 * late settlement of `promise` is then ignored.
 */
export function withDeadline<T>(promise: Promise<T>, ms: number, onMissed: () => Error): Promise<T> {
  return new Promise<T>((resolve, reject) => {
    const timer = setTimeout(() => reject(onMissed()), ms);
    promise.then(
      (value) => {
        clearTimeout(timer);
        resolve(value);
      },
      (error: unknown) => {
        clearTimeout(timer);
        reject(error);
      },
    );
  });
}
