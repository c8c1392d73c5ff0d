/**
 * Connections. The API and ledger reads share a `pg.Pool`; each worker process also opens two
 * dedicated sessions (lock session, LISTEN session) that never go back to a pool, because
 * advisory locks and LISTEN belong to the session that took them (DESIGN.md §5).
 */
import pg from "pg";
import { DatabaseUnavailableError, PoolTimeoutError } from "../errors.js";
import { TASKQUEUE_TYPES } from "./types.js";

/** A client that can run queries: a pooled client, a dedicated client, or the pool itself. */
export type Queryable = Pick<pg.ClientBase, "query">;

/** Options for every connection taskqueue opens. */
export interface ConnectionOptions {
  connectionString: string;
  /** Reported in `pg_stat_activity.application_name`. */
  applicationName?: string;
}

/** Options of {@link createPool}. */
export interface PoolOptions extends ConnectionOptions {
  /** Most connections at once. Default 10. */
  max?: number;
  /**
   * Bound on opening a connection, and on waiting for a free one when all `max` are checked out
   * (pg's `connectionTimeoutMillis` covers both). Default 5 s.
   */
  connectTimeoutSeconds?: number;
  /** Server-side `statement_timeout` of each connection. Default 30 s. */
  statementTimeoutSeconds?: number;
  /**
   * Prepare taskqueue's statements under their names (see src/queue/sql/statement.ts). Default
   * true; false sends them unnamed, as a transaction-mode pooler needs ({@link setNamedStatements}).
   */
  namedStatements?: boolean;
}

/**
 * Whether a pool's connections prepare statements under their names. Shared by the pool and the
 * clients it builds, so that {@link setNamedStatements} also changes the clients already open.
 */
interface StatementNaming {
  named: boolean;
}

/**
 * A query config without its `name`: pg then sends it as the unnamed statement, parsed again at
 * every call. Behind a transaction-mode pooler (PgBouncer `pool_mode=transaction`) consecutive
 * transactions of one client run on different server sessions, so a named statement that one
 * client prepared on a server session collides with another client's Parse of the same name there
 * (`prepared statement "…" already exists`), or is missing where the client believes it exists.
 */
function withoutName(config: unknown): unknown {
  if (typeof config !== "object" || config === null || !("name" in config)) return config;
  // A submittable (a cursor, a stream) is an object with behaviour of its own: passed as it is.
  if (typeof (config as { submit?: unknown }).submit === "function") return config;
  return { ...config, name: undefined };
}

/**
 * `client` whose queries go out unnamed (see {@link withoutName}): for a caller's client (an
 * enqueue inside the application's transaction) on a pool known to sit behind a transaction pooler.
 */
export function unnamedQueryable(client: Queryable): Queryable {
  return {
    query: ((config: unknown, ...rest: unknown[]) =>
      (client.query as (...args: unknown[]) => unknown)(withoutName(config), ...rest)) as Queryable["query"],
  };
}

/** TCP keepalive probes start after this much idle time, on pooled and dedicated connections. */
export const KEEPALIVE_INITIAL_DELAY_MS = 10_000;

/**
 * The client-side deadline of a pooled query, ms: the server's `statement_timeout` plus a margin
 * (a tenth of it, between 250 ms and 2 s), so that a live server cancels a slow statement first
 * (SQLSTATE 57014, nothing committed) and the client gives up only when the server does not answer
 * at all (30 s → 32 s).
 */
export function queryDeadlineMs(statementTimeoutSeconds: number): number {
  const statementMs = statementTimeoutSeconds * 1000;
  return Math.ceil(statementMs + Math.min(2000, Math.max(250, statementMs / 10)));
}

type QueryCallback = (error: Error | null, result?: unknown) => void;
const baseQuery = pg.Client.prototype.query as (...args: unknown[]) => unknown;

/** A query of a {@link DeadlineClient} not answered yet: when it was called (`performance.now()`). */
interface Pending {
  calledAt: number;
}

/**
 * pg's client with a client-side deadline on every query: a query not answered within `deadlineMs`
 * of its call ends its connection at once, and it and every query queued behind it fail with a
 * {@link DatabaseUnavailableError}. Ended, the connection is never reused: a caller that releases
 * it without an error (a transaction's `finally`) gives the pool a client it drops.
 *
 * Why not pg's own `query_timeout`: it arms and clears a timer for every query, whose closure holds
 * the query (its text and parameters) while it runs. Under load those closures are alive at every
 * young-generation collection and are promoted: with it, enqueueing 100,000 jobs one at a time
 * promoted about 300 bytes a job and spent twice as long collecting (docs/performance.md). Here a
 * query costs a push and a removal in a short list; one watchdog timer per connection, unref'd,
 * fires at the oldest pending query's deadline at the earliest, and re-arms while queries are
 * pending. pg also leaves a timed-out query active, so every later query would wait behind it.
 */
