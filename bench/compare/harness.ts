/**
 * Helpers shared by the runner and the adapters: bounded waiting, counting handler calls, driving
 * the pickup probe, statistics, and the admin connection that creates and drops schemas.
 */
import pg from "pg";
import type { BenchPayload, PickupResult } from "./types.js";

/** Jobs per bulk call (the issue's batch size). */
export const BULK_BATCH = 1000;

/** Thrown into a phase whose signal fired. */
export class PhaseAborted extends Error {
  constructor(reason = "phase aborted") {
    super(reason);
    this.name = "PhaseAborted";
  }
}

/** Resolves after `ms`, or rejects with {@link PhaseAborted} as soon as `signal` fires. */
export function sleep(ms: number, signal?: AbortSignal): Promise<void> {
  return new Promise((resolve, reject) => {
    if (signal?.aborted) return reject(new PhaseAborted());
    const timer = setTimeout(() => {
      signal?.removeEventListener("abort", onAbort);
      resolve();
    }, ms);
    const onAbort = () => {
      clearTimeout(timer);
      reject(new PhaseAborted());
    };
    signal?.addEventListener("abort", onAbort, { once: true });
  });
}

/** Rejects with {@link PhaseAborted} when `signal` fires before `promise` settles. */
export function untilAborted<T>(promise: Promise<T>, signal: AbortSignal): Promise<T> {
  if (signal.aborted) return Promise.reject(new PhaseAborted());
  return new Promise<T>((resolve, reject) => {
    const onAbort = () => reject(new PhaseAborted());
    signal.addEventListener("abort", onAbort, { once: true });
    promise.then(
      (value) => {
        signal.removeEventListener("abort", onAbort);
        resolve(value);
      },
      (error: unknown) => {
        signal.removeEventListener("abort", onAbort);
        reject(error);
      },
    );
  });
}

/** `promise`, or a rejection after `ms` (for cleanup steps that must not hang the run). */
export async function within<T>(promise: Promise<T>, ms: number, what: string): Promise<T> {
  let timer: NodeJS.Timeout | undefined;
  try {
    return await Promise.race([
      promise,
      new Promise<never>((_, reject) => {
        timer = setTimeout(() => reject(new Error(`${what}: no answer within ${ms / 1000} s`)), ms);
      }),
    ]);
  } finally {
    clearTimeout(timer);
  }
}

/** Runs `fn(i)` for i in [0, count) with at most `inFlight` calls pending, until done or aborted. */
export async function runConcurrently(
  count: number,
  inFlight: number,
  signal: AbortSignal,
  fn: (i: number) => Promise<unknown>,
): Promise<void> {
  let next = 0;
  const lane = async () => {
    while (next < count) {
      if (signal.aborted) throw new PhaseAborted();
      const i = next++;
      await fn(i);
    }
  };
  await Promise.all(Array.from({ length: Math.min(inFlight, count) }, lane));
}

/** Runs `fn(start, size)` over [0, count) in consecutive batches of `batchSize`, one at a time. */
export async function inBatches(
  count: number,
  batchSize: number,
  signal: AbortSignal,
  fn: (start: number, size: number) => Promise<unknown>,
): Promise<void> {
  for (let start = 0; start < count; start += batchSize) {
    if (signal.aborted) throw new PhaseAborted();
    await fn(start, Math.min(batchSize, count - start));
  }
}

/** Payloads of `size` drain jobs (i = -1: not a pickup sample). */
export function drainPayloads(size: number): BenchPayload[] {
  return Array.from({ length: size }, () => ({ i: -1 }));
}

/**
 * Counts handler calls up to a target and remembers when the last one happened (performance.now()).
 * `done` resolves at the target.
 */
export class Countdown {
  private count = 0;
  lastAt = 0;
  readonly done: Promise<void>;
  private resolve!: () => void;

  constructor(readonly target: number) {
    this.done = new Promise((resolve) => {
      this.resolve = resolve;
    });
    if (target <= 0) this.resolve();
  }

  /** One (or `n`) handler calls. */
  hit(n = 1): void {
    this.count += n;
    this.lastAt = performance.now();
    if (this.count >= this.target) this.resolve();
  }

  get seen(): number {
    return this.count;
  }
}

/**
 * The pickup probe: handler start times by sample index. `record` is the handler's sink; jobs that
 * are not samples (i < 0) and repeated deliveries are ignored.
 */
export class PickupProbe {
  private readonly sentAt: number[];
  private readonly startedAt: number[];
  private received = 0;
  private waiter: (() => void) | null = null;
  private expected = 0;

  constructor(readonly samples: number) {
    this.sentAt = new Array<number>(samples).fill(Number.NaN);
    this.startedAt = new Array<number>(samples).fill(Number.NaN);
  }

  readonly record = (payload: BenchPayload): void => {
    const now = performance.now();
    const i = payload?.i;
    if (typeof i !== "number" || i < 0 || i >= this.samples || !Number.isNaN(this.startedAt[i] as number))
      return;
    this.startedAt[i] = now;
    this.received++;
    if (this.received >= this.expected && this.waiter) this.waiter();
  };

