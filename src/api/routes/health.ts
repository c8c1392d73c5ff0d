/**
 * Liveness (GET /health, no database) and readiness (GET /ready: the database answers within
 * {@link READY_TIMEOUT_MS}, and the process's worker, when it runs one, has every lock session open
 * and its listener listening) probes.
 */

import type { FastifyPluginAsyncTypebox } from "@fastify/type-provider-typebox";
import { type Static, Type } from "@sinclair/typebox";
import type { Ledger } from "../../queue/ledger.js";
import { withDeadline } from "../deadline.js";
import { PROBLEM_CONTENT_TYPE, PROBLEM_TYPES } from "../problem.js";
import { HealthResponse, ProblemSchema } from "../schemas.js";

/** The readiness check waits at most this long for the database (and less if `apiTimeoutSeconds` is). */
export const READY_TIMEOUT_MS = 2000;

/** How a worker reports its connections (structurally the same as `Worker.health()`'s answer). */
export const WorkerHealthSchema = Type.Object(
  {
    state: Type.Union(
      (["created", "starting", "running", "stopping", "stopped", "failed"] as const).map((s) =>
        Type.Literal(s),
      ),
    ),
    lockSessions: Type.Array(
      Type.Object({
        id: Type.String(),
        state: Type.Union([
          Type.Literal("open"),
          Type.Literal("lost"),
          Type.Literal("reconnecting"),
          Type.Literal("closed"),
        ]),
      }),
    ),
    listener: Type.Union([Type.Literal("listening"), Type.Literal("reconnecting"), Type.Literal("stopped")]),
    notifyTrigger: Type.Union([Type.Boolean(), Type.Null()]),
  },
  {
    description:
      "The worker of this process: ready only with every lock session open and its listener listening.",
  },
);
/** A worker's health: its state, each lock session's, its LISTEN connection's, the NOTIFY trigger's. */
export type WorkerHealth = Static<typeof WorkerHealthSchema>;

const ReadyBody = Type.Object({
  status: Type.Literal("ready"),
  worker: Type.Optional(WorkerHealthSchema),
});
const NotReadyBody = Type.Object(
  { ...ProblemSchema.properties, worker: Type.Optional(WorkerHealthSchema) },
  { description: "RFC 9457 problem details, with the worker's health when the process runs one." },
);

/** Options of {@link healthRoutes}. */
export interface HealthRoutesOptions {
  ledger: Ledger;
  /** Bound of the database check, ms. Default {@link READY_TIMEOUT_MS}. */
  timeoutMs?: number;
  /** The health of this process's worker, if it runs one. */
  workerHealth?: () => WorkerHealth;
}

/** What keeps `health` from being ready, or null: a lock session not open, the listener not listening. */
export function workerUnreadiness(health: WorkerHealth): string | null {
  const notOpen = health.lockSessions.filter((s) => s.state !== "open");
  const parts: string[] = [];
  if (notOpen.length > 0)
    parts.push(
      `lock session${notOpen.length === 1 ? "" : "s"} ${notOpen.map((s) => `${s.id} ${s.state}`).join(", ")}`,
    );
  if (health.listener !== "listening") parts.push(`listener ${health.listener}`);
  return parts.length > 0 ? `The worker is not ready: ${parts.join("; ")}.` : null;
}

/**
 * Registers GET /health and GET /ready. /ready answers 503 problem+json (with `Retry-After`) when
 * the database does not answer within the bound or is not migrated, or when the worker is not ready.
 */
export const healthRoutes: FastifyPluginAsyncTypebox<HealthRoutesOptions> = async (app, options) => {
  const { ledger, workerHealth } = options;
  const timeoutMs = options.timeoutMs ?? READY_TIMEOUT_MS;
  app.get(
    "/health",
    {
      config: { auth: false },
      schema: {
        security: [],
        tags: ["health"],
        summary: "Liveness probe",
        description: "200 while the process serves HTTP. Does not touch the database.",
        response: { 200: HealthResponse },
      },
    },
    async () => ({ status: "ok" as const }),
  );

  app.get(
    "/ready",
    {
      config: { auth: false },
      schema: {
        security: [],
        tags: ["health"],
        summary: "Readiness probe",
        description:
          `200 if the database answers within ${timeoutMs / 1000} s and the schema is migrated, and, when the process ` +
          "runs a worker, every lock session of it is open and its listener listening; else 503 (Retry-After).",
        response: {
          200: ReadyBody,
          503: {
            description: "The database is unreachable, slow or not migrated, or the worker is not ready.",
            content: { [PROBLEM_CONTENT_TYPE]: { schema: NotReadyBody } },
          },
        },
      },
    },
    async (request, reply) => {
      const worker = workerHealth?.();
      let detail = worker ? workerUnreadiness(worker) : null;
      let databaseDown = false;
      try {
        await withDeadline(ledger.ping(), timeoutMs, "the readiness check");
      } catch (error) {
        request.log.warn({ err: error }, "readiness check failed");
        databaseDown = true;
        detail = `The database is unavailable: it does not answer within ${timeoutMs / 1000} s or the schema is not migrated.${detail ? ` ${detail}` : ""}`;
      }
      if (detail === null)
        return worker ? { status: "ready" as const, worker } : { status: "ready" as const };
      const problem: Static<typeof NotReadyBody> = {
        type: databaseDown ? PROBLEM_TYPES.databaseUnavailable : PROBLEM_TYPES.notReady,
        title: "Not ready",
        status: 503,
        detail,
        instance: request.url,
        ...(worker ? { worker } : {}),
      };
      return reply.code(503).header("retry-after", "5").type(PROBLEM_CONTENT_TYPE).send(problem);
    },
  );
};
