import { countStatuses } from "./accounting.js";
import { CLAIMED_SELECT_LIST } from "./columns.js";
import { unlockSelect } from "./finish.js";
import { fence, idsNotFound, lockKey, type Statement, statement } from "./statement.js";

/**
 * The claim protocol (DESIGN.md §5), one statement, one round trip, on the worker's lock session:
 * pick due pending jobs of the handled types that are neither paused (paused_types) nor limited
 * (type_limits: claim-limited.ts claims those) in claim order with FOR UPDATE SKIP LOCKED, take the
 * session-level advisory lock of each while its row lock is held (skipping any whose lock another
 * session still holds), and mark those claimed. Both CTEs are MATERIALIZED so that the LIMIT is
 * applied before any lock is tried. The update finds its rows in two steps (the completion's
 * pattern, finish.ts). `claimed_found` reads each where the candidates' scan locked it, by its
 * `ctid`, a TID scan (6 % less of the claim's backend CPU than a walk of the primary key per job,
 * `bench:statement-cpu`). A row updated after this statement's snapshot and before its row lock
 * (still pending: a `watchJob`, a retry-now) is locked at its newest version, which that snapshot
 * does not see, so the TID scan finds nothing there; `claimed_rest` takes the locked ids the first
 * step did not update through the primary key (none in the common case: its ids are then not
 * computed), which reaches the visible version and follows it to the newest. Without that second
 * step such a job stayed unclaimed under the advisory lock just taken
 * (test/queue/row-versions.test.ts). `claimed` is their union, inlined where it is read. A join
 * with a CTE would let the planner pick a sequential scan of the whole table, which grows with the
 * history, so both steps take their rows from an array. Each step checks the status again (written
 * `coalesce(status, '')` so that the planner cannot answer it from jobs_claim_idx, whose predicate
 * `status = 'pending'` would otherwise make it walk that whole index for the ids, as the fence's
 * status test does for jobs_stale_idx): the row lock taken by the candidates' scan already keeps
 * the row pending until commit, so this only matters if that lock is ever lost in a rewrite (test/queue/claim.test.ts, "a claim skips
 * a pending job whose row another transaction holds"). Claimed jobs leave the pending count.
 * $1 types text[], $2 limit int, $3 lock class int4, $4 worker id text.
 *
 * The same statement first releases the advisory locks of batches whose outcome has committed
 * ($5, as `unlockJobs` in finish.ts does), so that a busy worker's lock connection needs one round
 * trip per batch, not two. The unlock is an InitPlan of the candidates' scan, so it runs before any
 * lock is tried: the session never holds both the released batch and the claimed one. It wakes
 * nobody: an unlock that must NOTIFY goes out alone (`unlockJobs`), so that a failed claim cannot
 * roll its NOTIFY back.
 * $5 ids to unlock bigint[] (may be empty).
 *
 * Run-alone jobs (reclaimed from a lost worker process, DESIGN.md §6) are never claimed here (they
 * are not in jobs_claim_idx); {@link claimAloneJob} takes them. Instead the claim reports them: if
 * any of `$1` is due, one more row follows the claimed ones, every column NULL (one probe of
 * jobs_alone_idx, which is empty but after a worker's loss). Run-alone jobs of limited types are
 * reported and claimed all the same: limits do not apply to them (DESIGN.md §4, "Type limits").
 * Returns the claimed jobs in claim order (priority DESC, run_at, id), then that report row, if any.
 *
 * The candidates are read per type (a LATERAL per element of `$1`, through jobs_claim_idx, which
 * is led by the type's hash since schema version 14, see {@link ofType}), so that a claim never
 * reads other types' pending jobs: each type gives its first `$2` unlocked due jobs in claim
 * order, and the first `$2` of their union, in claim order, are the candidates, the same jobs as one walk of all of `$1`'s pending jobs in claim order would
 * take. The price: when several of `$1` have due jobs, the rows a type gives beyond the claimed
 * ones stay row-locked until the claim commits (other claims skip them meanwhile). A paused or
 * limited type is dropped before its scan, so it costs nothing. `test/queue/plans.test.ts` checks the plan with
 * a large backlog of another type. With `oneType` (a worker of one type: `$1` has one element) the
 * statement reads that type's jobs straight from jobs_claim_idx in claim order, with no LATERAL
 * and no sort of the candidates (the drain's hot path of a single-type worker).
 *
 * The claimed rows are sorted as the update returned them, in a subquery that `OFFSET 0` keeps
 * whole, and named as fields above it: sorted after the renaming, each row was built once more to
 * be sorted (measured: 1.6 million more backend instructions per claim of 1,000 jobs, 2 % of it).
 */
