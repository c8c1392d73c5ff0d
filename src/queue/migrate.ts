/**
 * Migration runner: numbered plain-SQL files in `src/db/migrations/` (copied to
 * `dist/src/db/migrations/` by the build, shipped in the package), applied forward-only in one
 * transaction under an advisory lock, so that any number of processes may run it at once
 * (DESIGN.md §2). The version row is inserted before the migration's SQL runs.
 */
import { readdirSync, readFileSync } from "node:fs";
import { dirname, join } from "node:path";
import { fileURLToPath } from "node:url";
import type pg from "pg";
import { extendQueryDeadline, queryDeadlineMs } from "../db/pool.js";
import { lockClassFor } from "./lock-class.js";
import {
  appliedMigrations,
  createMigrationsTable,
  migrationLock,
  migrationStatementTimeout,
  notifyTriggerChannel,
  recordMigration,
  retargetNotifyTriggers,
} from "./sql/schema.js";
import { quoteIdentifier, quoteLiteral } from "./sql/statement.js";
import { withTransaction } from "./transaction.js";

/**
 * The SQL files stay in the db folder (data, not code: nothing there imports this module), at the
 * same relative path from `src/queue/` and `dist/src/queue/`.
 */
const MIGRATIONS_DIR = join(dirname(fileURLToPath(import.meta.url)), "..", "db", "migrations");

/** One migration file: `0001_init.sql` → version 1, name `init`. */
export interface Migration {
  version: number;
  name: string;
  sql: string;
}

/** The schema version this code needs: the last migration file's. */
export function latestSchemaVersion(): number {
  return loadMigrations().at(-1)?.version ?? 0;
}

/** Reads the migration files in version order. */
export function loadMigrations(dir = MIGRATIONS_DIR): Migration[] {
  return readdirSync(dir)
    .filter((file) => /^\d{4}_[a-z0-9_]+\.sql$/.test(file))
    .sort()
    .map((file) => ({
      version: Number.parseInt(file.slice(0, 4), 10),
      name: file.slice(5, -4),
      sql: readFileSync(join(dir, file), "utf8"),
    }));
}

/** What {@link migrate} did. */
export interface MigrateResult {
  /** Versions applied by this call (empty: the schema was already current). */
  applied: number[];
  /** The schema's version afterwards. */
  version: number;
}

/** Default of `migrationTimeoutSeconds`: the deadline of each statement of a migration run. */
export const MIGRATION_TIMEOUT_SECONDS = 3600;

/**
 * Brings `schema` to the latest version and points the notify triggers at `notifyChannel`.
 * Safe to run concurrently from several processes; a no-op when current. Each statement of the
 * run (the wait for another process's migration lock, an index rebuilt over a large table) has a
 * deadline of `migrationTimeoutSeconds` on the server and, with a pool from `createPool`, on the
 * client, instead of the pool's statement deadline.
 * @throws the database error of a failing migration (57014 past the deadline); nothing of it is kept.
 */
export async function migrate(
  pool: pg.Pool,
  options: {
    schema: string;
    notifyChannel: string;
    /** Stop after this version (default: the latest). For upgrade tests and staged rollouts. */
    toVersion?: number;
    /** Deadline of each statement of the run, seconds. Default {@link MIGRATION_TIMEOUT_SECONDS}. */
    migrationTimeoutSeconds?: number;
  },
): Promise<MigrateResult> {
  const { schema, notifyChannel, toVersion = Number.POSITIVE_INFINITY } = options;
  const timeoutSeconds = options.migrationTimeoutSeconds ?? MIGRATION_TIMEOUT_SECONDS;
  const migrations = loadMigrations().filter((m) => m.version <= toVersion);
  return withTransaction(pool, async (client) => {
    const restoreDeadline = extendQueryDeadline(client, queryDeadlineMs(timeoutSeconds));
    try {
      return await migrateIn(client, schema, notifyChannel, migrations, timeoutSeconds);
    } finally {
      restoreDeadline();
    }
  });
}

/** The body of {@link migrate}, inside its transaction on `client`. */
async function migrateIn(
  client: pg.PoolClient,
  schema: string,
  notifyChannel: string,
  migrations: readonly Migration[],
  timeoutSeconds: number,
): Promise<MigrateResult> {
  await client.query({
    ...migrationStatementTimeout(schema),
    values: [String(Math.ceil(timeoutSeconds * 1000))],
  });
  await client.query({ ...migrationLock(schema), values: [lockClassFor(schema)] });
  await client.query(createMigrationsTable(schema).text);
  const done = new Set(
    (await client.query<{ version: number }>(appliedMigrations(schema).text)).rows.map((r) => r.version),
  );
  const applied: number[] = [];
  for (const migration of migrations) {
    if (done.has(migration.version)) continue;
    await client.query({ ...recordMigration(schema), values: [migration.version, migration.name] });
    await client.query(
      migration.sql
        .replaceAll(":SCHEMA", quoteIdentifier(schema))
        .replaceAll(":NOTIFY_CHANNEL", quoteLiteral(notifyChannel)),
    );
    applied.push(migration.version);
  }
  const current = await client.query<{ args: string }>({
    ...notifyTriggerChannel(schema),
    values: [`${quoteIdentifier(schema)}.jobs`],
  });
  if (current.rows[0]?.args !== `${notifyChannel}\\000`) {
    await client.query(retargetNotifyTriggers(schema, quoteLiteral(notifyChannel)));
  }
  // The schema's version: the highest ever applied, which may be above `toVersion`.
  return { applied, version: Math.max(0, ...done, ...applied) };
}
