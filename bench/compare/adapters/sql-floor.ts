/**
 * sql-floor: the least SQL a job needs on taskqueue's own schema (migrated with our migrate()), with
 * taskqueue's own statements imported from dist/src/queue/sql (never copied; completeJobs extends
 * writeDone in ./sql-floor-complete.ts): drain is one plain
 * `pg` client looping { claimJobs LIMIT 1000 (SKIP LOCKED + pg_try_advisory_lock), completeJobs
 * (done + unlock) } until every job is done, under the planner settings of a lock session
 * (`lockSessionSettings`). Pickup: the same client LISTENs on the schema's channel and runs that
 * loop on each notification. Enqueue: enqueueJobs / enqueueJob on a 10-connection pool
 * (taskqueue's pool size), without the library's validation and row mapping.
 */
import pg from "pg";
import { lockClassFor } from "../../../src/queue/lock-class.js";
import { migrate } from "../../../src/queue/migrate.js";
import { claimJobs, lockSessionSettings } from "../../../src/queue/sql/claim.js";
import { enqueueJob, enqueueJobs } from "../../../src/queue/sql/enqueue.js";
import { jsonTextArray, numberArray, tidArray } from "../../../src/queue/sql/params.js";
import { QueueAdapter, type StopWorkers } from "../base.js";
import { PhaseAborted, quoteIdent, sleep } from "../harness.js";
import type { BenchContext, BenchPayload, JobSink } from "../types.js";
import { completeJobs } from "./sql-floor-complete.js";
import { seedDoneSql, truncateSql } from "./taskqueue.js";

const CLAIM_BATCH = 1000;
const WORKER_ID = "sql-floor";
/** Poll when no notification arrives (pickup only; LISTEN is the wake-up). */
const POLL_MS = 1000;

export class SqlFloorAdapter extends QueueAdapter {
  readonly system = "sql-floor" as const;
  readonly settings = "1 pg client: claimJobs ×1000 + completeJobs per batch; LISTEN for pickup";
  readonly backend = "PostgreSQL";
  private readonly schema: string;
  private readonly channel: string;
  private readonly lockClass: number;
  private pool: pg.Pool | null = null;
  private client: pg.Client | null = null;

  constructor(ctx: BenchContext) {
    super(ctx);
    this.schema = `bench_cmp_${ctx.runId}_floor`;
    this.channel = `${this.schema}_jobs`;
    this.lockClass = lockClassFor(this.schema);
  }

  private get db(): { pool: pg.Pool; client: pg.Client } {
    if (!this.pool || !this.client) throw new Error("setup() has not run");
    return { pool: this.pool, client: this.client };
  }

  async setup(): Promise<void> {
    this.pool = new pg.Pool({
      connectionString: this.ctx.databaseUrl,
      max: 10,
      application_name: "bench sql-floor",
    });
    this.pool.on("error", () => undefined);
    await migrate(this.pool, { schema: this.schema, notifyChannel: this.channel });
    this.client = new pg.Client({
      connectionString: this.ctx.databaseUrl,
      application_name: "bench sql-floor",
    });
    this.client.on("error", () => undefined);
    await this.client.connect();
    // The planner settings every taskqueue lock session runs its statements under.
    await this.client.query(lockSessionSettings);
  }

  protected insertBatch(payloads: BenchPayload[]): Promise<unknown> {
    const n = payloads.length;
    return this.db.pool.query({
      ...enqueueJobs(this.schema),
      values: [
        new Array(n).fill("noop"),
        jsonTextArray(payloads.map((p) => JSON.stringify(p))),
        numberArray(new Array(n).fill(5)),
        numberArray(new Array(n).fill(3)),
        new Array(n).fill(null),
      ],
    });
  }

  protected insertOne(payload: BenchPayload): Promise<unknown> {
    return this.db.pool.query({
      ...enqueueJob(this.schema),
      values: ["noop", JSON.stringify(payload), 5, 3, null],
    });
  }

  /** One claim + complete round; returns how many jobs it finished. */
  private async round(sink: JobSink): Promise<number> {
    const { client } = this.db;
    const { rows } = await client.query<{ id: number; attempt: number; payload: BenchPayload; ctid: string }>(
      {
        ...claimJobs(this.schema),
        values: [["noop"], CLAIM_BATCH, this.lockClass, WORKER_ID, "{}"],
      },
    );
    if (rows.length === 0) return 0;
    for (const row of rows) sink(row.payload);
    await client.query({
      ...completeJobs(this.schema),
      values: [
        numberArray(rows.map((r) => r.id)),
        numberArray(rows.map((r) => r.attempt)),
        jsonTextArray(new Array(rows.length).fill("null")),
        numberArray(new Array(rows.length).fill(0)),
        WORKER_ID,
        tidArray(rows.map((r) => r.ctid)),
        this.lockClass,
      ],
    });
    return rows.length;
  }

  /** The floor's drain: claim/complete rounds until `count` jobs are done; no worker machinery. */
  override async drain(count: number, signal: AbortSignal, drained?: () => Promise<void>): Promise<number> {
    const started = performance.now();
    let done = 0;
    let lastAt = started;
    while (done < count) {
      if (signal.aborted) throw new PhaseAborted();
      const n = await this.round(() => undefined);
      if (n === 0) {
        await sleep(5, signal); // not expected: every job was enqueued before the start
        continue;
      }
      done += n;
      lastAt = performance.now();
    }
    await drained?.();
    return lastAt - started;
  }

  protected async startWorkers(sink: JobSink): Promise<StopWorkers> {
    const { client } = this.db;
    let running = true;
    let wake: (() => void) | null = null;
    let notified = false; // a notification that arrived while a round ran
    const onNotification = () => {
      notified = true;
      wake?.();
    };
    client.on("notification", onNotification);
    await client.query(`LISTEN ${quoteIdent(this.channel)}`);
    const loop = (async () => {
      while (running) {
        notified = false;
        if ((await this.round(sink)) > 0 || notified) continue;
        await new Promise<void>((resolve) => {
          const timer = setTimeout(resolve, POLL_MS);
          wake = () => {
            clearTimeout(timer);
            resolve();
          };
        });
        wake = null;
      }
    })();
    return async () => {
      running = false;
      wake?.();
      await loop;
      client.off("notification", onNotification);
      await client.query(`UNLISTEN ${quoteIdent(this.channel)}`);
    };
  }

  async seedFinished(count: number): Promise<void> {
    await this.db.pool.query(seedDoneSql(this.schema), [count]);
    await this.db.pool.query(`VACUUM (ANALYZE) ${quoteIdent(this.schema)}.jobs`);
  }

  async clear(): Promise<void> {
    await this.db.pool.query(truncateSql(this.schema));
  }

  protected async close(): Promise<void> {
    await this.client?.end().catch(() => undefined);
    this.client = null;
    await this.pool?.end().catch(() => undefined);
    this.pool = null;
    await this.ctx.admin.dropSchema(this.schema);
  }
}
