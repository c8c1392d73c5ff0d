/**
 * Connection setup of a lock session: opens its lock connection and its write connection with the
 * settings their statements need, and the serial connection both are used through, which puts a
 * deadline on every statement (DESIGN.md, "Deadlines"): a statement that misses it ends the
 * connection, and with it the session.
 */
import type pg from "pg";
import { connectSession, destroySession, withDeadline } from "../../db/pool.js";
import { LockSessionLostError } from "../../errors.js";
import { lockConnectionSettings, writeConnectionSettings } from "../sql/claim.js";
import { lockTableSize, sessionTimeouts } from "../sql/schema.js";

/**
 * The bounds of a dedicated connection, seconds (the config's options of the same names, and the
 * server's `idle_session_timeout`, see {@link idleSessionTimeoutSeconds}).
 */
export interface ConnectionLimits {
  connectTimeoutSeconds: number;
  statementTimeoutSeconds: number;
  heartbeatTimeoutSeconds: number;
  idleSessionTimeoutSeconds: number;
}

/**
 * The server's `idle_session_timeout` for a worker's dedicated connections: the stale threshold,
 * but at least twice the heartbeat interval, since heartbeats (and their round trip on the lock
 * connection) are what keep a live session busy. A statement in flight is not idle time, so the
 * heartbeat deadline does not add to it. Seconds.
 */
export function idleSessionTimeoutSeconds(config: {
  staleThresholdSeconds: number;
  heartbeatIntervalSeconds: number;
}): number {
  return Math.max(config.staleThresholdSeconds, 2 * config.heartbeatIntervalSeconds);
}

/** The limits of a worker's dedicated connections, read from its config. */
export function connectionLimits(config: {
  connectTimeoutSeconds: number;
  statementTimeoutSeconds: number;
  heartbeatTimeoutSeconds: number;
  staleThresholdSeconds: number;
  heartbeatIntervalSeconds: number;
}): ConnectionLimits {
  return {
    connectTimeoutSeconds: config.connectTimeoutSeconds,
    statementTimeoutSeconds: config.statementTimeoutSeconds,
    heartbeatTimeoutSeconds: config.heartbeatTimeoutSeconds,
    idleSessionTimeoutSeconds: idleSessionTimeoutSeconds(config),
  };
}

/** The defaults of {@link ConnectionLimits} (the config's defaults). */
export const DEFAULT_CONNECTION_LIMITS: ConnectionLimits = {
  connectTimeoutSeconds: 5,
  statementTimeoutSeconds: 30,
  heartbeatTimeoutSeconds: 5,
  idleSessionTimeoutSeconds: 30,
};

/**
 * Which deadline a statement gets: `roundTrip` (claims, unlocks, heartbeats, pings:
 * `heartbeatTimeoutSeconds`) or `write` (outcome writes: `statementTimeoutSeconds`, which is also
 * the server's `statement_timeout`, plus {@link WRITE_DEADLINE_MARGIN_MS}, so that the server's
 * own refusal normally comes first).
 */
export type Deadline = "roundTrip" | "write";

/** How much longer than the server's `statement_timeout` the client waits for an outcome write. */
export const WRITE_DEADLINE_MARGIN_MS = 1000;

/**
 * One connection whose statements run one after another, in the order they were asked for. Claims,
 * flushes and heartbeats come from independent loops; node-postgres would queue them too, but only
 * as a deprecated behaviour, and the order they reach the server in is part of the protocol.
 *
 * Every statement has a deadline, counted from the moment it is sent: a statement without an
 * answer by then rejects with a {@link LockSessionLostError}, {@link onDeadlineMissed} is called,
 * and the socket is destroyed (a blackholed link never finishes a polite close), which fails every
 * statement queued behind it.
 */
export class SerialConnection {
  private tail: Promise<unknown> = Promise.resolve();
  /** Called once, when the first statement misses its deadline. */
  onDeadlineMissed: ((error: Error) => void) | null = null;
  private missed = false;

  constructor(
    readonly client: pg.Client,
    /** Named in the deadline's error, e.g. `lock`. */
    private readonly role: string,
    /** Milliseconds of each {@link Deadline}. */
    private readonly deadlinesMs: Readonly<Record<Deadline, number>>,
    private readonly defaultDeadline: Deadline,
  ) {}

