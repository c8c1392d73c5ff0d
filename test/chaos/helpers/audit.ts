/**
 * The ledger audit that every chaos test and the soak end with. Given the ids a client was
 * told were accepted (each 201 of the API, or ids a committed insert returned), it waits (bounded)
 * until each has reached a final state, then checks, from the database alone:
 *
 * 1. **nothing lost**: every acknowledged id exists in `jobs`;
 * 2. **everything finished**: each is `done`, `dead` or `cancelled` within the bound (the rest
 *    are counted as still pending or held);
 * 3. **outcomes written once**: the row reached its final state through exactly one UPDATE (the
 *    `outcome_log` trigger below logs every UPDATE that leaves a row `done` or `dead`; a second,
 *    last-writer-wins write would log twice), a `dead` job has exactly one dead-letter row, and a
 *    `done` job's result names an execution (`executions.id`) of that job;
 * 4. **executions**: how many times each job's handler started (the `executions` table, written
 *    by the handler on its own connection), printed as a distribution;
 * 5. **overlaps only where allowed**: two executions of one job overlap when the later started
 *    before the earlier ended (an execution that never recorded its end ended when its process
 *    did, or is still running). While a worker holds a job's lock, no other execution of it may
 *    start: an overlap is therefore allowed only when the earlier execution's lock was lost (its
 *    session died, was cut off or was ended by the server) — then the earlier one's result must
 *    have been refused: the stored result must not name an execution that a later one overlaps.
 *    Tests without a lost session pass `allowOverlap: false`: any overlap fails;
 * 6. **no advisory lock left behind**: once nothing is held, `pg_locks` shows no advisory lock of
 *    the schema's class (src/queue/lock-class.ts).
 *
 * The report is printed as a table (one line a check) and returned for the test to assert on.
 */
import { setTimeout as sleep } from "node:timers/promises";
import type pg from "pg";
import { lockClassFor } from "../../../src/queue/lock-class.js";

/**
 * Creates the audit's tables in `schema` (after migrate): `executions` (written by the handlers of
 * test/fixtures/chaos-handlers.ts) and `outcome_log` with its trigger on `jobs`.
 */
export async function installAuditTables(db: pg.Pool, schema: string): Promise<void> {
  const s = `"${schema}"`;
  await db.query(`
    CREATE TABLE IF NOT EXISTS ${s}.executions (
      id          bigint GENERATED ALWAYS AS IDENTITY PRIMARY KEY,
      job_id      bigint NOT NULL,
      attempt     integer NOT NULL,
      pid         integer NOT NULL,
      started_at  timestamptz NOT NULL DEFAULT clock_timestamp(),
      finished_at timestamptz,
      outcome     text
    );
    CREATE INDEX IF NOT EXISTS executions_job_idx ON ${s}.executions (job_id);
    CREATE TABLE IF NOT EXISTS ${s}.outcome_log (
      job_id  bigint NOT NULL,
      status  text NOT NULL,
      result  jsonb,
      at      timestamptz NOT NULL DEFAULT clock_timestamp()
    );
    CREATE INDEX IF NOT EXISTS outcome_log_job_idx ON ${s}.outcome_log (job_id);
    CREATE OR REPLACE FUNCTION ${s}.log_outcome() RETURNS trigger LANGUAGE plpgsql AS $$
    BEGIN
      INSERT INTO ${s}.outcome_log (job_id, status, result) VALUES (NEW.id, NEW.status, NEW.result);
      RETURN NULL;
    END $$;
    DROP TRIGGER IF EXISTS log_outcome ON ${s}.jobs;
    CREATE TRIGGER log_outcome AFTER UPDATE ON ${s}.jobs
      FOR EACH ROW WHEN (NEW.status IN ('done', 'dead')) EXECUTE FUNCTION ${s}.log_outcome();
  `);
}

export interface AuditOptions {
  /** Jobs the client was told exist (201s, committed inserts). */
  acknowledged: readonly number[];
  /** How long to wait for every acknowledged job to be final. */
  boundMs: number;
  /** Whether a guarantee allows overlapping executions here (a lock session was lost). */
  allowOverlap: boolean;
  /** When each worker process ended (pid → ms since the epoch): the end of its unfinished executions. */
  processEnds?: ReadonlyMap<number, number>;
  /** Printed above the table. */
  title?: string;
  /** Do not wait for final states (the soak counts jobs still pending instead). */
  noWait?: boolean;
}

export interface AuditReport {
  acknowledged: number;
  /** Acknowledged ids missing from `jobs`. */
  lost: number[];
  done: number;
  dead: number;
  cancelled: number;
  /** Acknowledged jobs still pending, claimed or running at the end of the wait. */
  unfinished: number[];
  /** Jobs whose final state was written more than once. */
  writtenTwice: number[];
  /** Done jobs whose result names no execution of theirs. */
  resultWithoutExecution: number[];
  /** Dead jobs without exactly one dead-letter row. */
  deadLetterMismatch: number[];
  /** outcome writes (completions or deaths) per job → number of jobs: 1× each final job, 0× the rest. */
  completions: Map<number, number>;
  /** executions per job → number of jobs (acknowledged jobs only). */
  executions: Map<number, number>;
  /** Pairs of overlapping executions, as "job:exec1/exec2". */
  overlaps: string[];
  /** Overlaps where the stored result is the earlier (overlapped) execution's: never allowed. */
  badOverlaps: string[];
  /** Advisory locks of the schema's class still granted. */
  locksLeft: number;
  /** Seconds the wait took. */
  waitedSeconds: number;
  /** Every check that failed, in words (empty: the ledger held). */
  failures: string[];
}