export const claimJobs = (schema: string, oneType = false): Statement =>
  statement(
    schema,
    oneType ? "claim_jobs_one_type" : "claim_jobs",
    `WITH unlocked AS MATERIALIZED (
       ${unlockSelect({ ids: "$5", lockClass: "$3", wakeTypes: "NULL" })}
     ), ${claimCtes({ types: "$1", limit: "$2", lockClass: "$3", workerId: "$4", after: "(SELECT unlocked FROM unlocked) >= 0", alone: false, oneType })}
     (SELECT ${CLAIMED_COLUMNS}, ctid FROM (SELECT * FROM claimed ORDER BY priority DESC, run_at, id OFFSET 0) AS claimed)
     UNION ALL
     (SELECT ${CLAIMED_COLUMNS}, NULL::tid FROM (SELECT (NULL::$S.jobs).*) AS report
      WHERE EXISTS (SELECT FROM $S.jobs WHERE status = 'pending' AND run_alone AND run_at <= now() AND type = ANY($1::text[])
                    AND type <> ALL(${PAUSED_TYPES})))`,
  );

/**
 * Claims the first due run-alone job of `$1` (claim order), for a worker process that holds no
 * other job and claims nothing else until this one's outcome is written (DESIGN.md §6), with the
 * claim protocol of {@link claimJobs} (row lock, then advisory lock, then `claimed`), carrying the
 * pending unlocks the same way. Not a hot statement: a worker sends it only when a claim reported
 * run-alone jobs due and it holds nothing.
 * $1 types text[], $2 lock class int4, $3 worker id text, $4 ids to unlock bigint[].
 * Returns the claimed job (zero or one row).
 */
export const claimAloneJob = (schema: string): Statement =>
  statement(
    schema,
    "claim_alone_job",
    `WITH unlocked AS MATERIALIZED (
       ${unlockSelect({ ids: "$4", lockClass: "$2", wakeTypes: "NULL" })}
     ), ${claimCtes({ types: "$1", limit: "1", lockClass: "$2", workerId: "$3", after: "(SELECT unlocked FROM unlocked) >= 0", alone: true, oneType: false })}
     SELECT ${CLAIMED_COLUMNS}, ctid FROM claimed`,
  );

/**
 * Columns of a claimed job as a claim returns it: the worker's `ClaimedJob` fields in the order of
 * CLAIMED_FIELDS (../job-shape.ts, by columns.ts). Every claim returns them followed by the claimed
 * row version's `ctid` (NULL in a report row), and is read in array row mode
 * (session/claim-rows.ts): the completion finds each row where its claim left it (finish.ts).
 */
export const CLAIMED_COLUMNS = CLAIMED_SELECT_LIST;

/**
 * The claim's CTEs (`candidates`, `locked`, `claimed`, `claim_counted`), parameters named by the
 * caller: `types` text[], `limit` int, `lockClass` int4, `workerId` text; `after`, a condition
 * without columns that the candidates' scan evaluates once, before its first row; `alone`, whether
 * the candidates are run-alone jobs (through jobs_alone_idx) or ordinary ones (jobs_claim_idx).
 * `claimed` holds the claimed rows (id, type, payload, priority, attempt, max_retries, run_at,
 * timeout_seconds, and the ctid of the version the update wrote).
 */
const claimCtes = (p: {
  types: string;
  limit: string;
  lockClass: string;
  workerId: string;
  after: string;
  alone: boolean;
  oneType: boolean;
}): string =>
  p.oneType
    ? `candidates AS MATERIALIZED (
       SELECT id, ctid FROM $S.jobs
       WHERE ${ofType("type", `(${p.types}::text[])[1]`)} AND status = 'pending' AND NOT run_alone AND run_at <= now()
         AND (${p.types}::text[])[1] <> ALL(${UNCLAIMED_TYPES}) AND ${p.after}
       ORDER BY priority DESC, run_at, id
       LIMIT ${p.limit}
       FOR UPDATE SKIP LOCKED
     ${CLAIM_TAIL(p)}`
    : p.alone
      ? `candidates AS MATERIALIZED (
       SELECT id, ctid FROM $S.jobs
       WHERE status = 'pending' AND run_alone AND run_at <= now()
         AND type = ANY(${p.types}::text[]) AND type <> ALL(${PAUSED_TYPES}) AND ${p.after}
       ORDER BY priority DESC, run_at, id
       LIMIT ${p.limit}
       FOR UPDATE SKIP LOCKED
     ${CLAIM_TAIL(p)}`
      : `candidates AS MATERIALIZED (
       SELECT c.id, c.ctid FROM unnest(${p.types}::text[]) AS t(type)
       CROSS JOIN LATERAL (
         SELECT id, ctid, priority, run_at FROM $S.jobs
         WHERE ${ofType("type", "t.type")} AND status = 'pending' AND NOT run_alone AND run_at <= now()
         ORDER BY priority DESC, run_at, id
         LIMIT ${p.limit}
         FOR UPDATE SKIP LOCKED
       ) AS c
       WHERE t.type <> ALL(${UNCLAIMED_TYPES}) AND ${p.after}
       ORDER BY c.priority DESC, c.run_at, c.id
       LIMIT ${p.limit}
     ${CLAIM_TAIL(p)}`;

