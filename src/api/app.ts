/**
 * The HTTP API (DESIGN.md §8): Fastify with TypeBox schemas that both validate requests and
 * generate the OpenAPI document served at /docs (Swagger UI) and /docs/json.
 */
import { readFileSync } from "node:fs";
import swagger from "@fastify/swagger";
import swaggerUi from "@fastify/swagger-ui";
import type { TypeBoxTypeProvider } from "@fastify/type-provider-typebox";
import Fastify, { type FastifyBaseLogger, type FastifyInstance, LogController } from "fastify";
import type { ResolvedConfig } from "../config.js";
import type { Ledger } from "../queue/ledger.js";
import { BEARER_SECURITY_SCHEME, registerBearerAuth, SECURITY_SCHEME } from "./auth.js";
import { registerBodyAdmission } from "./body-admission.js";
import { boundedLedger } from "./deadline.js";
import { registerJsonBodyParser } from "./json-body.js";
import { registerApiKinds } from "./kinds.js";
import { problemFor, registerProblemHandling, sendProblem } from "./problem.js";
import { parseQueryString, registerQueryEncodingCheck } from "./query-encoding.js";
import { deadLetterRoutes } from "./routes/dead-letters.js";
import { healthRoutes, READY_TIMEOUT_MS, type WorkerHealth } from "./routes/health.js";
import { jobRoutes } from "./routes/jobs.js";
import { metricsRoutes } from "./routes/metrics.js";
import { overviewRoutes } from "./routes/overview.js";
import { scheduleRoutes } from "./routes/schedules.js";
import { typeRoutes } from "./routes/types.js";
import { uiRoutes } from "./routes/ui.js";
import { typeBoxValidatorCompiler } from "./validation.js";

/**
 * Largest request body, bytes: room for POST /jobs/batch with 10,000 jobs of a few KiB each.
 * A larger body is refused with 413 before it is parsed. When `apiMaxInflightBodyBytes` is smaller,
 * that budget is the limit (a body that can never fit is refused 413, not 503).
 */
export const BODY_LIMIT_BYTES = 32 * 1024 * 1024;

/** Options of {@link buildApp}. */
export interface BuildAppOptions {
  /** The job ledger every route talks to (the API runs no SQL of its own). */
  ledger: Ledger;
  /** Resolved configuration; GET /metrics counts workers alive within `staleThresholdSeconds`. */
  config: ResolvedConfig;
  /**
   * `false` (default): no request logging; `true`: Fastify's own pino logger at `config.logLevel`;
   * or a pino-compatible logger instance to log through.
   */
  logger?: boolean | FastifyBaseLogger;
  /** The health of this process's worker, if it runs one: GET /ready reports it (see routes/health.ts). */
  workerHealth?: () => WorkerHealth;
  /** Serve HTTPS with this certificate (chain) and key, PEM. Default: plain HTTP. */
  https?: { cert: string | Buffer; key: string | Buffer };
}

function packageVersion(): string {
  for (const relative of ["../../package.json", "../../../package.json"]) {
    try {
      const pkg = JSON.parse(readFileSync(new URL(relative, import.meta.url), "utf8")) as {
        name?: string;
        version?: string;
      };
      if (pkg.name === "taskqueue" && pkg.version) return pkg.version;
    } catch {
      // not at this level (src/ vs dist/src/)
    }
  }
  return "0.0.0";
}

/**
 * Builds the API, ready to `listen()` or `inject()`. Routes: POST /jobs, POST /jobs/batch,
 * GET /jobs/:id, GET /jobs, DELETE /jobs/:id, POST /jobs/:id/retry, GET /dead-letters,
 * GET /dead-letters/:job_id, POST /dead-letters/:job_id/replay, POST /dead-letters/replay,
 * DELETE /dead-letters/:job_id, POST /dead-letters/discard, PUT/GET/DELETE /schedules/:name,
 * GET /schedules, GET /types, POST /types/:type/pause, POST /types/:type/resume, GET /metrics, GET /metrics/prometheus,
 * GET /stats/types, GET /stats/throughput, GET /workers, GET /health, GET /ready, GET /docs (Swagger UI),
 * GET /docs/json (OpenAPI 3.1), GET /ui (the web dashboard, static files; routes/ui.ts). With
 * `config.apiToken`, every route but /health, /ready and /ui needs the token (auth.ts).
 * Every error answer is RFC 9457 problem+json (see problem.ts). The caller owns the ledger's pool;
 * `app.close()` does not end it. Registers taskqueue's two TypeBox kinds (`TaskQueue:*`, see
 * kinds.ts) in TypeBox's process-wide TypeRegistry, and nothing else there.
 */