interface ExecutionRow {
  id: string;
  job_id: string;
  pid: number;
  started: number;
  finished: number | null;
}

const sample = (ids: readonly (number | string)[]) =>
  ids.length === 0 ? "" : ` (${ids.slice(0, 8).join(", ")}${ids.length > 8 ? ", …" : ""})`;

/** Runs the audit on `schema` (see the module comment) and prints its table. */
export async function auditLedger(db: pg.Pool, schema: string, options: AuditOptions): Promise<AuditReport> {
  const s = `"${schema}"`;
  const ids = [...new Set(options.acknowledged)];
  const started = Date.now();
  const unfinishedNow = async () =>
    (
      await db.query<{ id: string }>(
        `SELECT id FROM ${s}.jobs WHERE id = ANY($1::bigint[]) AND status IN ('pending', 'claimed', 'running')`,
        [ids],
      )
    ).rows.map((row) => Number(row.id));
  let unfinished = await unfinishedNow();
  while (!options.noWait && unfinished.length > 0 && Date.now() - started < options.boundMs) {
    await sleep(250);
    unfinished = await unfinishedNow();
  }
  const waitedSeconds = (Date.now() - started) / 1000;

  const { rows: found } = await db.query<{
    id: string;
    status: string;
    result: unknown;
    errors: { error: string; failed_at: string }[] | null;
  }>(`SELECT id, status, result, errors FROM ${s}.jobs WHERE id = ANY($1::bigint[])`, [ids]);
  const byId = new Map(found.map((row) => [Number(row.id), row]));
  const lost = ids.filter((id) => !byId.has(id));
  const statusCount = (status: string) => found.filter((row) => row.status === status).length;

  const { rows: logged } = await db.query<{ job_id: string; n: number }>(
    `SELECT job_id, count(*)::int AS n FROM ${s}.outcome_log WHERE job_id = ANY($1::bigint[]) GROUP BY job_id`,
    [ids],
  );
  const writes = new Map(logged.map((row) => [Number(row.job_id), row.n]));
  const completions = new Map<number, number>();
  for (const id of ids) {
    const n = writes.get(id) ?? 0;
    completions.set(n, (completions.get(n) ?? 0) + 1);
  }
  const writtenTwice = [...writes].filter(([, n]) => n > 1).map(([id]) => id);
  const neverLogged = found
    .filter((row) => (row.status === "done" || row.status === "dead") && !writes.has(Number(row.id)))
    .map((row) => Number(row.id));

  const { rows: letters } = await db.query<{ id: string; n: number }>(
    `SELECT j.id, count(d.job_id)::int AS n FROM ${s}.jobs j LEFT JOIN ${s}.dead_letter_jobs d ON d.job_id = j.id
     WHERE j.id = ANY($1::bigint[]) AND j.status = 'dead' GROUP BY j.id`,
    [ids],
  );
  const deadLetterMismatch = letters.filter((row) => row.n !== 1).map((row) => Number(row.id));

  const { rows: executionRows } = await db.query<ExecutionRow>(
    `SELECT id, job_id, pid, extract(epoch FROM started_at)::float8 * 1000 AS started,
            extract(epoch FROM finished_at)::float8 * 1000 AS finished
     FROM ${s}.executions WHERE job_id = ANY($1::bigint[]) ORDER BY job_id, started_at, id`,
    [ids],
  );
  const perJob = new Map<number, ExecutionRow[]>();
  for (const row of executionRows) {
    const list = perJob.get(Number(row.job_id)) ?? [];
    list.push(row);
    perJob.set(Number(row.job_id), list);
  }
  const executions = new Map<number, number>();
  for (const id of ids) {
    const n = perJob.get(id)?.length ?? 0;
    executions.set(n, (executions.get(n) ?? 0) + 1);
  }

  const resultWithoutExecution: number[] = [];
  const overlaps: string[] = [];
  const badOverlaps: string[] = [];
  const now = Date.now();
  // A sandboxed handler's child that died mid-run is named in the failed attempt the worker wrote
  // after the child had exited ("handler process (pid N) exited ..."): that run ended by then.
  const childEnds = new Map<number, number>();
  for (const row of found)
    for (const entry of row.errors ?? []) {
      const pid = /handler process \(pid (\d+)\)/.exec(entry.error)?.[1];
      if (pid) childEnds.set(Number(pid), Date.parse(entry.failed_at));
    }
  const endOf = (row: ExecutionRow) =>
    row.finished ?? options.processEnds?.get(row.pid) ?? childEnds.get(row.pid) ?? now;
  for (const row of found) {
    const id = Number(row.id);
    const runs = perJob.get(id) ?? [];
    const stored = (row.result as { execution?: number } | null)?.execution;
    if (row.status === "done" && !runs.some((run) => Number(run.id) === stored))
      resultWithoutExecution.push(id);
    for (let i = 0; i < runs.length; i++)
      for (let k = i + 1; k < runs.length; k++) {
        const [earlier, later] = [runs[i] as ExecutionRow, runs[k] as ExecutionRow];
        if (later.started >= endOf(earlier)) continue;
        const pair = `${id}:${earlier.id}/${later.id}`;
        overlaps.push(pair);
        if (Number(earlier.id) === stored) badOverlaps.push(pair);
      }
  }

  const { rows: locks } = await db.query<{ n: number }>(
    `SELECT count(*)::int AS n FROM pg_locks l
     WHERE l.locktype = 'advisory' AND l.objsubid = 2 AND l.granted
       AND l.database = (SELECT oid FROM pg_database WHERE datname = current_database())
       AND l.classid = ($1::int4::bigint & 4294967295)::oid`,
    [lockClassFor(schema)],
  );
  const { rows: held } = await db.query<{ n: number }>(
    `SELECT count(*)::int AS n FROM ${s}.jobs WHERE status IN ('claimed', 'running')`,
  );
  const locksLeft = (locks[0]?.n ?? 0) - (held[0]?.n ?? 0);

  const failures: string[] = [];
  if (lost.length > 0) failures.push(`${lost.length} acknowledged jobs lost${sample(lost)}`);
  if (!options.noWait && unfinished.length > 0)
    failures.push(`${unfinished.length} jobs not final after ${options.boundMs} ms${sample(unfinished)}`);
  if (writtenTwice.length > 0)
    failures.push(`${writtenTwice.length} outcomes written twice${sample(writtenTwice)}`);
  if (neverLogged.length > 0)
    failures.push(`${neverLogged.length} final jobs with no outcome write${sample(neverLogged)}`);
  if (resultWithoutExecution.length > 0)
    failures.push(
      `${resultWithoutExecution.length} results naming no execution${sample(resultWithoutExecution)}`,
    );
  if (deadLetterMismatch.length > 0)
    failures.push(
      `${deadLetterMismatch.length} dead jobs without one dead letter${sample(deadLetterMismatch)}`,
    );
  if (!options.allowOverlap && overlaps.length > 0)
    failures.push(`${overlaps.length} overlapping executions where none is allowed${sample(overlaps)}`);
  if (badOverlaps.length > 0)
    failures.push(
      `${badOverlaps.length} overlaps whose earlier execution's result was stored${sample(badOverlaps)}`,
    );
  if (locksLeft > 0) failures.push(`${locksLeft} advisory locks held beyond the held jobs`);

  const report: AuditReport = {
    acknowledged: ids.length,
    lost,
    done: statusCount("done"),
    dead: statusCount("dead"),
    cancelled: statusCount("cancelled"),
    unfinished,
    writtenTwice,
    resultWithoutExecution,
    deadLetterMismatch,
    completions,
    executions,
    overlaps,
    badOverlaps,
    locksLeft,
    waitedSeconds,
    failures,
  };
  printAudit(report, options.title ?? "ledger audit");
  return report;
}