  /**
   * Sends sample i every `intervalMs` on a fixed schedule (not waiting for earlier enqueues), then
   * waits until every sent sample was picked up, or `graceMs` after the last send.
   */
  async drive(
    intervalMs: number,
    enqueue: (payload: BenchPayload) => Promise<unknown>,
    signal: AbortSignal,
    graceMs = 10_000,
  ): Promise<PickupResult> {
    const start = performance.now();
    const pending: Promise<unknown>[] = [];
    let enqueueError: unknown = null;
    for (let i = 0; i < this.samples; i++) {
      const due = start + i * intervalMs;
      const wait = due - performance.now();
      if (wait > 0) await sleep(wait, signal);
      if (signal.aborted) throw new PhaseAborted();
      this.sentAt[i] = performance.now();
      pending.push(
        enqueue({ i }).catch((error: unknown) => {
          enqueueError ??= error;
        }),
      );
    }
    await untilAborted(Promise.all(pending), signal);
    if (enqueueError) throw enqueueError;
    this.expected = this.samples;
    if (this.received < this.samples) {
      const all = new Promise<void>((resolve) => {
        this.waiter = resolve;
      });
      const grace = new AbortController();
      try {
        await untilAborted(Promise.race([all, sleep(graceMs, grace.signal).catch(() => undefined)]), signal);
      } finally {
        grace.abort(); // clears the grace timer
      }
    }
    const latencies: number[] = [];
    for (let i = 0; i < this.samples; i++) {
      const started = this.startedAt[i] as number;
      if (!Number.isNaN(started)) latencies.push(started - (this.sentAt[i] as number));
    }
    return { latencies, missing: this.samples - latencies.length };
  }
}

/**
 * Warm-up before a pickup measurement: `count` jobs enqueued one after another, each waited for
 * (up to `timeoutMs`), so connections, prepared statements and JIT are warm. Not measured.
 */
export async function warmUp(
  count: number,
  enqueue: (payload: BenchPayload) => Promise<unknown>,
  picked: () => number,
  signal: AbortSignal,
  timeoutMs = 5000,
): Promise<void> {
  for (let k = 0; k < count; k++) {
    const before = picked();
    await enqueue({ i: -1 });
    const deadline = performance.now() + timeoutMs;
    while (picked() === before && performance.now() < deadline) await sleep(5, signal);
  }
}

/** The q-quantile (0..1) by linear interpolation; null for no data. */
export function quantile(values: readonly number[], q: number): number | null {
  if (values.length === 0) return null;
  const sorted = [...values].sort((a, b) => a - b);
  const pos = (sorted.length - 1) * q;
  const lo = Math.floor(pos);
  const hi = Math.ceil(pos);
  const a = sorted[lo] as number;
  const b = sorted[hi] as number;
  return a + (b - a) * (pos - lo);
}

export const median = (values: readonly number[]): number | null => quantile(values, 0.5);

/** Short form of an error for the notes. */
export function describe(error: unknown): string {
  if (error instanceof Error) return `${error.name === "Error" ? "" : `${error.name}: `}${error.message}`;
  return String(error);
}

/**
 * The admin connection: creates and drops the schemas of the run, seeds rows, reads versions.
 * Statements get a 5-minute statement timeout and a 30 s lock timeout, so cleanup cannot hang.
 */
export class Admin {
  private readonly client: pg.Client;

  constructor(databaseUrl: string) {
    this.client = new pg.Client({ connectionString: databaseUrl, application_name: "bench-compare admin" });
    this.client.on("error", () => undefined);
  }

  async connect(): Promise<void> {
    await this.client.connect();
    await this.client.query("SET statement_timeout = '300s'; SET lock_timeout = '30s'");
  }

  query<T extends pg.QueryResultRow = pg.QueryResultRow>(text: string, values: unknown[] = []) {
    return this.client.query<T>(text, values);
  }

  async dropSchema(schema: string): Promise<void> {
    await this.client.query(`DROP SCHEMA IF EXISTS ${quoteIdent(schema)} CASCADE`);
  }

  /**
   * VACUUM (ANALYZE) of every table in the schemas starting with `prefix` (partitioned parents
   * recurse into their partitions): what autovacuum would have done by then on a default server.
   * The shared server this runs on may have autovacuum off; without this, dead tuples and missing
   * statistics left by earlier phases would weigh on later ones. Returns the number of tables.
   */
  async vacuumSchemas(prefix: string): Promise<number> {
    const { rows } = await this.client.query<{ name: string }>(
      `SELECT format('%I.%I', n.nspname, c.relname) AS name
       FROM pg_class c JOIN pg_namespace n ON n.oid = c.relnamespace
       WHERE n.nspname LIKE $1 AND c.relkind IN ('r', 'p') AND NOT c.relispartition`,
      [`${prefix.replaceAll("_", "\\_")}%`],
    );
    for (const { name } of rows) await this.client.query(`VACUUM (ANALYZE) ${name}`);
    return rows.length;
  }

  /** Plain VACUUM ANALYZE of a table (steady state: autovacuum would have done it). */
  async vacuumAnalyze(table: string): Promise<void> {
    await this.client.query(`VACUUM (ANALYZE) ${table}`);
  }

  async end(): Promise<void> {
    await this.client.end().catch(() => undefined);
  }
}

export function quoteIdent(name: string): string {
  return `"${name.replaceAll('"', '""')}"`;
}
