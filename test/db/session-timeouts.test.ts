/**
 * The server-side bounds a dedicated connection sets for itself (sql/schema.ts `sessionTimeouts`,
 * sent by the lock session's two connections and the LISTEN connection): `idle_session_timeout`
 * and `statement_timeout` in milliseconds, each left as it is when given 0.
 */
import assert from "node:assert/strict";
import { it } from "node:test";
import pg from "pg";
import { sessionTimeouts } from "../../src/queue/sql/schema.js";
import { DATABASE_URL } from "../helpers/db.js";

/** The two settings after `text` ran on a fresh connection, in milliseconds. */
async function settingsAfter(text: string): Promise<{ idle: number; statement: number }> {
  const client = new pg.Client({ connectionString: DATABASE_URL, connectionTimeoutMillis: 5000 });
  await client.connect();
  try {
    await client.query(text);
    const { rows } = await client.query<{ idle: string; statement: string }>(
      `SELECT (SELECT setting FROM pg_settings WHERE name = 'idle_session_timeout') AS idle,
              (SELECT setting FROM pg_settings WHERE name = 'statement_timeout') AS statement`,
    );
    const row = rows[0] as { idle: string; statement: string };
    return { idle: Number(row.idle), statement: Number(row.statement) };
  } finally {
    await client.end();
  }
}

it("sets both bounds, in milliseconds", async () => {
  assert.deepEqual(await settingsAfter(sessionTimeouts(31_000, 4_500)), { idle: 31_000, statement: 4_500 });
});

it("0 leaves a bound as the server has it", async () => {
  const before = await settingsAfter("SELECT 1");
  assert.deepEqual(await settingsAfter(sessionTimeouts(0, 7_000)), { idle: before.idle, statement: 7_000 });
  assert.deepEqual(await settingsAfter(sessionTimeouts(12_000, 0)), {
    idle: 12_000,
    statement: before.statement,
  });
  assert.deepEqual(await settingsAfter(sessionTimeouts(0, 0)), before);
});

it("rounds to whole milliseconds and never sets a negative bound", async () => {
  const before = await settingsAfter("SELECT 1");
  assert.deepEqual(await settingsAfter(sessionTimeouts(1500.4, -5)), {
    idle: 1500,
    statement: before.statement,
  });
});