/**
 * A condition on a `jobs` row (its type column `column`) for a type given by the expression
 * `type`, which jobs_claim_idx answers (schema version 14: the index is led by hashtext(type), an
 * int4, not by the text); the second test drops another type's rows when two types share a hash.
 */
export const ofType = (column: string, type: string): string =>
  `hashtext(${column}) = hashtext(${type}) AND ${column} = ${type}`;

/** The paused types (an InitPlan: paused_types is read once per statement). */
export const PAUSED_TYPES = "ARRAY(SELECT type FROM $S.paused_types)";

/**
 * The types the ordinary claim leaves out: the paused ones and the limited ones (schema version 13,
 * claim-limited.ts takes those). One InitPlan reads both small tables once per statement.
 */
const UNCLAIMED_TYPES = "ARRAY(SELECT type FROM $S.paused_types UNION ALL SELECT type FROM $S.type_limits)";

/**
 * The CTEs after `candidates` (whose rows carry `id` and `ctid`, see {@link claimCtes}): the
 * advisory locks (`locked`), the update in two steps (`claimed_found`, `claimed_rest`; see
 * {@link claimJobs}), their union `claimed`, and its status accounting. Shared with the limited
 * claim (claim-limited.ts).
 */
export const CLAIM_TAIL = (p: { lockClass: string; workerId: string }): string => {
  const set = `SET status = 'claimed', claimed_at = now(), heartbeat_at = now(), started_at = NULL, worker_id = ${p.workerId}`;
  const returning =
    "RETURNING j.id, j.type, j.payload, j.priority, j.attempt, j.max_retries, j.run_at, j.timeout_seconds, j.ctid";
  return `), locked AS MATERIALIZED (
       SELECT id, ctid FROM candidates WHERE pg_try_advisory_lock(${lockKey(p.lockClass, "id")})
     ), claimed_found AS (
       UPDATE $S.jobs AS j ${set}
       WHERE j.ctid = ANY(ARRAY(SELECT ctid FROM locked)) AND coalesce(j.status, '') = 'pending'
       ${returning}
     ), claimed_rest AS (
       UPDATE $S.jobs AS j ${set}
       WHERE j.id = ANY(${idsNotFound("locked", "claimed_found")}) AND coalesce(j.status, '') = 'pending'
       ${returning}
     ), claimed AS NOT MATERIALIZED (
       SELECT * FROM claimed_found UNION ALL SELECT * FROM claimed_rest
     ), claim_counted AS (
       ${countStatuses("SELECT 'pending'::text, -count(*) FROM claimed")}
     )`;
};

/**
 * Fenced claimed → running. $1 ids bigint[], $2 attempts int[], $3 worker id. Returns ids that moved.
 * A row only moves while this worker still owns this attempt's claim.
 */
export const markRunning = (schema: string): Statement =>
  statement(
    schema,
    "mark_running",
    `UPDATE $S.jobs AS j
     SET status = 'running', started_at = now(), heartbeat_at = now()
     FROM unnest($1::bigint[], $2::int[]) AS i(id, attempt)
     WHERE ${fence({ idsParam: "$1", workerParam: "$3", heldStatuses: "'claimed'" })}
     RETURNING j.id`,
  );

/**
 * Heartbeat of a worker process: upserts its `workers` row and touches `heartbeat_at` of every job
 * it holds (fenced). $1 worker id, $2 host, $3 pid, $4 types text[], $5 concurrency,
 * $6 fenced writes so far, $7 held ids bigint[], $8 attempts int[]. Returns the ids still held.
 */
export const heartbeat = (schema: string): Statement =>
  statement(
    schema,
    "heartbeat",
    `WITH worker AS (
       INSERT INTO $S.workers AS w (id, host, pid, types, concurrency, fenced_writes)
       VALUES ($1, $2, $3, $4::text[], $5, $6)
       ON CONFLICT (id) DO UPDATE SET heartbeat_at = now(), fenced_writes = excluded.fenced_writes
     )
     UPDATE $S.jobs AS j SET heartbeat_at = now()
     FROM unnest($7::bigint[], $8::int[]) AS i(id, attempt)
     WHERE ${fence({ idsParam: "$7", workerParam: "$1", heldStatuses: "'claimed', 'running'" })}
     RETURNING j.id`,
  );

/** Removes a worker's row at clean shutdown. $1 worker id. */
export const deleteWorker = (schema: string): Statement =>
  statement(schema, "delete_worker", `DELETE FROM $S.workers WHERE id = $1`);

