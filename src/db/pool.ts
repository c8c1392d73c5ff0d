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

/** Opens one dedicated session (not pooled). The caller owns it and must `end()` it. */
export async function connectSession(options: ConnectionOptions): Promise<pg.Client> {
  const client = new pg.Client({
    connectionString: options.connectionString,
    application_name: options.applicationName ?? "taskqueue",
    types: TASKQUEUE_TYPES,
  });
  await client.connect();
  return client;
}

/** Capped exponential backoff for reconnects: 100 ms, 200 ms, ... up to `maxMs` (default 5 s). */
export function reconnectDelayMs(attempt: number, maxMs = 5000): number {
  return Math.min(100 * 2 ** attempt, maxMs);
}
