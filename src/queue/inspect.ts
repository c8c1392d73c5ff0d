/**
 * Reads for `taskqueue inspect` (src/cli/inspect/): sizes of the schema's tables and indexes, and
 * the job advisory locks held with the job each belongs to.
 */
import type { Queryable } from "../db/pool.js";
import { lockClassFor } from "./lock-class.js";
import { heldLocksWithJobs, relationSizes } from "./sql/inspect.js";

/** A table or index of the schema and its size on disk. */
export interface RelationSize {
  name: string;
  kind: "table" | "index";
  /** The table an index belongs to (a table's own name). */
  tableName: string;
  bytes: number;
}

/** A job advisory lock some session holds, with its job (null fields: no held job has its key). */
export interface HeldLock {
  /** Server pid of the session holding it. */
  pid: number;
  /** The lock's key: job id modulo 2^31. */
  jobKey: number;
  jobId: number | null;
  type: string | null;
  status: string | null;
  workerId: string | null;
  /** Since the job was claimed, seconds. */
  heldSeconds: number | null;
}

/** Tables and indexes of `schema`, largest first. */
export async function readRelationSizes(db: Queryable, schema: string): Promise<RelationSize[]> {
  const { rows } = await db.query<{
    name: string;
    kind: "table" | "index";
    table_name: string;
    bytes: number;
  }>({ ...relationSizes(schema), values: [schema] });
  return rows.map((r) => ({ name: r.name, kind: r.kind, tableName: r.table_name, bytes: r.bytes }));
}

/** Up to `limit` job advisory locks of `schema` held now, oldest claim first, each with its job. */
export async function readHeldLocks(db: Queryable, schema: string, limit = 200): Promise<HeldLock[]> {
  const { rows } = await db.query<{
    pid: number;
    job_key: number;
    id: number | null;
    type: string | null;
    status: string | null;
    worker_id: string | null;
    held_seconds: number | null;
  }>({ ...heldLocksWithJobs(schema), values: [lockClassFor(schema), limit] });
  return rows.map((r) => ({
    pid: r.pid,
    jobKey: r.job_key,
    jobId: r.id,
    type: r.type,
    status: r.status,
    workerId: r.worker_id,
    heldSeconds: r.held_seconds,
  }));
}
