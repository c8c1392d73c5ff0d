/**
 * BullMQ 6 (node_modules/bullmq). `npm view bullmq` 6.x lists `pg` as a peer dependency and the
 * package ships a PostgreSQL backend (`createPostgresBackend`, docs.bullmq.io/guide/postgresql),
 * so two rows:
 *
 * - `bullmq`: the PostgreSQL backend on the same database as every other row, own schema, migrated
 *   explicitly with `runMigrations` as its guide says; the peer counted in "best peer".
 * - `bullmq-redis`: the Redis backend on this machine's Redis (127.0.0.1:6379), key prefix unique
 *   to the run; a reference row, not a PostgreSQL peer.
 *
 * Both: `Worker` with concurrency 100 and a per-job processor; bulk enqueue `addBulk`, single `add`.
 * Completed jobs are kept (BullMQ's default, like taskqueue's done rows).
 */
import {
  createPostgresBackend,
  type PostgresPoolConfig,
  Queue,
  type QueueOptions,
  runMigrations,
  Worker,
  withBackend,
} from "bullmq";
import pg from "pg";
import { QueueAdapter, type StopWorkers } from "../base.js";
import { quoteIdent } from "../harness.js";
import type { BenchContext, BenchPayload, JobSink } from "../types.js";

const QUEUE = "bench";
const CONCURRENCY = 100;
/** Query pool of each PostgreSQL backend (one for the Queue, one for the Worker). */
const PG_POOL_MAX = 10;

/** The operations both backends offer, so that the adapter code is shared. */
interface BullQueue {
  addBulk(jobs: { name: string; data: BenchPayload }[]): Promise<unknown>;
  add(name: string, data: BenchPayload): Promise<unknown>;
  obliterate(opts?: { force?: boolean }): Promise<void>;
  close(): Promise<void>;
}
interface BullWorker {
  close(): Promise<void>;
  waitUntilReady(): Promise<unknown>;
}

export class BullMqAdapter extends QueueAdapter {
  readonly system;
  readonly settings;
  readonly backend;
  readonly cpuUnsupported?: string;
  private readonly schema: string;
  private readonly prefix: string;
  private queue: BullQueue | null = null;

  constructor(
    ctx: BenchContext,
    private readonly redis: boolean,
  ) {
    super(ctx);
    this.system = redis ? ("bullmq-redis" as const) : ("bullmq" as const);
    this.backend = redis ? `Redis ${ctx.redisUrl}` : "PostgreSQL";
    if (redis) this.cpuUnsupported = "n/a — the Redis server's CPU time is not counted";
    this.settings = redis
      ? `Redis backend, Worker concurrency 100, key prefix per run`
      : `PostgreSQL backend, Worker concurrency 100; pool ${PG_POOL_MAX} per Queue/Worker`;
    this.schema = `bench_cmp_${ctx.runId}_bullmq`;
    this.prefix = `bench_cmp_${ctx.runId}`;
    if (redis) this.unsupported.claim1m = "n/a — Redis backend (no table)";
  }

  private get q(): BullQueue {
    if (!this.queue) throw new Error("setup() has not run");
    return this.queue;
  }

  private pgConnection(): PostgresPoolConfig {
    return {
      connectionString: this.ctx.databaseUrl,
      schema: this.schema,
      max: PG_POOL_MAX,
      application_name: "bench bullmq",
    };
  }

  private redisOptions(): QueueOptions {
    const url = new URL(this.ctx.redisUrl);
    return {
      connection: { host: url.hostname, port: Number(url.port || 6379), maxRetriesPerRequest: null },
      prefix: this.prefix,
    };
  }

  async setup(): Promise<void> {
    if (this.redis) {
      this.queue = new Queue(QUEUE, this.redisOptions()) as unknown as BullQueue;
    } else {
      const client = new pg.Client({ connectionString: this.ctx.databaseUrl });
      await client.connect();
      try {
        await runMigrations(client, this.schema);
      } finally {
        await client.end();
      }
      const Pg = withBackend(createPostgresBackend);
      this.queue = new Pg.Queue(QUEUE, { connection: this.pgConnection() }) as unknown as BullQueue;
    }
    await this.q.obliterate({ force: true });
  }

  protected insertBatch(payloads: BenchPayload[]): Promise<unknown> {
    return this.q.addBulk(payloads.map((data) => ({ name: "noop", data })));
  }

  protected insertOne(payload: BenchPayload): Promise<unknown> {
    return this.q.add("noop", payload);
  }

  protected async startWorkers(sink: JobSink): Promise<StopWorkers> {
    const processor = async (job: { data: BenchPayload }) => {
      sink(job.data);
    };
    let worker: BullWorker;
    if (this.redis) {
      worker = new Worker(QUEUE, processor, { ...this.redisOptions(), concurrency: CONCURRENCY });
    } else {
      const Pg = withBackend(createPostgresBackend);
      worker = new Pg.Worker(QUEUE, processor, { connection: this.pgConnection(), concurrency: CONCURRENCY });
    }
    await worker.waitUntilReady();
    return () => worker.close();
  }

  async seedFinished(count: number): Promise<void> {
    if (this.redis) throw new Error(this.unsupported.claim1m);
    const s = quoteIdent(this.schema);
    await this.ctx.admin.query(
      `INSERT INTO ${s}.job (queue, id, seq, name, state, data, opts, attempts_made, attempts_started,
                             return_value, added_at_ms, processed_at_ms, finished_at_ms)
       SELECT $2, 'seed-' || g, nextval('${s}.job_seq'), 'noop', 'completed', '{"i":-1}', '{}', 1, 1,
              'null', ms, ms, ms
       FROM generate_series(1, $1::int) AS g,
            (SELECT (extract(epoch FROM now() - interval '1 hour') * 1000)::bigint AS ms) AS x`,
      [count, QUEUE],
    );
    await this.ctx.admin.vacuumAnalyze(`${s}.job`);
  }

  /** PostgreSQL: TRUNCATE (obliterate deletes in chunks: slow after (e)'s 1M rows). Redis: obliterate. */
  async clear(): Promise<void> {
    if (this.redis) await this.q.obliterate({ force: true });
    else await this.ctx.admin.query(`TRUNCATE ${quoteIdent(this.schema)}.job CASCADE`);
  }

  protected async close(): Promise<void> {
    if (this.queue) {
      if (this.redis) await this.queue.obliterate({ force: true }).catch(() => undefined);
      await this.queue.close();
      this.queue = null;
    }
    if (!this.redis) await this.ctx.admin.dropSchema(this.schema);
  }
}