class DeadlineClient extends pg.Client {
  /** Client-side deadline of each query, ms (set by {@link deadlineClientFor}; see {@link extendQueryDeadline}). */
  declare deadlineMs: number;
  /** The pool's statement naming (set by {@link deadlineClientFor}). */
  declare naming: StatementNaming;
  /** Queries called and not yet answered, in call order (pg answers them in that order). */
  private readonly pending: Pending[] = [];
  private watchdog: NodeJS.Timeout | null = null;
  /** Set once the watchdog ended the connection: the queries' errors become deadline errors. */
  private missedDeadline = false;

  /** pg's `query`, with the deadline (installed as `query` below). */
  deadlineQuery(...args: unknown[]): unknown {
    const second = args[1];
    const third = args[2];
    // Unnamed behind a transaction pooler (see withoutName); a property read otherwise.
    const config = this.naming.named ? args[0] : withoutName(args[0]);
    // Submittables (cursors, streams) report through their own callbacks: passed through as they are.
    if (typeof (config as { submit?: unknown } | null)?.submit === "function")
      return baseQuery.apply(this, args);
    const callback = (typeof second === "function" ? second : third) as QueryCallback | undefined;
    const values = typeof second === "function" ? undefined : second;
    const entry: Pending = { calledAt: performance.now() };
    this.pending.push(entry);
    this.watchdog ??= this.arm(this.deadlineMs);
    const settle = (error: Error | null): Error | null => {
      const index = this.pending.indexOf(entry);
      if (index >= 0) this.pending.splice(index, 1);
      if (!error || !this.missedDeadline) return error;
      return new DatabaseUnavailableError(
        `the database did not answer within ${this.deadlineMs / 1000} s (the query deadline); the connection was closed`,
        { cause: error },
      );
    };
    const send = (done: QueryCallback): void => {
      try {
        baseQuery.call(this, config, values, done);
      } catch (error) {
        // Refused before it was queued (a null config): nothing is pending.
        settle(null);
        throw error;
      }
    };
    if (callback) {
      send((error, result) => callback(settle(error), result));
      return undefined;
    }
    return new Promise((resolve, reject) => {
      send((error, result) => {
        const settled = settle(error);
        if (settled) reject(settled);
        else resolve(result);
      });
    });
  }

  /** An unref'd timer that checks the oldest pending query after `ms`. */
  private arm(ms: number): NodeJS.Timeout {
    return setTimeout(() => this.check(), Math.max(1, ms)).unref();
  }

  /**
   * The watchdog: ends the connection if the oldest pending query passed its deadline, else waits
   * until it would (or stops, with nothing pending).
   */
  private check(): void {
    this.watchdog = null;
    const oldest = this.pending[0];
    if (!oldest) return;
    const left = oldest.calledAt + this.deadlineMs - performance.now();
    if (left > 0) {
      this.watchdog = this.arm(left);
      return;
    }
    this.missedDeadline = true;
    // Ended (so the pool drops it when it comes back), and destroyed at once: a blackholed link
    // never finishes a polite close. pg then fails every pending query ("Connection terminated").
    this.end().catch(() => undefined);
    destroySession(this);
  }
}
DeadlineClient.prototype.query = DeadlineClient.prototype.deadlineQuery as pg.Client["query"];

/**
 * A {@link DeadlineClient} class whose queries have a deadline of `deadlineMs` and are named as
 * `naming` says (pg's pool builds clients from a class).
 */
function deadlineClientFor(deadlineMs: number, naming: StatementNaming): typeof pg.Client {
  return class extends DeadlineClient {
    override deadlineMs = deadlineMs;
    override naming = naming;
  };
}

/**
 * Gives the queries of `client` (a client of a pool from {@link createPool}) a deadline of
 * `deadlineMs` instead of the pool's, until the returned function is called (before the client is
 * released). For work that is known to take long, such as a migration. A client of another pool
 * has no client-side deadline: nothing changes, and the returned function does nothing.
 */
export function extendQueryDeadline(client: pg.ClientBase, deadlineMs: number): () => void {
  if (!(client instanceof DeadlineClient)) return () => undefined;
  const before = client.deadlineMs;
  client.deadlineMs = deadlineMs;
  return () => {
    client.deadlineMs = before;
  };
}