/**
 * Job ids whose advisory lock (lock class $1) is held, by any session, with the holder's pid.
 * For operators (inspect) and the tests that check no lock outlives its job.
 */
export const heldJobLocks = (schema: string): Statement =>
  statement(
    schema,
    "held_job_locks",
    `SELECT l.objid::bigint AS job_key, l.pid
     FROM pg_locks l
     WHERE l.locktype = 'advisory' AND l.objsubid = 2 AND l.granted
       AND l.database = (SELECT oid FROM pg_database WHERE datname = current_database())
       AND l.classid = ($1::int4::bigint & 4294967295)::oid`,
  );

/** The backend pid of the session (to match its locks in pg_locks). */
export const backendPid: Statement = {
  name: "taskqueue_backend_pid",
  text: "SELECT pg_backend_pid() AS pid",
};

/**
 * Planner settings of both connections of a lock session, which run only the statements of this
 * module and finish.ts, each touching a batch of rows. The point: plans that hold whatever the
 * statistics say, and that are made once per connection.
 * - `plan_cache_mode = force_generic_plan`: every statement is planned once per connection (again
 *   after an ANALYZE or DDL of its tables), not for every batch (planning a completion of 800 jobs
 *   took 1.2 ms of its 22). A generic plan cannot see how many elements an array holds, nor how
 *   many rows a table has now, so the settings below leave it only the intended plans.
 * - `enable_seqscan = off`: a plan built on an empty table found the claimed rows by a sequential
 *   scan (measured: 105 ms per claim once 20,000 jobs were pending); every statement here reaches
 *   its rows through jobs_claim_idx or the primary key.
 * - `enable_sort = off`: the claim walks jobs_claim_idx in claim order (per type) and stops at its LIMIT.
 *   Right after a burst of inserts, before ANALYZE has seen them, the planner believed the pending
 *   set tiny and chose to fetch all of it and sort it for every batch (20,000 rows sorted per claim
 *   of 800: a third slower drain, measured). A sort that has no alternative (the claimed rows'
 *   final order) still runs.
 * - `enable_nestloop = off`: fenced writes join their batch with the held jobs by hash. Plans that
 *   could not see the batch's size, or how many held jobs a new worker id matches, chose nested
 *   loops that rescanned the batch for every row (measured: 500 ms instead of 15 ms for 1,000
 *   completions with a large history; 55 ms instead of 3 ms for 400 with two lock sessions).
 *   The claim's LATERAL per type is a nested loop all the same: it is the only plan for it.
 * - `jit = off`: a disabled plan node adds a huge constant to a plan's cost, which would cross the
 *   JIT thresholds and compile every claim (measured: 150–200 ms per claim instead of 10 ms).
 * `test/queue/plans.test.ts` checks the cached plans built on an empty table, with 200,000 finished
 * jobs, and with statistics taken before 20,000 inserts.
 */
export const lockSessionSettings =
  "SET plan_cache_mode = force_generic_plan; SET enable_seqscan = off; SET enable_sort = off; " +
  "SET enable_nestloop = off; SET jit = off";

/**
 * The lock connection's settings: {@link lockSessionSettings}, and `synchronous_commit = off`. A
 * claim returns without waiting for its WAL to reach the disk. What that risks is a claim lost to a
 * crash of the database server within a fraction of a second of it: the job is then pending again,
 * and runs again. A database crash ends every lock session anyway, so every job held at that
 * moment runs again (at least once across crashes, DESIGN.md §5); a lost claim only brings that
 * forward. Unlocks write no WAL; outcomes, heartbeats and inserts keep synchronous commits, and an
 * outcome's commit flushes the WAL up to it, claims included. One corner: a lost claim counts no
 * attempt, so a job that crashed the database server before any later commit flushed its claim
 * would not move toward the dead-letter table; the running mark, committed as the handler starts,
 * closes that window to a few milliseconds. With the cached plan, a one-job claim (an idle worker's
 * pick-up) took 0.8 ms instead of 1.6–2.1 ms here.
 */
export const lockConnectionSettings = `${lockSessionSettings}; SET synchronous_commit = off`;

/**
 * The write connection's settings: {@link lockSessionSettings}, and `enable_indexscan = off`. The
 * completion reads its rows at the versions their claims returned, a TID scan (finish.ts); with
 * index scans allowed, a plan cached while the table looked empty read them by a walk of the
 * whole primary key instead, which the planner costs lower than a TID scan on an empty table
 * (and which grows with the history). The write connection's other statements reach their rows
 * by id through a bitmap scan of the primary key, as good for a batch.
 * `test/queue/plans.test.ts` checks both plans, cached on an empty table.
 */
export const writeConnectionSettings = `${lockSessionSettings}; SET enable_indexscan = off`;
