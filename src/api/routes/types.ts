/**
 * /types routes (DESIGN.md §8; issue 14, items 6 and 8): every known job type with its state, and
 * pausing and resuming a type. A paused type's jobs are not claimed by any worker on any host
 * from its next claim on (claims skip paused types in SQL); running jobs finish. The state is a
 * row of `paused_types`, so it survives restarts.
 */
import type { FastifyPluginAsyncTypebox } from "@fastify/type-provider-typebox";
import { type Static, Type } from "@sinclair/typebox";
import type { ResolvedConfig } from "../../config.js";
import { LIMITS } from "../../queue/job-shape.js";
import type { TypePause, TypeState } from "../../queue/job-types.js";
import type { Ledger } from "../../queue/ledger.js";
import { problemResponse, STORABLE_TEXT_PATTERN } from "../schemas.js";

/** Options of {@link typeRoutes}. */
export interface TypeRoutesOptions {
  ledger: Ledger;
  config: ResolvedConfig;
}

const TypeParams = Type.Object(
  {
    type: Type.String({
      minLength: LIMITS.typeLength.min,
      maxLength: LIMITS.typeLength.max,
      pattern: STORABLE_TEXT_PATTERN,
      description: "Job type (URL-encoded).",
      examples: ["send_email"],
    }),
  },
  { additionalProperties: false },
);

const PausedAt = Type.Union([
  Type.String({ format: "date-time", description: "When the type was paused (database clock)." }),
  Type.Null(),
]);

const TypePauseResponse = Type.Object({
  type: Type.String(),
  paused: Type.Boolean(),
  paused_at: PausedAt,
});

const TypeStateResponse = Type.Object({
  type: Type.String(),
  paused: Type.Boolean({ description: "Whether claims skip this type." }),
  paused_at: PausedAt,
  pending: Type.Integer({ description: "Pending jobs, due or scheduled for later." }),
  oldest_pending_age_seconds: Type.Union([
    Type.Number({ description: "Seconds since the oldest due pending job became due (its run_at)." }),
    Type.Null(),
  ]),
  live_workers: Type.Integer({
    description: "Live worker lock sessions that claim this type; 0 with pending jobs: nobody will run them.",
  }),
});

const TypeListResponse = Type.Object({ types: Type.Array(TypeStateResponse) });

/** A pause state as the API answers it. */
function toPauseResponse(p: TypePause): Static<typeof TypePauseResponse> {
  return { type: p.type, paused: p.paused, paused_at: p.pausedAt?.toISOString() ?? null };
}

/** A type's state as the API answers it. */
function toStateResponse(s: TypeState): Static<typeof TypeStateResponse> {
  return {
    ...toPauseResponse(s),
    pending: s.pending,
    oldest_pending_age_seconds: s.oldestPendingAgeSeconds,
    live_workers: s.liveWorkers,
  };
}

const invalid = problemResponse("Invalid input: `errors` names each bad field.");

/** Registers GET /types, POST /types/:type/pause and POST /types/:type/resume. */
export const typeRoutes: FastifyPluginAsyncTypebox<TypeRoutesOptions> = async (app, { ledger, config }) => {
  app.get(
    "/types",
    {
      schema: {
        tags: ["types"],
        summary: "List job types",
        description:
          "Every type with pending jobs, paused, or claimed by a live worker, in type order (at most 1,000): " +
          "whether it is paused, its pending jobs, the age of the oldest due one, and the live workers that claim it.",
        response: { 200: TypeListResponse, 503: problemResponse("The database is unreachable.") },
      },
    },
    async (_request, reply) => {
      const types = await ledger.listTypes(config.staleThresholdSeconds);
      return reply.send({ types: types.map(toStateResponse) });
    },
  );

  app.post(
    "/types/:type/pause",
    {
      schema: {
        tags: ["types"],
        summary: "Pause a job type",
        description:
          "Workers on every host stop claiming the type's jobs at their next claim; jobs already claimed or " +
          "running finish. Idempotent (pausing a paused type keeps its `paused_at`); a type without jobs may be paused.",
        params: TypeParams,
        response: { 200: TypePauseResponse, 422: invalid },
      },
    },
    async (request, reply) => reply.send(toPauseResponse(await ledger.pauseType(request.params.type))),
  );

  app.post(
    "/types/:type/resume",
    {
      schema: {
        tags: ["types"],
        summary: "Resume a job type",
        description: "Claims take the type's jobs again; idle workers are woken at once. Idempotent.",
        params: TypeParams,
        response: { 200: TypePauseResponse, 422: invalid },
      },
    },
    async (request, reply) => reply.send(toPauseResponse(await ledger.resumeType(request.params.type))),
  );
};
