/**
 * Connection setup of a lock session: opens its lock connection and its write connection with the
 * settings their statements need, and the serial connection both are used through.
 */
import type pg from "pg";
import { connectSession } from "../../db/pool.js";
import { lockConnectionSettings, lockSessionSettings } from "../sql/claim.js";
import { lockTableSize } from "../sql/schema.js";

/**
 * One connection whose statements run one after another, in the order they were asked for. Claims,
 * flushes and heartbeats come from independent loops; node-postgres would queue them too, but only
 * as a deprecated behaviour, and the order they reach the server in is part of the protocol.
 */
export class SerialConnection {
  private tail: Promise<unknown> = Promise.resolve();

  constructor(readonly client: pg.Client) {}

  /** Runs `config` once every statement asked for before it has settled. */
  query<R extends pg.QueryResultRow = pg.QueryResultRow>(
    config: string | pg.QueryConfig,
  ): Promise<pg.QueryResult<R>> {
    const result = this.tail.then(() => this.client.query<R>(config as pg.QueryConfig));
    this.tail = result.catch(() => undefined);
    return result;
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
 * Opens a connection of a lock session, with the planner settings its statements need. The lock
 * connection also reads the size of the server's lock table in the same round trip.
 */
async function openConnection(
  connectionString: string,
  role: "lock session" | "writes",
  workerId: string,
): Promise<{ connection: SerialConnection; lockTableSlots: number | null }> {
  const client = await connectSession({
    connectionString,
    applicationName: `taskqueue ${role} ${workerId}`.slice(0, 63),
  });
  try {
    // Cached plans that hold whatever the statistics say (lockSessionSettings); claims commit
    // without waiting for the disk (lockConnectionSettings). One simple query, several statements.
    if (role === "writes") {
      await client.query(lockSessionSettings);
      return { connection: new SerialConnection(client), lockTableSlots: null };
    }
    const results = (await client.query(
      `${lockConnectionSettings}; ${lockTableSize}`,
    )) as unknown as pg.QueryResult<{ slots: number }>[];
    const slots = results[results.length - 1]?.rows[0]?.slots;
    return { connection: new SerialConnection(client), lockTableSlots: slots ?? null };
  } catch (error) {
    await client.end().catch(() => undefined);
    throw error;
  }
}

/**
 * Opens the lock connection and the write connection of a lock session, at once.
 * @throws the first connection's error if either cannot be opened (neither is left open).
 */
export async function openSessionConnections(
  connectionString: string,
  workerId: string,
): Promise<SessionConnections> {
  const [locks, writes] = await Promise.allSettled([
    openConnection(connectionString, "lock session", workerId),
    openConnection(connectionString, "writes", workerId),
  ]);
  if (locks.status === "rejected" || writes.status === "rejected") {
    for (const opened of [locks, writes])
      if (opened.status === "fulfilled") await opened.value.connection.client.end().catch(() => undefined);
    throw locks.status === "rejected" ? locks.reason : (writes as PromiseRejectedResult).reason;
  }
  return {
    locks: locks.value.connection,
    writes: writes.value.connection,
    lockTableSlots: locks.value.lockTableSlots ?? DEFAULT_LOCK_TABLE_SLOTS,
  };
}
