/** Liveness (GET /health, no database) and readiness (GET /ready, database answers) probes. */
import type { FastifyPluginAsyncTypebox } from "@fastify/type-provider-typebox";
import type { Ledger } from "../../queue/ledger.js";
import { HttpProblem, PROBLEM_TYPES } from "../problem.js";
import { HealthResponse, problemResponse, ReadyResponse } from "../schemas.js";

/** Options of {@link healthRoutes}. */
export interface HealthRoutesOptions {
  ledger: Ledger;
}

/** Registers GET /health and GET /ready. /ready answers 503 problem+json when the database does not. */
export const healthRoutes: FastifyPluginAsyncTypebox<HealthRoutesOptions> = async (app, { ledger }) => {
  app.get(
    "/health",
    {
      schema: {
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
      schema: {
        tags: ["health"],
        summary: "Readiness probe",
        description: "200 if the database answers and the schema is migrated, else 503.",
        response: {
          200: ReadyResponse,
          503: problemResponse("The database is unreachable or not migrated."),
        },
      },
    },
    async (request) => {
      try {
        await ledger.ping();
      } catch (error) {
        request.log.warn({ err: error }, "readiness check failed");
        throw new HttpProblem(
          503,
          PROBLEM_TYPES.databaseUnavailable,
          "Not ready",
          "The database does not answer or the schema is not migrated.",
        );
      }
      return { status: "ready" as const };
    },
  );
};