/**
 * pg's pool with typed errors on acquisition: a wait for a free connection past the connect timeout
 * becomes a {@link PoolTimeoutError} (naming the pool size and the likely cause), a connection that
 * did not open in time a {@link DatabaseUnavailableError}. `pool.query` acquires through here too.
 */
class BoundedPool extends pg.Pool {
  /** Statement naming of this pool's clients (see {@link setNamedStatements}). */
  naming: StatementNaming = { named: true };

  private translate(error: Error): Error {
    const waitedMs = this.options.connectionTimeoutMillis ?? 0;
    if (error.message === "timeout exceeded when trying to connect")
      return new PoolTimeoutError(this.options.max ?? 10, waitedMs, { cause: error });
    if (error.message === "Connection terminated due to connection timeout")
      return new DatabaseUnavailableError(
        `could not connect to the database within ${waitedMs / 1000} s (connectTimeoutSeconds)`,
        { cause: error },
      );
    return error;
  }

  override connect(): Promise<pg.PoolClient>;
  override connect(
    callback: (
      error: Error | undefined,
      client: pg.PoolClient | undefined,
      done: (release?: unknown) => void,
    ) => void,
  ): void;
  override connect(
    callback?: (
      error: Error | undefined,
      client: pg.PoolClient | undefined,
      done: (release?: unknown) => void,
    ) => void,
  ): Promise<pg.PoolClient> | undefined {
    if (callback) {
      super.connect((error, client, done) => callback(error ? this.translate(error) : error, client, done));
      return undefined;
    }
    return super.connect().catch((error: Error) => {
      throw this.translate(error);
    });
  }
}

/**
 * An idle pooled connection's error as it is logged: without the failed connection that pg-pool
 * attaches as `error.client` (kilobytes in one line). Removes that property; returns `error`.
 */
export function idleConnectionError(error: Error): Error {
  delete (error as Error & { client?: unknown }).client;
  return error;
}

/**
 * Creates the shared pool, reading int8 as numbers (./types.ts) on its connections only. Every wait
 * on it is bounded: TCP keepalive on each connection; opening a connection and waiting for a free
 * one within `connectTimeoutSeconds` ({@link PoolTimeoutError} / {@link DatabaseUnavailableError});
 * each statement within `statementTimeoutSeconds` on the server (SQLSTATE 57014) and within
 * {@link queryDeadlineMs} on the client ({@link DatabaseUnavailableError}, its connection closed and
 * never reused). Idle errors (server restart) are logged by the owner, never thrown.
 */
export function createPool(options: PoolOptions): pg.Pool {
  const statementTimeoutSeconds = options.statementTimeoutSeconds ?? 30;
  const naming: StatementNaming = { named: options.namedStatements ?? true };
  const pool = new BoundedPool({
    Client: deadlineClientFor(queryDeadlineMs(statementTimeoutSeconds), naming),
    connectionString: options.connectionString,
    application_name: options.applicationName ?? "taskqueue",
    max: options.max ?? 10,
    keepAlive: true,
    keepAliveInitialDelayMillis: KEEPALIVE_INITIAL_DELAY_MS,
    connectionTimeoutMillis: Math.ceil((options.connectTimeoutSeconds ?? 5) * 1000),
    statement_timeout: Math.ceil(statementTimeoutSeconds * 1000),
    // Also for the plain-text queries sent on taskqueue's own connections (see ./types.ts).
    types: TASKQUEUE_TYPES,
  });
  pool.naming = naming;
  return pool;
}

/**
 * Makes the connections of `pool` (one from {@link createPool}; another pool is left alone) send
 * taskqueue's statements named (`true`, the default: each is parsed once per connection) or unnamed
 * (`false`: parsed at every call, as a transaction-mode pooler needs). Applies to connections
 * already open as well.
 */
export function setNamedStatements(pool: pg.Pool, named: boolean): void {
  if (pool instanceof BoundedPool) pool.naming.named = named;
}

/** Whether `pool` prepares named statements: false only after {@link setNamedStatements}(pool, false) or `namedStatements: false`. */
export function namedStatements(pool: unknown): boolean {
  return !(pool instanceof BoundedPool) || pool.naming.named;
}

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
  // The server may end the connection before the owner has attached its own listeners (between
  // connect and its set-up statements): that must not crash the process as an unhandled 'error'.
  // The owner's next statement then fails, and it treats the session as lost.
  client.on("error", () => undefined);
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
