import { type Statement, statement } from "./statement.js";

/**
 * Every table and index of the schema with its size on disk, largest first: `name`, `kind` (`table`
 * or `index`), `table_name` (an index's table; a table's own name), `bytes` (the relation's own
 * pages: heap, or index). `$1`: the schema name.
 */
export const relationSizes = (schema: string): Statement =>
  statement(
    schema,
    "inspect_relation_sizes",
    `SELECT c.relname AS name,
            CASE WHEN c.relkind = 'i' THEN 'index' ELSE 'table' END AS kind,
            coalesce(t.relname, c.relname) AS table_name,
            pg_relation_size(c.oid)::bigint AS bytes
     FROM pg_class c
     JOIN pg_namespace n ON n.oid = c.relnamespace
     LEFT JOIN pg_index i ON i.indexrelid = c.oid
     LEFT JOIN pg_class t ON t.oid = i.indrelid
     WHERE n.nspname = $1 AND c.relkind IN ('r', 'p', 'i')
     ORDER BY bytes DESC, name`,
  );

/**
 * Job advisory locks held in this database (lock class `$1`; the key's second half is the job id modulo 2^31, see statement.ts `lockKey`), each with
 * the held job it belongs to, or NULLs when no claimed or running job has its key (a lock that
 * outlived its job): `pid` (the holding session), `job_key`, `id`, `type`, `status`, `worker_id`,
 * `held_seconds` (since the claim). At most `$2` rows, oldest claim first.
 */
export const heldLocksWithJobs = (schema: string): Statement =>
  statement(
    schema,
    "inspect_held_locks",
    `SELECT l.pid, l.objid::bigint AS job_key, j.id, j.type, j.status, j.worker_id,
            extract(epoch FROM now() - j.claimed_at)::float8 AS held_seconds
     FROM pg_locks l
     LEFT JOIN $S.jobs j
       ON j.status IN ('claimed', 'running') AND j.id % 2147483648 = l.objid::bigint
     WHERE l.locktype = 'advisory' AND l.objsubid = 2 AND l.granted
       AND l.database = (SELECT oid FROM pg_database WHERE datname = current_database())
       AND l.classid = ($1::int4::bigint & 4294967295)::oid
     ORDER BY j.claimed_at NULLS FIRST, l.objid
     LIMIT $2`,
  );