/** "1×4990 2×10": executions per job → jobs, ascending. */
export function distribution(executions: ReadonlyMap<number, number>): string {
  return [...executions]
    .sort(([a], [b]) => a - b)
    .map(([n, jobs]) => `${n}×${jobs}`)
    .join(" ");
}

function printAudit(report: AuditReport, title: string): void {
  const pending = report.unfinished.length;
  const rows: [string, string][] = [
    ["acknowledged", String(report.acknowledged)],
    [
      "= done + dead + cancelled + unfinished",
      `${report.done} + ${report.dead} + ${report.cancelled} + ${pending}`,
    ],
    ["lost", String(report.lost.length)],
    ["outcome writes per job (n×jobs)", distribution(report.completions)],
    ["outcomes written twice", String(report.writtenTwice.length)],
    ["results naming no execution", String(report.resultWithoutExecution.length)],
    ["dead-letter mismatches", String(report.deadLetterMismatch.length)],
    ["executions per job (n×jobs)", distribution(report.executions)],
    [
      "overlapping executions (allowed / not)",
      `${report.overlaps.length - report.badOverlaps.length} / ${report.badOverlaps.length}`,
    ],
    ["advisory locks left", String(report.locksLeft)],
    ["waited for final states", `${report.waitedSeconds.toFixed(1)} s`],
    ["verdict", report.failures.length === 0 ? "the ledger held" : report.failures.join("; ")],
  ];
  const width = Math.max(...rows.map(([key]) => key.length));
  console.log(`# ${title}`);
  for (const [key, value] of rows) console.log(`#   ${key.padEnd(width)}  ${value}`);
}
