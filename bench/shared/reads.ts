/**
 * Ledger reads and writes only the benchmarks need (`npm run bench:math`, `npm run bench:load`): a
 * bulk read of many jobs with microsecond timestamps, making delayed jobs due at once, and dropping
 * the benchmark's throw-away schema. Thin functions over the statements in ./statements.ts.
 */
import type { Queryable } from "../../src/db/pool.js";
import type { JobStatus, JsonValue } from "../../src/queue/types.js";
import { dropSchema, jobTimings, makeJobsDue, serverVersion } from "./statements.js";

/** A job as the benchmarks read it: result plus database-clock timestamps in µs since the epoch. */
export interface JobTiming {
  id: number;
  type: string;
  status: JobStatus;
  payload: JsonValue;
  result: JsonValue | null;
  error: string | null;
  createdUs: number;
  claimedUs: number | null;
  startedUs: number | null;
  completedUs: number | null;
}

interface JobTimingRow {
  id: number | string;
  type: string;
  status: JobStatus;
  payload: JsonValue;
  result: JsonValue | null;
  error: string | null;
  created_us: number;
  claimed_us: number | null;
  started_us: number | null;
  completed_us: number | null;
}

/** Largest id list sent in one statement; longer lists are read in chunks. */
const READ_CHUNK = 10_000;

/**
 * Reads the jobs with these ids (in id order; missing ids are absent), timestamps in µs since the
 * epoch from the database clock.
 */
export async function readJobTimings(
  db: Queryable,
  schema: string,
  ids: readonly number[],
): Promise<JobTiming[]> {
  const out: JobTiming[] = [];
  for (let start = 0; start < ids.length; start += READ_CHUNK) {
    const { rows } = await db.query<JobTimingRow>({
      ...jobTimings(schema),
      values: [ids.slice(start, start + READ_CHUNK)],
    });
    for (const r of rows)
      out.push({
        id: Number(r.id),
        type: r.type,
        status: r.status,
        payload: r.payload,
        result: r.result,
        error: r.error,
        createdUs: r.created_us,
        claimedUs: r.claimed_us,
        startedUs: r.started_us,
        completedUs: r.completed_us,
      });
  }
  return out.sort((a, b) => a.id - b.id);
}

/**
 * Makes these pending, delayed jobs due now and sends one `*` notification on `notifyChannel`
 * (delivered at commit), so every listening worker wakes at once. Returns how many became due.
 */
export async function makeDelayedJobsDue(
  db: Queryable,
  schema: string,
  ids: readonly number[],
  notifyChannel: string,
): Promise<number> {
  const { rows } = await db.query<{ due: number }>({
    ...makeJobsDue(schema),
    values: [ids, notifyChannel],
  });
  return rows[0]?.due ?? 0;
}

/** The server's version string, e.g. `"16.4"` or `"15.20 (Debian 15.20-0+deb12u1)"`. */
export async function postgresServerVersion(db: Queryable): Promise<string> {
  const { rows } = await db.query<{ version: string }>(serverVersion);
  return rows[0]?.version ?? "unknown";
}

/** Drops `schema` and everything in it. Only for the benchmarks' own throw-away schemas. */
export async function dropBenchSchema(db: Queryable, schema: string): Promise<void> {
  await db.query(dropSchema(schema));
}
