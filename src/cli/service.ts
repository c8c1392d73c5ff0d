/**
 * The service roles the CLI runs, composed from the public library (src/index.ts) and the API.
 * The CLI owns OS signals; the library never installs handlers.
 */
import { readFileSync } from "node:fs";
import { resolve } from "node:path";
import { createSecureContext } from "node:tls";
import { pathToFileURL } from "node:url";
import type { FastifyInstance } from "fastify";
import type pg from "pg";
import { buildApp } from "../api/app.js";
import { assertSafeBind } from "../api/auth.js";
import type { WorkerHealth } from "../api/routes/health.js";
import type { ResolvedConfig } from "../config.js";
import { type EmbeddedDatabase, startEmbeddedPostgres } from "../db/embedded.js";
import { createPool, idleConnectionError } from "../db/pool.js";
import { ConfigError, HandlerModuleError, HandlerTypeError } from "../errors.js";
import { TaskQueue } from "../index.js";
import { createLogger, type Logger } from "../log.js";
import { Ledger } from "../queue/ledger.js";
import { assertSessionPooling } from "../queue/pooling.js";
import type { HandlerRegistry, RegisteredHandler, SandboxedHandlerSpec } from "../worker/registry.js";
import type { Worker } from "../worker/worker.js";
import { EMBEDDED_STATE_FILE, writeEmbeddedState } from "./embedded-state.js";
import { HealthFile, loopbackHealthUrl } from "./health.js";

/** Where `npm start` keeps the embedded database's data, relative to the working directory. */
export const EMBEDDED_DATA_DIR = ".taskqueue/pgdata";

export interface ServiceOptions {
  config: ResolvedConfig;
  api: boolean;
  worker: boolean;
  /** Start an embedded PostgreSQL when no DATABASE_URL is set (only `start` allows it). */
  allowEmbedded: boolean;
  /** Run migrations before serving. Default true. */
  migrate?: boolean;
  /** Only claim these built-in or module types (default: every registered type). */
  types?: string[];
  /**
   * Module whose default export registers handlers: `(registry) => void` or `{type: handler}`, a
   * handler being a function, `sandboxed(url)`, or `{ module, export?, sandbox: "process" }` (a
   * relative `module` is resolved against the handlers module).
   */
  handlersModule?: string;
  /**
   * Keep a health file here for `taskqueue health` (health.ts): written once everything started,
   * rewritten after each heartbeat of the worker, removed on stop. Default: none.
   */
  healthFile?: string;
}

/** A running service. */
export interface RunningService {
  logger: Logger;
  queue: TaskQueue;
  app: FastifyInstance | null;
  worker: Worker | null;
  url: string | null;
  /** Graceful stop of everything (idempotent). */
  stop(): Promise<void>;
  /** For a forced exit: stops the embedded database (if any) at once, synchronously. */
  stopNow(): void;
}

/**
 * The service's API pool, separate from the queue's: `poolSize` connections, and the server cuts
 * each statement at `apiTimeoutSeconds` (or `statementTimeoutSeconds` if lower), when the request
 * answers 503 anyway; connecting is bounded by the lower of `connectTimeoutSeconds` and it.
 */
export function createApiPool(
  config: ResolvedConfig & { databaseUrl: string },
  namedStatements = true,
): pg.Pool {
  return createPool({
    namedStatements,
    connectionString: config.databaseUrl,
    applicationName: "taskqueue-api",
    max: config.poolSize,
    connectTimeoutSeconds: Math.min(config.connectTimeoutSeconds, config.apiTimeoutSeconds),
    statementTimeoutSeconds: Math.min(config.statementTimeoutSeconds, config.apiTimeoutSeconds),
  });
}

async function loadHandlers(registry: HandlerRegistry, modulePath: string): Promise<void> {
  const moduleUrl = pathToFileURL(resolve(modulePath)).href;
  const mod = (await import(moduleUrl)) as { default?: unknown };
  const exported = mod.default;
  if (typeof exported === "function") await (exported as (r: HandlerRegistry) => unknown)(registry);
  else if (exported && typeof exported === "object")
    for (const [type, handler] of Object.entries(
      exported as Record<string, RegisteredHandler | SandboxedHandlerSpec>,
    ))
      try {
        registry.register(type, withModuleResolved(handler, moduleUrl));
      } catch (error) {
        if (error instanceof HandlerModuleError || error instanceof HandlerTypeError)
          throw new ConfigError("--handlers", `${modulePath}: ${error.message}`);
        throw error;
      }
  else
    throw new ConfigError(
      "--handlers",
      `${modulePath} must default-export a function(registry) or {type: handler}`,
    );
}

