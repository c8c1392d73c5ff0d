import { lockKey, quoteIdentifier, type Statement, statement } from "./statement.js";

/**
 * Statements of the migration runner (src/queue/migrate.ts). The runner holds a transaction-level
 * advisory lock on (lock class, -1) for the whole run; job ids map to objids >= 0, so it never
 * meets a job's lock.
 */
export const migrationLock = (schema: string): Statement =>
  statement(schema, "migration_lock", `SELECT pg_advisory_xact_lock(${lockKey("$1", "-1")})`);

/**
 * The migration transaction's own statement deadline, instead of the connection's: $1 milliseconds
 * (text; `set_config` takes text). Local to the transaction.
 */
export const migrationStatementTimeout = (schema: string): Statement =>
  statement(schema, "migration_statement_timeout", `SELECT set_config('statement_timeout', $1::text, true)`);

export const createMigrationsTable = (schema: string): Statement =>
  statement(
    schema,
    "create_migrations_table",
    `CREATE SCHEMA IF NOT EXISTS $S;
     CREATE TABLE IF NOT EXISTS $S.migrations (
       version    integer     PRIMARY KEY,
       name       text        NOT NULL,
       applied_at timestamptz NOT NULL DEFAULT now()
     )`,
  );

export const appliedMigrations = (schema: string): Statement =>
  statement(schema, "applied_migrations", `SELECT version FROM $S.migrations ORDER BY version`);

export const recordMigration = (schema: string): Statement =>
  statement(schema, "record_migration", `INSERT INTO $S.migrations (version, name) VALUES ($1, $2)`);

/** Channel argument the notify triggers were created with. */
export const notifyTriggerChannel = (schema: string): Statement =>
  statement(
    schema,
    "notify_trigger_channel",
    `SELECT encode(tgargs, 'escape') AS args FROM pg_trigger
     WHERE tgrelid = to_regclass($1) AND tgname = 'jobs_notify_insert'`,
  );

/**
 * Re-points the insert trigger and wake_workers() at another channel (text: `quotedChannel` is a
 * quoted literal). Runs after every migration, so both exist.
 */
export const retargetNotifyTriggers = (schema: string, quotedChannel: string): string =>
  statement(
    schema,
    "retarget",
    `CREATE OR REPLACE TRIGGER jobs_notify_insert AFTER INSERT ON $S.jobs
       REFERENCING NEW TABLE AS new_jobs FOR EACH STATEMENT EXECUTE FUNCTION $S.jobs_after_insert(${quotedChannel});
     CREATE OR REPLACE FUNCTION $S.wake_workers(types text) RETURNS integer LANGUAGE plpgsql AS $$
     BEGIN
       PERFORM pg_notify(${quotedChannel}, CASE WHEN octet_length(types) > 7000 THEN '*' ELSE types END);
       RETURN 1;
     END
     $$`,
  ).text;

/**
 * Size of the server's shared lock table, which bounds how many advisory locks one session may
 * hold: one row, `slots`. Plain text, sent with a connection's settings in one simple query.
 *
 * PostgreSQL sizes the table for `max_locks_per_transaction` locks per server process or prepared
 * transaction (`NLOCKENTS` in src/backend/storage/lmgr/lock.c), and counts server processes as
 * `max_connections + autovacuum_max_workers + 1 + max_worker_processes + max_wal_senders`
 * (`InitializeMaxBackends`, PostgreSQL 12 to 17; later versions count a few more, so this is a
 * lower bound): 64 × 122 = 7,808 on a default server. A setting a server does not have counts 0.
 */
export const lockTableSize = `SELECT current_setting('max_locks_per_transaction')::int * (${[
  "max_connections",
  "autovacuum_max_workers",
  "max_worker_processes",
  "max_wal_senders",
  "max_prepared_transactions",
]
  .map((name) => `coalesce(current_setting('${name}', true)::int, 0)`)
  .join(" + ")} + 1) AS slots`;

/** LISTEN on `channel` (an identifier the config already restricted), simple-protocol text. */
export const listenTo = (channel: string): string => `LISTEN ${quoteIdentifier(channel)}`;

/** A cheap round trip that proves a connection and its server still answer (plain text). */
export const roundTrip = "SELECT 1";

/**
 * Whether the insert trigger that NOTIFYs workers exists and is enabled: one row, `present`.
 * `$1` is the quoted jobs table (`"schema".jobs`).
 */
export const notifyTriggerPresent = (schema: string): Statement =>
  statement(
    schema,
    "notify_trigger_present",
    `SELECT EXISTS (SELECT 1 FROM pg_trigger
       WHERE tgrelid = to_regclass($1) AND tgname = 'jobs_notify_insert' AND tgenabled <> 'D') AS present`,
  );

/**
 * Server-side bounds of a dedicated connection (plain text, sent with its other settings):
 * `idle_session_timeout` (the server ends the session, and releases its advisory locks, once it
 * has been idle this long; PostgreSQL 14 and later, skipped on older servers, where
 * `current_setting(…, true)` is NULL) and `statement_timeout`. Both in whole milliseconds; 0 leaves
 * a setting as it is. One row, two columns. Not read through `pg_settings`, which builds every
 * setting's row to find two: as a new connection's first statement that took 4.7 ms here, this
 * takes 2.1 (`SELECT 1` 1.4), on the path of a worker's first claim.
 */
export const sessionTimeouts = (idleSessionMs: number, statementMs: number): string => {
  const idle = Math.max(0, Math.round(idleSessionMs));
  const statementLimit = Math.max(0, Math.round(statementMs));
  const idleSet =
    idle > 0
      ? `CASE WHEN current_setting('idle_session_timeout', true) IS NOT NULL THEN set_config('idle_session_timeout', '${idle}', false) END`
      : "NULL";
  const statementSet =
    statementLimit > 0 ? `set_config('statement_timeout', '${statementLimit}', false)` : "NULL";
  return `SELECT ${idleSet} AS idle_session_timeout, ${statementSet} AS statement_timeout`;
};
