/**
 * Cancelling jobs (DESIGN.md §4, "Cancel"): the pending-only cancel of `DELETE /jobs/{id}`, the
 * cancel of any live job (pending, claimed or running) of `POST /jobs/{id}/cancel`, and the check a
 * worker makes of jobs whose claim it found gone.
 */
import type pg from "pg";
import { JobNotFoundError, JobStateConflictError } from "../errors.js";
import { checkJobId } from "./checks.js";
import { cancelAnyJob, cancelJob, cancelledAmong } from "./sql/read.js";
import type { Statement } from "./sql/statement.js";
import type { Job } from "./types.js";

/** Which cancel: `pending` (only a pending job) or `live` (pending, claimed or running). */
export type CancelScope = "pending" | "live";

type CancelRow = Job &
  pg.QueryResultRow & {
    cancelled: boolean;
    was_held?: boolean;
    old_status?: unknown;
    watched?: unknown;
    told?: unknown;
  };

/**
 * Cancels job `id` within `scope` and returns it (status `cancelled`).
 * @throws {JobValidationError} `id` is not a positive integer.
 * @throws {JobNotFoundError} no such job.
 * @throws {JobStateConflictError} the job is not in `scope` (`pending`: claimed, running or
 *   finished; `live`: done, dead or cancelled).
 */
export async function cancelOne(pool: pg.Pool, schema: string, id: number, scope: CancelScope): Promise<Job> {
  checkJobId(id);
  const sql: Statement = scope === "pending" ? cancelJob(schema) : cancelAnyJob(schema);
  const { rows } = await pool.query<CancelRow>({ ...sql, values: [id] });
  const row = rows[0];
  if (!row) throw new JobNotFoundError(id);
  if (!row.cancelled) throw new JobStateConflictError(id, row.status, "cancel");
  const { cancelled: _, was_held: _held, old_status: _old, watched: _watched, told: _told, ...job } = row;
  return job;
}

/** Which of `ids` are `cancelled` now. */
export async function readCancelled(
  pool: pg.Pool,
  schema: string,
  ids: readonly number[],
): Promise<Set<number>> {
  const { rows } = await pool.query<{ id: number }>({ ...cancelledAmong(schema), values: [ids] });
  return new Set(rows.map((r) => r.id));
}
