/**
 * Transactions on the shared pool. Here rather than in src/db because the words that open and
 * close one are SQL, and SQL text lives in src/queue.
 */
import type pg from "pg";

/** Runs `fn` in a transaction on a client from `pool`; rolls back on any error and rethrows it. */
export async function withTransaction<T>(
  pool: pg.Pool,
  fn: (client: pg.PoolClient) => Promise<T>,
): Promise<T> {
  const client = await pool.connect();
  try {
    await client.query("BEGIN");
    const result = await fn(client);
    await client.query("COMMIT");
    return result;
  } catch (error) {
    await client.query("ROLLBACK").catch(() => undefined);
    throw error;
  } finally {
    client.release();
  }
}
