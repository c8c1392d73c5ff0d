/**
 * A claim's rows as a lock session reads them (sql/claim.ts `CLAIMED_COLUMNS`): in array row mode,
 * each row the CLAIMED_FIELDS in their order, then the claimed row version's `ctid` (null in a
 * report row). The jobs are built as object literals of one shape, and each version is kept for
 * the job's completion, which reads the row where its claim left it (sql/finish.ts).
 */
import type pg from "pg";
import type { ClaimedJob } from "../types.js";

/** A claim's row in array mode (see the top of the file). */
export type ClaimRow = unknown[] & pg.QueryResultRow;

/**
 * The row version (`ctid`, as PostgreSQL prints it: `(block,offset)`) each held job's claim
 * returned, by job id. A lock session forgets a job's version when it releases the job's lock,
 * which every end of a held job asks for.
 */
export class RowVersions {
  private readonly byId = new Map<number, string>();

  /** The jobs of a claim's `rows`, in their order; remembers each claimed row's version. */
  jobsOf(rows: readonly ClaimRow[]): ClaimedJob[] {
    const jobs: ClaimedJob[] = new Array(rows.length);
    for (let i = 0; i < rows.length; i++) {
      const row = rows[i] as ClaimRow;
      jobs[i] = {
        id: row[0],
        type: row[1],
        payload: row[2],
        priority: row[3],
        attempt: row[4],
        maxRetries: row[5],
        timeoutSeconds: row[6],
      } as ClaimedJob;
      const version = row[7];
      if (typeof version === "string") this.byId.set(row[0] as number, version);
    }
    return jobs;
  }

  /** The versions of `ids` (null where none is known), in their order. */
  of(ids: readonly number[]): (string | null)[] {
    return ids.map((id) => this.byId.get(id) ?? null);
  }

  /** Forgets the versions of `ids` (their locks are being released). */
  forget(ids: readonly number[]): void {
    for (const id of ids) this.byId.delete(id);
  }

  /** How many versions are kept: at most one per job the session holds. */
  get size(): number {
    return this.byId.size;
  }
}
