import { type JsonArrayType, jsonArrayElements } from "./params.js";
import { type Statement, statement } from "./statement.js";

/**
 * Epoch milliseconds of timestamp column `column` (a read cuts the stored microseconds to the
 * millisecond; so does `new Date` of this value). `date_part` computes in float8, and the epoch
 * in seconds rounded to whole microseconds is exact until 2^33 s, the year 2242; `extract`
 * computes in numeric, exact in any year but slow: with it for every row, converting the two times
 * took an eighth of a 1,000-job insert. Times from 2200 on (a far `runAt`) take `extract`.
 */
const epochMs = (column: string) =>
  `CASE WHEN ${column} < '2200-01-01T00:00:00Z'::timestamptz
     THEN round(date_part('epoch', ${column}) * 1000000) / 1000
     ELSE (extract(epoch FROM ${column}) * 1000)::float8 END`;

/**
 * What an insert returns: only what the database decides. Everything else of the new job is what
 * was sent (see insert.ts); times as epoch milliseconds, which cost far less to parse than
 * timestamps.
 */
const INSERTED_COLUMNS = `id, ${epochMs("run_at")} AS run_at_ms, ${epochMs("created_at")} AS created_at_ms`;

/**
 * Inserts jobs given as parallel arrays (one element per job), in array order, and returns their
 * INSERTED_COLUMNS.
 * One statement for one job or ten thousand: the notify trigger fires once per statement.
 * `run_at` NULL or in the past means now (DESIGN.md §8).
 * $1 type text[], $2 payloads as one JSON array read as `payloads` (see params.ts), $3 priority
 * smallint[], $4 max_retries int[], $5 run_at timestamptz[]
 */
export const enqueueJobs = (schema: string, payloads: JsonArrayType = "jsonb"): Statement =>
  statement(
    schema,
    payloads === "jsonb" ? "enqueue_jobs" : "enqueue_jobs_json",
    `INSERT INTO $S.jobs (type, payload, priority, max_retries, run_at)
     SELECT t.type, t.payload::jsonb, t.priority, t.max_retries, greatest(coalesce(t.run_at, now()), now())
     FROM ROWS FROM (unnest($1::text[]), ${jsonArrayElements("$2", payloads)}, unnest($3::smallint[]),
                     unnest($4::int[]), unnest($5::timestamptz[]))
       WITH ORDINALITY AS t(type, payload, priority, max_retries, run_at, ord)
     ORDER BY t.ord
     RETURNING ${INSERTED_COLUMNS}`,
  );

/**
 * Inserts one job; returns its INSERTED_COLUMNS.
 * $1 type, $2 payload jsonb, $3 priority, $4 max_retries, $5 run_at (NULL = now).
 */
export const enqueueJob = (schema: string): Statement =>
  statement(
    schema,
    "enqueue_job",
    `INSERT INTO $S.jobs (type, payload, priority, max_retries, run_at)
     VALUES ($1::text, $2::jsonb, $3::smallint, $4::int, greatest(coalesce($5::timestamptz, now()), now()))
     RETURNING ${INSERTED_COLUMNS}`,
  );

/**
 * Inserts jobs of which some name an idempotency key (schema version 6; idempotency.ts), like
 * {@link enqueueJobs} with two more parameters, $6 keys text[] (NULL for a job without one) and $7
 * timeout_seconds int[] (schema version 11; NULL: none). Jobs with a timeout take this statement
 * too, keys or not, so that the common insert ({@link enqueueJobs}) keeps its parameters. No two
 * jobs of one call may share a key (the caller folds them first: ON CONFLICT DO UPDATE cannot touch
 * one row twice). A key that a job holds already creates nothing: `ON CONFLICT … DO UPDATE` waits
 * for a concurrent insert of the key to commit or roll back, then sees that job even if it
 * committed after this statement began (a plain read could not), and returns it. Its body must be
 * the one that job was enqueued with (the fingerprint: an MD5 of the canonical jsonb of type,
 * payload, priority, max_retries and the run time as asked for, NULL when not given, then the
 * timeout when one is given: a body without one keeps the fingerprint of schema version 6); otherwise
 * `idempotency_conflict` aborts the whole statement, SQLSTATE TQ409, nothing written.
 * Returns, in no particular order, INSERTED_COLUMNS, `idempotency_key`, and `inserted` (false:
 * the job existed; its id and times).
 */
export const enqueueKeyedJobs = (schema: string, payloads: JsonArrayType = "jsonb"): Statement =>
  statement(
    schema,
    payloads === "jsonb" ? "enqueue_keyed_jobs" : "enqueue_keyed_jobs_json",
    `INSERT INTO $S.jobs AS j (type, payload, priority, max_retries, run_at, idempotency_key, idempotency_fingerprint,
                               timeout_seconds)
     SELECT t.type, t.payload::jsonb, t.priority, t.max_retries, greatest(coalesce(t.run_at, now()), now()), t.key,
            CASE WHEN t.key IS NOT NULL THEN decode(md5((jsonb_build_array(
              t.type, t.payload::jsonb, t.priority, t.max_retries, extract(epoch FROM t.run_at))
              || CASE WHEN t.timeout_seconds IS NULL THEN '[]'::jsonb ELSE jsonb_build_array(t.timeout_seconds) END
              )::text), 'hex') END,
            t.timeout_seconds
     FROM ROWS FROM (unnest($1::text[]), ${jsonArrayElements("$2", payloads)}, unnest($3::smallint[]),
                     unnest($4::int[]), unnest($5::timestamptz[]), unnest($6::text[]), unnest($7::int[]))
       WITH ORDINALITY AS t(type, payload, priority, max_retries, run_at, key, timeout_seconds, ord)
     ORDER BY t.ord
     ON CONFLICT (idempotency_key) WHERE idempotency_key IS NOT NULL DO UPDATE
       SET idempotency_key = CASE WHEN j.idempotency_fingerprint IS NOT DISTINCT FROM excluded.idempotency_fingerprint
                                  THEN excluded.idempotency_key
                                  ELSE $S.idempotency_conflict(excluded.idempotency_key, j.id) END
     RETURNING ${INSERTED_COLUMNS}, idempotency_key, (xmax = 0) AS inserted`,
  );

/**
 * Frees the idempotency keys among $1 (text[]) whose jobs were created more than $2 seconds ago
 * (the window, > 0): the key is cleared from the old job, which stays as it is, so that a new
 * enqueue may take it. Through jobs_idempotency_key_idx. Returns nothing.
 */
export const expireIdempotencyKeys = (schema: string): Statement =>
  statement(
    schema,
    "expire_idempotency_keys",
    `UPDATE $S.jobs SET idempotency_key = NULL, idempotency_fingerprint = NULL
     WHERE idempotency_key = ANY($1::text[]) AND created_at <= now() - make_interval(secs => $2::float8)`,
  );