/** A `{ module: "./x.js", sandbox: "process" }` spec with its module resolved against `baseUrl`. */
function withModuleResolved(
  handler: RegisteredHandler | SandboxedHandlerSpec,
  baseUrl: string,
): RegisteredHandler | SandboxedHandlerSpec {
  if (typeof handler !== "object" || handler === null || "exportName" in handler) return handler;
  const { module } = handler;
  if (typeof module !== "string" || module === "" || /^[a-z][a-z0-9+.-]+:/i.test(module)) return handler;
  return { ...handler, module: new URL(module, baseUrl) };
}

/**
 * The API's certificate and key (`TLS_CERT_FILE`, `TLS_KEY_FILE`), checked to form a TLS context;
 * undefined without them.
 * @throws {ConfigError} naming the variable whose file cannot be read, or TLS_CERT_FILE when the
 * pair is not a certificate and its key.
 */
function readTlsFiles(config: ResolvedConfig): { cert: Buffer; key: Buffer } | undefined {
  if (config.tlsCertFile === undefined || config.tlsKeyFile === undefined) return undefined;
  const read = (variable: string, path: string) => {
    try {
      return readFileSync(path);
    } catch (error) {
      throw new ConfigError(variable, `cannot read ${path}: ${(error as Error).message}`);
    }
  };
  const pair = {
    cert: read("TLS_CERT_FILE", config.tlsCertFile),
    key: read("TLS_KEY_FILE", config.tlsKeyFile),
  };
  try {
    createSecureContext(pair);
  } catch (error) {
    throw new ConfigError(
      "TLS_CERT_FILE",
      `${config.tlsCertFile} and TLS_KEY_FILE ${config.tlsKeyFile} are not a PEM certificate and its key: ${(error as Error).message}`,
    );
  }
  return pair;
}

