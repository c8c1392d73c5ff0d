/** Small reads of a chaos system's state that several chaos tests share. */
import { setTimeout as sleep } from "node:timers/promises";
import type pg from "pg";
import { SCHEMA } from "./system.js";

/** Job ids whose execution in process `pid` has started and not recorded its end. */
export async function runningIn(db: pg.Pool, pid: number): Promise<number[]> {
  const { rows } = await db.query<{ job_id: string }>(
    `SELECT DISTINCT job_id FROM "${SCHEMA}".executions WHERE pid = $1 AND finished_at IS NULL`,
    [pid],
  );
  return rows.map((row) => Number(row.job_id));
}

/** How many jobs the worker process `pid` holds (claimed or running, by the ledger). */
export async function heldBy(db: pg.Pool, pid: number): Promise<number> {
  const { rows } = await db.query<{ n: number }>(
    `SELECT count(*)::int AS n FROM "${SCHEMA}".jobs AS j
     WHERE j.status IN ('claimed', 'running')
       AND EXISTS (SELECT FROM "${SCHEMA}".workers AS w
                   WHERE w.pid = $1 AND (j.worker_id = w.id OR j.worker_id LIKE w.id || '/%'))`,
    [pid],
  );
  return rows[0]?.n ?? 0;
}

/** How many of `ids` are in a final state (done, dead, cancelled). */
export async function finalCount(db: pg.Pool, ids: readonly number[]): Promise<number> {
  const { rows } = await db.query<{ n: number }>(
    `SELECT count(*)::int AS n FROM "${SCHEMA}".jobs WHERE id = ANY($1::bigint[]) AND status IN ('done', 'dead', 'cancelled')`,
    [ids],
  );
  return rows[0]?.n ?? 0;
}

/** Each of `ids` with its status and attempt count. */
export async function statuses(
  db: pg.Pool,
  ids: readonly number[],
): Promise<Map<number, { status: string; attempt: number }>> {
  const { rows } = await db.query<{ id: string; status: string; attempt: number }>(
    `SELECT id, status, attempt FROM "${SCHEMA}".jobs WHERE id = ANY($1::bigint[])`,
    [ids],
  );
  return new Map(rows.map((row) => [Number(row.id), { status: row.status, attempt: row.attempt }]));
}

/**
 * Re-checks `check` every `everyMs` until it holds; resolves with the milliseconds it took.
 * @throws Error naming `what` after `timeoutMs`.
 */
export async function timeUntil(
  check: () => Promise<boolean>,
  timeoutMs: number,
  what: string,
  everyMs = 50,
): Promise<number> {
  const started = Date.now();
  while (!(await check().catch(() => false))) {
    if (Date.now() - started > timeoutMs)
      throw new Error(`timed out after ${timeoutMs} ms waiting for ${what}`);
    await sleep(everyMs);
  }
  return Date.now() - started;
}
