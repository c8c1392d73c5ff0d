/**
 * Which kind of connection pooler, if any, sits between taskqueue and PostgreSQL. Behind a
 * transaction-mode pooler (PgBouncer `pool_mode=transaction`) the API and enqueues work with
 * unnamed statements, and a worker must refuse to start (see {@link PoolingModeError}).
 *
 * The probe, on two connections c1 and c2 (a worker's first lock session's two, or two of its
 * own): the server pid of c1 (A), of c2 (B), of
 * c1 again (A'). On a session of its own, as PostgreSQL or a session-mode pooler gives, A' = A and
 * B ≠ A, always. A transaction pooler returns c1's server session to its pool after each
 * statement and, last in first out (PgBouncer's default), gives it to c2: B = A; or c1's next
 * statement runs elsewhere: A' ≠ A. Either inequality settles it; under traffic of other clients
 * a round can look like sessions, so up to {@link PROBE_ROUNDS} rounds run. A statement-mode pooler
 * also refuses `BEGIN`, which names the mode.
 */
import type pg from "pg";
import { closeSession, connectSession, destroySession, withDeadline } from "../db/pool.js";
import { DatabaseUnavailableError, PoolingModeError } from "../errors.js";
import { probeBackendPid, probeBegin, probeCommit } from "./sql/pooling.js";

/** What sits between taskqueue and PostgreSQL: a session of its own, or a transaction or statement pooler. */
export type PoolingMode = "session" | "transaction" | "statement";

/** The probe's finding: the mode and what showed it (the pids seen). */
export interface PoolingProbe {
  mode: PoolingMode;
  evidence: string;
}

/** Rounds of the probe before it concludes that every connection has a session of its own. */
export const PROBE_ROUNDS = 3;

/** Options of {@link probePooling}. */
export interface ProbeOptions {
  connectionString: string;
  /** Bound on each connection's opening, seconds; the whole probe gets twice it plus 5 s. Default 5. */
  connectTimeoutSeconds?: number;
}

/** One connection the probe runs on: a statement's text in, its rows out (pg's `query(text)`). */
export type ProbeQuery = (sql: string) => Promise<{ rows: unknown[] }>;

async function pid(query: ProbeQuery): Promise<number> {
  const { rows } = await query(probeBackendPid);
  return Number((rows[0] as { pid?: unknown } | undefined)?.pid);
}

/**
 * Probes the pooling mode (see the top of this file) on two connections the caller holds, both
 * idle and in no transaction. Each statement is bounded as the caller's connections bound it.
 * @throws a statement's error.
 */
export async function probeConnections(c1: ProbeQuery, c2: ProbeQuery): Promise<PoolingProbe> {
  const first = await pid(c1);
  for (let round = 0; round < PROBE_ROUNDS; round++) {
    const a = await pid(c1);
    const b = await pid(c2);
    const again = await pid(c1);
    if (b === a || again !== a || a !== first) {
      const evidence =
        b === a
          ? `two client connections ran on one server session, pid ${a}`
          : `one client connection ran on server sessions ${[...new Set([first, a, again])].join(", ")}`;
      return { mode: await transactionOrStatement(c2), evidence };
    }
  }
  return { mode: "session", evidence: `each connection kept its server pid over ${PROBE_ROUNDS} rounds` };
}

/**
 * Probes the pooling mode behind `connectionString` (see the top of this file) on two connections
 * it opens and closes (the closes finish after the answer, within a second). Bounded:
 * connectTimeoutSeconds × 2 + 5 s in all.
 * @throws the connection error, or a {@link DatabaseUnavailableError} past the bound.
 */
export async function probePooling(options: ProbeOptions): Promise<PoolingProbe> {
  const connectTimeoutSeconds = options.connectTimeoutSeconds ?? 5;
  const session = { ...options, applicationName: "taskqueue-pooling-probe", connectTimeoutSeconds };
  const opened: pg.Client[] = [];
  const run = async (): Promise<PoolingProbe> => {
    const connects = await Promise.allSettled([connectSession(session), connectSession(session)]);
    for (const c of connects) if (c.status === "fulfilled") opened.push(c.value);
    const refused = connects.find((c): c is PromiseRejectedResult => c.status === "rejected");
    if (refused) throw refused.reason;
    const [c1, c2] = opened as [pg.Client, pg.Client];
    return probeConnections(
      (sql) => c1.query(sql),
      (sql) => c2.query(sql),
    );
  };
  const boundMs = (connectTimeoutSeconds * 2 + 5) * 1000;
  try {
    return await withDeadline(run(), boundMs, () => {
      for (const client of opened) destroySession(client);
      return new DatabaseUnavailableError(`the pooling probe did not finish within ${boundMs / 1000} s`);
    });
  } finally {
    // The answer does not wait for the sessions' ends (a server round trip each).
    for (const client of opened) void closeSession(client);
  }
}

/** A statement-mode pooler refuses a transaction block; a transaction-mode one allows it. */
async function transactionOrStatement(query: ProbeQuery): Promise<PoolingMode> {
  try {
    await query(probeBegin);
    await query(probeCommit);
    return "transaction";
  } catch (error) {
    if (/statement mode/i.test(String((error as Error).message))) return "statement";
    throw error;
  }
}

/** The options {@link resolvePooling} reads (a `ResolvedConfig` has them). */
export interface PoolingConfig {
  databaseUrl: string;
  databasePooling: "auto" | "session" | "transaction";
  connectTimeoutSeconds: number;
}

/**
 * The pooling mode `config` declares (`databasePooling` `"session"` or `"transaction"`), or, for
 * `"auto"`, the one the probe finds: on `connections` if given ({@link probeConnections}), else on
 * two connections of its own ({@link probePooling}).
 * @throws as the probe.
 */
export async function resolvePooling(
  config: PoolingConfig,
  connections?: readonly [ProbeQuery, ProbeQuery],
): Promise<PoolingProbe> {
  if (config.databasePooling !== "auto")
    return { mode: config.databasePooling, evidence: `DATABASE_POOLING=${config.databasePooling}` };
  if (connections) return probeConnections(connections[0], connections[1]);
  return probePooling({
    connectionString: config.databaseUrl,
    connectTimeoutSeconds: config.connectTimeoutSeconds,
  });
}

/** @throws {PoolingModeError} unless `probe` found a session of its own (what a worker needs). */
export function assertSessionPooling(probe: PoolingProbe): void {
  if (probe.mode !== "session") throw new PoolingModeError(probe.mode, probe.evidence);
}