/** Starts the requested roles. @throws {ConfigError} on bad configuration. */
export async function startService(options: ServiceOptions): Promise<RunningService> {
  // No token on a reachable address is refused before anything starts.
  if (options.api) assertSafeBind(options.config);
  // The certificate too: a typo in a path fails before the database is touched.
  const https = options.api ? readTlsFiles(options.config) : undefined;
  const logger = createLogger(options.config.logLevel, "taskqueue", options.config.logFormat);
  let embedded: EmbeddedDatabase | null = null;
  /** Removes the embedded database's state file (embedded-state.ts); set once it is written. */
  let removeState: (() => void) | null = null;
  let config = options.config;
  if (!config.databaseUrl) {
    if (!options.allowEmbedded)
      throw new ConfigError(
        "DATABASE_URL",
        "is required for this role (`taskqueue start` alone runs an embedded PostgreSQL)",
      );
    logger.info({ dataDir: EMBEDDED_DATA_DIR }, "no DATABASE_URL: starting embedded PostgreSQL 16");
    embedded = await startEmbeddedPostgres({
      dataDir: EMBEDDED_DATA_DIR,
      log: (line) => logger.debug({ postgres: line }),
    });
    config = { ...config, databaseUrl: embedded.connectionString };
    removeState = writeEmbeddedState({ databaseUrl: embedded.connectionString, port: embedded.port });
    logger.info(
      { port: embedded.port, dataDir: embedded.dataDir, stateFile: EMBEDDED_STATE_FILE },
      "embedded PostgreSQL ready",
    );
  }
  const queue = new TaskQueue({ ...config, logger });
  let app: FastifyInstance | null = null;
  let worker: Worker | null = null;
  let url: string | null = null;
  let apiPool: pg.Pool | null = null;
  const health = options.healthFile
    ? new HealthFile(
        options.healthFile,
        { apiHealthUrl: null, worker: options.worker, staleThresholdSeconds: config.staleThresholdSeconds },
        logger,
      )
    : null;
  const stopAll = async () => {
    await health?.remove();
    await app?.close().catch((error: unknown) => logger.warn({ err: error }, "API close failed"));
    await apiPool?.end().catch(() => undefined);
    await worker?.stop();
    await queue.close().catch(() => undefined);
    await embedded?.stop();
    removeState?.();
  };
  try {
    // First: behind a transaction pooler even the migration must send its statements unnamed, and
    // a worker role is refused before it migrates anything.
    const pooling = await queue.detectPooling();
    if (pooling.mode !== "session") {
      if (options.worker) assertSessionPooling(pooling);
      logger.info(pooling, "transaction pooler in front of PostgreSQL: statements are sent unnamed");
    }
    if (options.migrate !== false) {
      const result = await queue.migrate();
      logger.info(result, result.applied.length ? "schema migrated" : "schema up to date");
    }
    if (options.worker) {
      const { registerBuiltinHandlers } = await import("../worker/handlers/index.js");
      registerBuiltinHandlers(queue.registry);
      if (options.handlersModule) await loadHandlers(queue.registry, options.handlersModule);
      const unknown = (options.types ?? []).filter((t) => !queue.registry.get(t));
      if (unknown.length) throw new ConfigError("--types", `no handler for ${unknown.join(", ")}`);
      worker = await queue.startWorker({ types: options.types });
      const started = worker;
      // Healthy while every lock session is open and heartbeats get through.
      started.on("worker:heartbeat", () => {
        const state = started.health();
        if (state.state === "running" && state.lockSessions.every((session) => session.state === "open"))
          health?.touch();
      });
    }
    if (options.api) {
      // The API has a pool of its own, so handlers that exhaust the queue's pool (addJob without
      // {client} inside a handler's transaction) never hold POST /jobs behind them.
      apiPool = createApiPool(queue.config, pooling.mode === "session");
      apiPool.on("error", (error) =>
        logger.warn({ err: idleConnectionError(error) }, "idle API pool connection failed"),
      );
      const running = worker as (Worker & { health?: () => WorkerHealth }) | null;
      // Worker.health() comes with the worker's connection states; until then /ready checks the database only.
      const workerHealth =
        running && typeof running.health === "function"
          ? () => (running.health as () => WorkerHealth)()
          : undefined;
      app = await buildApp({
        ledger: new Ledger(apiPool, queue.config.schema, queue.config),
        config: queue.config,
        logger,
        workerHealth,
        https,
      });
      url = await app.listen({ host: config.host, port: config.port });
      logger.info({ url, docs: `${url}/docs` }, "API listening");
      const address = app.server.address();
      if (health && address && typeof address === "object")
        await health.write({
          apiHealthUrl: loopbackHealthUrl(
            address.address,
            address.port,
            config.tlsCertFile ? "https" : "http",
          ),
        });
    }
    if (health && !options.api) await health.write();
  } catch (error) {
    await stopAll();
    throw error;
  }
  let stopping: Promise<void> | null = null;
  return {
    logger,
    queue,
    app,
    worker,
    url,
    stop: () => {
      stopping ??= stopAll();
      return stopping;
    },
    stopNow: () => embedded?.stopNow(),
  };
}

/**
 * Runs until SIGINT/SIGTERM, then stops gracefully and exits 0. A signal repeated more than a
 * second later exits at once with code 130; one within the second is the same Ctrl-C arriving
 * twice (from the terminal's process group and forwarded by npm) and is ignored.
 */
export async function runUntilSignal(service: RunningService): Promise<never> {
  return new Promise<never>(() => {
    let signalledAt: number | null = null;
    const onSignal = (signal: NodeJS.Signals) => {
      if (signalledAt !== null) {
        if (Date.now() - signalledAt < 1000) return;
        service.logger.warn({ signal }, "second signal: exiting now");
        service.stopNow();
        process.exit(130);
      }
      signalledAt = Date.now();
      service.logger.info({ signal }, "shutting down gracefully");
      service.stop().then(
        () => process.exit(0),
        (error: unknown) => {
          service.logger.error({ err: error }, "shutdown failed");
          process.exit(1);
        },
      );
    };
    process.on("SIGINT", onSignal);
    process.on("SIGTERM", onSignal);
  });
}
