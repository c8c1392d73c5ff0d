/**
 * The system under test of `npm run bench:math` and `npm run bench:load`: a PostgreSQL
 * (DATABASE_URL, or an embedded one with throw-away data), a fresh schema and NOTIFY channel per run
 * (dropped at the end), the HTTP API in this process on a free port, and worker processes on demand.
 * Built from the same {@link startService} the `taskqueue start`/`api` commands run.
 */
import { randomBytes } from "node:crypto";
import { availableParallelism, cpus, totalmem } from "node:os";
import { type RunningService, startService } from "../../src/cli/service.js";
import { configFromEnv } from "../../src/config.js";
import { type EmbeddedDatabase, startEmbeddedPostgres } from "../../src/db/embedded.js";
import type { TaskQueue } from "../../src/index.js";
import { dropBenchSchema, postgresServerVersion } from "./reads.js";
import { startWorkerProcesses, type WorkerProcesses, type WorkerProcessOptions } from "./worker-processes.js";

/** Where the embedded server of the benchmarks keeps its (deleted at stop) data. */
export const BENCH_EMBEDDED_DATA_DIR = ".taskqueue/bench-pg";

/** The machine a benchmark ran on, for its JSON record. */
export interface MachineInfo {
  node: string;
  platform: string;
  arch: string;
  cpuCount: number;
  cpuModel: string;
  totalMemoryMiB: number;
  postgresVersion: string;
  /** True when the benchmark started its own embedded PostgreSQL (no DATABASE_URL). */
  embeddedPostgres: boolean;
}

/** A running system under test. */
export interface BenchSystem {
  databaseUrl: string;
  schema: string;
  notifyChannel: string;
  /** Library handle on the benchmark's schema (its pool also serves the in-process API). */
  queue: TaskQueue;
  /** Base URL of the API, e.g. `http://127.0.0.1:41234`. */
  apiUrl: string;
  machine: MachineInfo;
  /** Starts worker processes on this schema; {@link BenchSystem.close} stops them. */
  startWorkers(
    options: Pick<WorkerProcessOptions, "count" | "concurrency" | "prefetch" | "env">,
  ): Promise<WorkerProcesses>;
  /**
   * Closes the API, stops the workers (gracefully), drops the schema, closes the pool and stops
   * the embedded server, in that order. Idempotent; never throws (problems go to stderr).
   */
  close(): Promise<void>;
}

/**
 * Starts the system under test for benchmark `name` (a schema `bench_<name>_<random>` and a
 * channel `<schema>_jobs`). Uses DATABASE_URL when set, else starts an embedded PostgreSQL in
 * {@link BENCH_EMBEDDED_DATA_DIR}, deleted again by `close()`.
 * @throws {ConfigError} on a bad environment variable; the database's error if it cannot start.
 */
export async function startBenchSystem(name: string): Promise<BenchSystem> {
  const schema = `bench_${name}_${randomBytes(4).toString("hex")}`;
  const notifyChannel = `${schema}_jobs`;
  const envConfig = configFromEnv(process.env, {
    schema,
    notifyChannel,
    host: "127.0.0.1",
    port: 0,
    logLevel: "warn",
  });
  let embedded: EmbeddedDatabase | null = null;
  let databaseUrl = envConfig.databaseUrl;
  if (!databaseUrl) {
    process.stderr.write("no DATABASE_URL: starting an embedded PostgreSQL with throw-away data\n");
    embedded = await startEmbeddedPostgres({ dataDir: BENCH_EMBEDDED_DATA_DIR, ephemeral: true });
    databaseUrl = embedded.connectionString;
  }
  let service: RunningService;
  try {
    service = await startService({
      config: { ...envConfig, databaseUrl },
      api: true,
      worker: false,
      allowEmbedded: false,
      migrate: true,
    });
  } catch (error) {
    await embedded?.stop();
    throw error;
  }
  const queue = service.queue;
  const workerSets: WorkerProcesses[] = [];
  const killWorkers = () => {
    for (const w of workerSets) w.killNow();
  };
  process.on("exit", killWorkers);

  let closing: Promise<void> | null = null;
  const close = () => {
    closing ??= (async () => {
      const report = (what: string) => (error: unknown) =>
        process.stderr.write(`bench: ${what} failed: ${error instanceof Error ? error.message : error}\n`);
      // The API first, so that no request is still writing when the schema goes.
      await service.app?.close().catch(report("closing the API"));
      await Promise.all(workerSets.map((w) => w.stop())).catch(report("stopping the workers"));
      process.off("exit", killWorkers);
      await dropBenchSchema(queue.pool, schema).catch(report(`dropping schema ${schema}`));
      await service.stop().catch(report("closing the pool"));
      await embedded?.stop().catch(report("stopping the embedded PostgreSQL"));
    })();
    return closing;
  };

  try {
    const cpuList = cpus();
    const machine: MachineInfo = {
      node: process.version,
      platform: process.platform,
      arch: process.arch,
      cpuCount: availableParallelism(),
      cpuModel: cpuList[0]?.model.trim() ?? "unknown",
      totalMemoryMiB: Math.round(totalmem() / 1024 / 1024),
      postgresVersion: await postgresServerVersion(queue.pool),
      embeddedPostgres: embedded !== null,
    };
    return {
      databaseUrl,
      schema,
      notifyChannel,
      queue,
      apiUrl: service.url as string,
      machine,
      async startWorkers(options) {
        const workers = await startWorkerProcesses({ ...options, databaseUrl, schema, notifyChannel });
        workerSets.push(workers);
        return workers;
      },
      close,
    };
  } catch (error) {
    await close();
    throw error;
  }
}

/**
 * Runs `body` with a started system and always closes it, also on Ctrl-C/SIGTERM (then exits 130
 * after cleaning up). Resolves with `body`'s value.
 */
export async function withBenchSystem<T>(
  name: string,
  body: (system: BenchSystem) => Promise<T>,
): Promise<T> {
  const system = await startBenchSystem(name);
  const onSignal = (signal: NodeJS.Signals) => {
    process.stderr.write(`\nbench: ${signal}: cleaning up\n`);
    void system.close().then(() => process.exit(130));
  };
  process.once("SIGINT", onSignal);
  process.once("SIGTERM", onSignal);
  try {
    return await body(system);
  } finally {
    process.off("SIGINT", onSignal);
    process.off("SIGTERM", onSignal);
    await system.close();
  }
}