  /**
   * Runs `config` once every statement asked for before it has settled, within `deadline`.
   * @throws {LockSessionLostError} if it gets no answer within the deadline; or the statement's
   * own error.
   */
  query<R extends pg.QueryResultRow = pg.QueryResultRow>(
    config: string | pg.QueryConfig,
    deadline: Deadline = this.defaultDeadline,
  ): Promise<pg.QueryResult<R>> {
    const result = this.tail.then(() => {
      const ms = this.deadlinesMs[deadline];
      return withDeadline(this.client.query<R>(config as pg.QueryConfig), ms, () =>
        this.miss(
          new LockSessionLostError(`the ${this.role} connection did not answer within ${ms / 1000} s`),
        ),
      );
    });
    this.tail = result.catch(() => undefined);
    return result;
  }

  private miss(error: Error): Error {
    if (!this.missed) {
      this.missed = true;
      this.onDeadlineMissed?.(error);
      destroySession(this.client);
    }
    return error;
  }
}

/**
 * PostgreSQL's default lock table (see `lockTableSize`): max_locks_per_transaction 64 × 122 server
 * processes (100 connections, 3 autovacuum workers and their launcher, 8 worker processes, 10 WAL
 * senders).
 */
const DEFAULT_LOCK_TABLE_SLOTS = 7808;

/** Both connections of a lock session, opened, and the size of the server's lock table. */
export interface SessionConnections {
  /** Claims and unlocks: holds every advisory lock of this worker. */
  locks: SerialConnection;
  /** Fenced outcome writes and heartbeats: holds no lock. */
  writes: SerialConnection;
  /** Advisory-lock slots of the server's shared lock table, read as the lock connection opened. */
  lockTableSlots: number;
}

/**
 * Opens a connection of a lock session, with the planner settings its statements need and its
 * server-side bounds (`sessionTimeouts`), all within the connect timeout. The lock connection also
 * reads the size of the server's lock table in the same round trip.
 */
async function openConnection(
  connectionString: string,
  role: "lock session" | "writes",
  workerId: string,
  limits: ConnectionLimits,
): Promise<{ connection: SerialConnection; lockTableSlots: number | null }> {
  const connectMs = limits.connectTimeoutSeconds * 1000;
  const client = await connectSession({
    connectionString,
    applicationName: `taskqueue ${role} ${workerId}`.slice(0, 63),
    connectTimeoutSeconds: limits.connectTimeoutSeconds,
  });
  const deadlines = {
    roundTrip: limits.heartbeatTimeoutSeconds * 1000,
    write: limits.statementTimeoutSeconds * 1000 + WRITE_DEADLINE_MARGIN_MS,
  };
  const bounds = sessionTimeouts(
    limits.idleSessionTimeoutSeconds * 1000,
    limits.statementTimeoutSeconds * 1000,
  );
  const setUp = (text: string) =>
    withDeadline(client.query(text), connectMs, () => {
      destroySession(client);
      return new LockSessionLostError(
        `the ${role} connection's settings got no answer within ${connectMs / 1000} s`,
      );
    });
  try {
    // Cached plans that hold whatever the statistics say (lockSessionSettings, which both build
    // on); claims commit without waiting for the disk (lockConnectionSettings); completions read
    // their rows by version (writeConnectionSettings). One simple query, several statements.
    if (role === "writes") {
      await setUp(`${writeConnectionSettings}; ${bounds}`);
      return { connection: new SerialConnection(client, "write", deadlines, "write"), lockTableSlots: null };
    }
    const results = (await setUp(
      `${lockConnectionSettings}; ${bounds}; ${lockTableSize}`,
    )) as unknown as pg.QueryResult<{ slots: number }>[];
    const slots = results[results.length - 1]?.rows[0]?.slots;
    return {
      connection: new SerialConnection(client, "lock", deadlines, "roundTrip"),
      lockTableSlots: slots ?? null,
    };
  } catch (error) {
    destroySession(client);
    throw error;
  }
}

/**
 * Opens the lock connection and the write connection of a lock session, at once, each within
 * `limits.connectTimeoutSeconds`.
 * @throws the first connection's error if either cannot be opened (neither is left open).
 */
export async function openSessionConnections(
  connectionString: string,
  workerId: string,
  limits: ConnectionLimits = DEFAULT_CONNECTION_LIMITS,
): Promise<SessionConnections> {
  const [locks, writes] = await Promise.allSettled([
    openConnection(connectionString, "lock session", workerId, limits),
    openConnection(connectionString, "writes", workerId, limits),
  ]);
  if (locks.status === "rejected" || writes.status === "rejected") {
    for (const opened of [locks, writes])
      if (opened.status === "fulfilled") destroySession(opened.value.connection.client);
    throw locks.status === "rejected" ? locks.reason : (writes as PromiseRejectedResult).reason;
  }
  return {
    locks: locks.value.connection,
    writes: writes.value.connection,
    lockTableSlots: locks.value.lockTableSlots ?? DEFAULT_LOCK_TABLE_SLOTS,
  };
}
