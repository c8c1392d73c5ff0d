/**
 * /types routes (DESIGN.md §8; issue 14, items 6 and 8): every known job type with its state, and
 * pausing and resuming a type. A paused type's jobs are not claimed by any worker on any host
 * from its next claim on (claims skip paused types in SQL); running jobs finish. The state is a
 * row of `paused_types`, so it survives restarts. A type's global limits (issue 13, item 3) are a
 * row of `type_limits`: set with PUT, removed with DELETE /types/{type}/limit, shown in GET /types.
 */
import type { FastifyPluginAsyncTypebox } from "@fastify/type-provider-typebox";
import { type Static, type TSchema, Type } from "@sinclair/typebox";
import type { ResolvedConfig } from "../../config.js";
import { LIMITS } from "../../queue/job-shape.js";
import type { TypePause, TypeState } from "../../queue/job-types.js";
import type { Ledger } from "../../queue/ledger.js";
import { TYPE_LIMIT_BOUNDS, type TypeLimit, type TypeLimitOptions } from "../../queue/type-limits.js";
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

const LimitFields = {
  max_running: Type.Integer({
    minimum: 1,
    maximum: TYPE_LIMIT_BOUNDS.maxRunning,
    description: "Most jobs of the type held at once (claimed or running) over every worker on every host.",
  }),
  rate_per_second: Type.Number({
    exclusiveMinimum: 0,
    maximum: TYPE_LIMIT_BOUNDS.ratePerSecond,
    description: "Most claims (starts) of the type per second over every worker on every host.",
  }),
  burst: Type.Integer({
    minimum: 1,
    maximum: TYPE_LIMIT_BOUNDS.burst,
    description:
      "Most claims at once after an idle spell (the token bucket's size); default ceil(rate_per_second).",
  }),
};

const TypeLimitBody = Type.Object(
  {
    max_running: Type.Optional(LimitFields.max_running),
    rate_per_second: Type.Optional(LimitFields.rate_per_second),
    burst: Type.Optional(LimitFields.burst),
  },
  { additionalProperties: false },
);

const nullable = <T extends TSchema>(schema: T) => Type.Union([schema, Type.Null()]);

const LimitState = Type.Object({
  max_running: nullable(LimitFields.max_running),
  rate_per_second: nullable(LimitFields.rate_per_second),
  burst: nullable(LimitFields.burst),
});

const TypeLimitResponse = Type.Object({
  type: Type.String(),
  ...LimitState.properties,
  updated_at: Type.String({ format: "date-time", description: "When the limits were set (database clock)." }),
});

const TypeUnlimitResponse = Type.Object({
  type: Type.String(),
  removed: Type.Boolean({ description: "Whether the type had limits (false: nothing to remove)." }),
});

const TypeStateResponse = Type.Object({
  type: Type.String(),
  paused: Type.Boolean({ description: "Whether claims skip this type." }),
  paused_at: PausedAt,
  limit: Type.Union([LimitState, Type.Null()], {
    description: "The type's global limits (PUT /types/{type}/limit); null when it has none.",
  }),
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
    limit: s.limit && {
      max_running: s.limit.maxRunning,
      rate_per_second: s.limit.ratePerSecond,
      burst: s.limit.burst,
    },
    pending: s.pending,
    oldest_pending_age_seconds: s.oldestPendingAgeSeconds,
    live_workers: s.liveWorkers,
  };
}

const invalid = problemResponse("Invalid input: `errors` names each bad field.");

/** A type's limits as the API answers them. */
function toLimitResponse(l: TypeLimit): Static<typeof TypeLimitResponse> {
  return {
    type: l.type,
    max_running: l.maxRunning,
    rate_per_second: l.ratePerSecond,
    burst: l.burst,
    updated_at: l.updatedAt.toISOString(),
  };
}

/** The library's limit options of a validated body. */
function toLimitOptions(body: Static<typeof TypeLimitBody>): TypeLimitOptions {
  const options: TypeLimitOptions = {};
  if (body.max_running !== undefined) options.maxRunning = body.max_running;
  if (body.rate_per_second !== undefined) options.ratePerSecond = body.rate_per_second;
  if (body.burst !== undefined) options.burst = body.burst;
  return options;
}

/**
 * Registers GET /types, POST /types/:type/pause, POST /types/:type/resume, PUT and DELETE
 * /types/:type/limit.
 */
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
  app.put(
    "/types/:type/limit",
    {
      schema: {
        tags: ["types"],
        summary: "Set a job type's global limits",
        description:
          "At most `max_running` of the type's jobs held (claimed or running) and at most `rate_per_second` " +
          "claims per second (bursts of at most `burst`, default ceil(rate_per_second)), over every worker on " +
          "every host, enforced by the claim itself. Set at least one of the two; a limit left out is removed. " +
          "Workers apply it from their next claim; jobs held beyond a lower `max_running` finish. Run-alone " +
          "jobs (reclaimed from a lost worker) ignore limits.",
        params: TypeParams,
        body: TypeLimitBody,
        response: {
          200: TypeLimitResponse,
          400: problemResponse("Malformed JSON."),
          415: problemResponse("Body is not application/json."),
          422: invalid,
        },
      },
    },
    async (request, reply) =>
      reply.send(
        toLimitResponse(
          await ledger.setTypeLimit(request.params.type, toLimitOptions(request.body), "snake"),
        ),
      ),
  );

  app.delete(
    "/types/:type/limit",
    {
      schema: {
        tags: ["types"],
        summary: "Remove a job type's global limits",
        description: "Workers claim the type without limits again, woken at once. Idempotent.",
        params: TypeParams,
        response: { 200: TypeUnlimitResponse, 422: invalid },
      },
    },
    async (request, reply) =>
      reply.send({
        type: request.params.type,
        removed: (await ledger.removeTypeLimit(request.params.type)) !== null,
      }),
  );
};