export async function buildApp(options: BuildAppOptions): Promise<FastifyInstance> {
  const { config } = options;
  // Every database call of a request answers within apiTimeoutSeconds, or 503 (deadline.ts).
  const ledger = boundedLedger(options.ledger, (config.apiTimeoutSeconds ?? 4) * 1000);
  const logger = options.logger ?? false;
  registerApiKinds();
  const budgetBytes = config.apiMaxInflightBodyBytes;
  const bodyLimit = budgetBytes > 0 ? Math.min(BODY_LIMIT_BYTES, budgetBytes) : BODY_LIMIT_BYTES;
  const app = Fastify({
    bodyLimit,
    // Parses as Fastify's default and notes badly percent-encoded parameters for the check below.
    // Path parameters up to 1,800 characters reach validation: a job type of 200 UTF-16 units,
    // percent-encoded, takes up to 1,800 (9 per unit of a 3-byte character), a schedule name 200;
    // the router's default of 100 answered longer valid ones 414 before their schema could judge them.
    routerOptions: { querystringParser: parseQueryString, maxParamLength: 1800 },
    ...(typeof logger === "object"
      ? { loggerInstance: logger }
      : { logger: logger ? { level: config.logLevel } : false }),
    // Fastify's two lines per request at info are replaced by one at debug (the hook below).
    logController: new LogController({ disableRequestLogging: true }),
    frameworkErrors: (error, request, reply) => {
      sendProblem(reply, problemFor(error, request));
    },
    // Fastify then builds an https.Server; its typings would make every route and plugin generic
    // over the server type, for an API whose routes never touch the raw server.
    ...((options.https ? { https: options.https } : {}) as object),
  }).withTypeProvider<TypeBoxTypeProvider>();

  if (logger) logRequests(app);
  app.setValidatorCompiler(typeBoxValidatorCompiler);
  // With config.apiToken, every route needs the token but /health, /ready and the dashboard's files
  // (auth.ts); checked first, before any other hook looks at the request.
  registerBearerAuth(app, config.apiToken);
  // JSON only: any other media type is answered 415 (Fastify also parses text/plain by default).
  registerJsonBodyParser(app);
  // Content-Encoding and the in-flight body budget, both checked before a body is read.
  registerBodyAdmission(app, budgetBytes, bodyLimit);
  registerQueryEncodingCheck(app);
  registerProblemHandling(app);

  await app.register(swagger, {
    openapi: {
      openapi: "3.1.0",
      info: {
        title: "taskqueue",
        version: packageVersion(),
        description:
          "A background job queue that runs entirely on PostgreSQL. Errors are RFC 9457 problem details " +
          "(`application/problem+json`); invalid input is answered 422 naming each bad field.",
      },
      tags: [
        { name: "jobs", description: "Enqueue, inspect, cancel and retry jobs." },
        {
          name: "dead letters",
          description: "Jobs that exhausted their retries or failed permanently: list, replay, discard.",
        },
        {
          name: "schedules",
          description: "Cron schedules: each tick enqueues one job, however many worker processes run.",
        },
        {
          name: "types",
          description: "Job types: pending jobs, live workers; pause and resume claiming a type.",
        },
        { name: "metrics", description: "Queue figures across every worker process." },
        { name: "health", description: "Liveness and readiness probes." },
      ],
      components: { securitySchemes: { [SECURITY_SCHEME]: BEARER_SECURITY_SCHEME } },
      // Every operation needs the token when the server has one; the probes say `security: []`.
      ...(config.apiToken ? { security: [{ [SECURITY_SCHEME]: [] }] } : {}),
    },
  });
  await app.register(swaggerUi, { routePrefix: "/docs" });

  await app.register(jobRoutes, { ledger });
  await app.register(deadLetterRoutes, { ledger });
  await app.register(scheduleRoutes, { ledger });
  await app.register(typeRoutes, { ledger, config });
  await app.register(metricsRoutes, { ledger, config });
  await app.register(overviewRoutes, { ledger, config });
  await app.register(uiRoutes, { authRequired: config.apiToken !== undefined });
  await app.register(healthRoutes, {
    ledger,
    timeoutMs: Math.min(READY_TIMEOUT_MS, (config.apiTimeoutSeconds ?? 4) * 1000),
    workerHealth: options.workerHealth,
  });
  await app.ready();
  return app;
}

/**
 * One line per answered request at debug level: method, URL, status and duration. Operators see
 * job events at info (the worker's job log); a request is seen with LOG_LEVEL=debug.
 */
function logRequests(app: FastifyInstance): void {
  app.addHook("onResponse", (request, reply, done) => {
    request.log.debug(
      {
        method: request.method,
        url: request.url,
        statusCode: reply.statusCode,
        durationMs: Math.round(reply.elapsedTime * 100) / 100,
      },
      "request",
    );
    done();
  });
}
