/**
 * Per-file isolation: every test file gets its own schema (and NOTIFY channel) in the test
 * database, migrated from scratch, and drops it at the end.
 */
import { randomBytes } from "node:crypto";
import type pg from "pg";
import { type ResolvedConfig, resolveConfig, type TaskQueueOptions } from "../../src/config.js";
import { createPool } from "../../src/db/pool.js";
import { Ledger } from "../../src/queue/ledger.js";
import { LockSession } from "../../src/queue/lock-session.js";
import { migrate } from "../../src/queue/migrate.js";
import { type TestLockSession, withTestWrites } from "./lock-session.js";

export type { TestLockSession } from "./lock-session.js";

export const DATABASE_URL = process.env.DATABASE_URL ?? "postgres://postgres@127.0.0.1:5432/test";

export interface TestDb {
  /**
   * Opens a worker lock session on this schema as `workerId`, with the test-only writes that
   * await their unlock (`complete`, `fail`, `release`); closed by `drop()`.
   */
  openLockSession(workerId: string): Promise<TestLockSession>;
  /** Closes every lock session opened so far (their advisory locks go with them). */
  closeLockSessions(): Promise<void>;
  schema: string;
  pool: pg.Pool;
  ledger: Ledger;
  /** Config with tiny intervals, jitter off, pointing at this schema. */
  config: ResolvedConfig;
  /** Runs raw SQL in this schema's search_path (for arranging states a test needs). */
  sql<T extends pg.QueryResultRow = pg.QueryResultRow>(text: string, values?: unknown[]): Promise<T[]>;
  drop(): Promise<void>;
}

/** Options every test starts from: small intervals, no jitter, silent logs. */
export function testOptions(schema: string): TaskQueueOptions {
  return {
    databaseUrl: DATABASE_URL,
    schema,
    notifyChannel: `${schema}_jobs`,
    workerCount: 4,
    pollIntervalSeconds: 0.5,
    heartbeatIntervalSeconds: 0.2,
    reaperIntervalSeconds: 0.2,
    staleThresholdSeconds: 1,
    shutdownGraceSeconds: 5,
    backoffBaseSeconds: 0.05,
    backoffMaxSeconds: 1,
    backoffJitter: false,
    logLevel: "silent",
  };
}

export async function createTestDb(overrides: TaskQueueOptions = {}): Promise<TestDb> {
  const schema = overrides.schema ?? `tq_test_${randomBytes(5).toString("hex")}`;
  const config = resolveConfig({ ...testOptions(schema), ...overrides });
  const pool = createPool({ connectionString: DATABASE_URL, max: 10 });
  pool.on("error", () => undefined);
  await migrate(pool, config);
  const ledger = new Ledger(pool, schema);
  const sessions: LockSession[] = [];
  return {
    async openLockSession(workerId) {
      const session = await LockSession.open({
        connectionString: DATABASE_URL,
        schema,
        workerId,
        onLost: () => undefined,
      });
      sessions.push(session);
      return withTestWrites(session);
    },
    async closeLockSessions() {
      await Promise.all(sessions.splice(0).map((session) => session.close()));
    },
    schema,
    pool,
    ledger,
    config,
    async sql(text, values = []) {
      const client = await pool.connect();
      try {
        await client.query(`SET search_path TO "${schema}"`);
        const result = await client.query(text, values);
        return result.rows;
      } finally {
        await client.query("RESET search_path").catch(() => undefined);
        client.release();
      }
    },
    async drop() {
      await Promise.all(sessions.map((session) => session.close()));
      await pool.query(`DROP SCHEMA "${schema}" CASCADE`);
      await pool.end();
    },
  };
}
