/**
 * /schedules routes (DESIGN.md §8; issue 13, item 2): create or replace a cron schedule by name
 * (PUT), read, list and delete. The body is checked against the schema below; the expression, zone
 * and job are checked by the ledger (422 naming the field). Every tick of a schedule enqueues one
 * job, from whichever worker process passes first (schedules.ts); the API only writes the row.
 */
import type { FastifyPluginAsyncTypebox } from "@fastify/type-provider-typebox";
import { type Static, Type } from "@sinclair/typebox";
import { ScheduleNotFoundError } from "../../errors.js";
import { LIMITS } from "../../queue/job-shape.js";
import type { Ledger } from "../../queue/ledger.js";
import type { Schedule, ScheduleOptions } from "../../queue/schedules.js";
import type { JsonValue } from "../../queue/types.js";
import { problemResponse, STORABLE_TEXT_PATTERN } from "../schemas.js";

/** Options of {@link scheduleRoutes}. */
export interface ScheduleRoutesOptions {
  ledger: Ledger;
}

const ScheduleParams = Type.Object(
  {
    name: Type.String({
      pattern: "^[A-Za-z0-9_.:-]{1,200}$",
      description: "Schedule name: 1–200 letters, digits, `_`, `.`, `:` or `-`.",
      examples: ["nightly-report"],
    }),
  },
  { additionalProperties: false },
);

const ScheduleBody = Type.Object(
  {
    cron: Type.String({
      minLength: 1,
      maxLength: 200,
      description:
        "Cron expression: 5 fields (minute hour day-of-month month day-of-week), or 6 with seconds first, " +
        "or a nickname (`@hourly`, `@daily`, `@weekly`, `@monthly`, `@yearly`).",
      examples: ["30 2 * * *", "*/10 * * * * *"],
    }),
    timezone: Type.Optional(
      Type.String({
        minLength: 1,
        maxLength: 100,
        description:
          "IANA time zone the expression is read in; ticks follow its daylight saving transitions. Default `UTC`.",
        examples: ["Europe/Berlin"],
      }),
    ),
    type: Type.String({
      minLength: LIMITS.typeLength.min,
      maxLength: LIMITS.typeLength.max,
      pattern: STORABLE_TEXT_PATTERN,
      description: "Job type of every tick's job.",
      examples: ["report"],
    }),
    payload: Type.Optional(Type.Unknown({ description: "Payload of every tick's job. Default `{}`." })),
    priority: Type.Optional(
      Type.Integer({ minimum: LIMITS.priority.min, maximum: LIMITS.priority.max, description: "Default 5." }),
    ),
    max_retries: Type.Optional(
      Type.Integer({
        minimum: LIMITS.maxRetries.min,
        maximum: LIMITS.maxRetries.max,
        description: "Default 3.",
      }),
    ),
    catch_up: Type.Optional(
      Type.Boolean({
        description:
          "After a downtime, enqueue the missed ticks (the latest SCHEDULE_CATCH_UP_LIMIT). Default false: a tick " +
          "found more than SCHEDULE_MISFIRE_SECONDS late is skipped.",
      }),
    ),
  },
  { additionalProperties: false, description: "A cron schedule: when, and the job each tick enqueues." },
);
type ScheduleBody = Static<typeof ScheduleBody>;

const Timestamp = (description: string) => Type.String({ format: "date-time", description });

const ScheduleResponse = Type.Object({
  name: Type.String(),
  cron: Type.String(),
  timezone: Type.String(),
  type: Type.String(),
  payload: Type.Unknown(),
  priority: Type.Integer(),
  max_retries: Type.Integer(),
  catch_up: Type.Boolean(),
  created_at: Timestamp("When it was created (database clock)."),
  updated_at: Timestamp("When it was last written."),
  last_tick: Timestamp("The latest tick dealt with (enqueued, or skipped); its creation time at first."),
  next_tick_at: Type.Union([Timestamp("The next tick after now."), Type.Null()]),
});

const ScheduleListResponse = Type.Object({
  schedules: Type.Array(ScheduleResponse),
  limit: Type.Integer(),
  offset: Type.Integer(),
});

const ListQuerystring = Type.Object(
  {
    limit: Type.Optional(Type.Integer({ minimum: 1, maximum: 1000, default: 1000 })),
    offset: Type.Optional(Type.Integer({ minimum: 0, default: 0 })),
  },
  { additionalProperties: false },
);

/** A schedule as the API answers it (snake_case, ISO-8601 times). */
function toScheduleResponse(schedule: Schedule): Static<typeof ScheduleResponse> {
  return {
    name: schedule.name,
    cron: schedule.cron,
    timezone: schedule.timezone,
    type: schedule.type,
    payload: schedule.payload,
    priority: schedule.priority,
    max_retries: schedule.maxRetries,
    catch_up: schedule.catchUp,
    created_at: schedule.createdAt.toISOString(),
    updated_at: schedule.updatedAt.toISOString(),
    last_tick: schedule.lastTick.toISOString(),
    next_tick_at: schedule.nextTickAt?.toISOString() ?? null,
  };
}

/** The ledger's options of a validated body. */
function toOptions(body: ScheduleBody): ScheduleOptions {
  const options: ScheduleOptions = { type: body.type };
  if (body.payload !== undefined) options.payload = body.payload as JsonValue;
  if (body.timezone !== undefined) options.timezone = body.timezone;
  if (body.priority !== undefined) options.priority = body.priority;
  if (body.max_retries !== undefined) options.maxRetries = body.max_retries;
  if (body.catch_up !== undefined) options.catchUp = body.catch_up;
  return options;
}

const invalid = problemResponse("Invalid input: `errors` names each bad field.");
const missing = problemResponse("No schedule has this name.");

/** Registers PUT, GET and DELETE /schedules/:name and GET /schedules. */
export const scheduleRoutes: FastifyPluginAsyncTypebox<ScheduleRoutesOptions> = async (app, { ledger }) => {
  app.put(
    "/schedules/:name",
    {
      schema: {
        tags: ["schedules"],
        summary: "Create or replace a cron schedule",
        description:
          "Every tick of `cron` in `timezone` enqueues one job of `type` (keyed `schedule:<name>@<tick>`), however " +
          "many worker processes run. A new schedule, or one whose cron or zone changes, starts now; other changes " +
          "keep its place. 201 when created, 200 when it replaced one.",
        params: ScheduleParams,
        body: ScheduleBody,
        response: {
          200: ScheduleResponse,
          201: ScheduleResponse,
          400: problemResponse("Malformed JSON."),
          415: problemResponse("Body is not application/json."),
          422: invalid,
        },
      },
    },
    async (request, reply) => {
      const { schedule, created } = await ledger.schedule(
        request.params.name,
        request.body.cron,
        toOptions(request.body),
        "snake",
      );
      return reply.code(created ? 201 : 200).send(toScheduleResponse(schedule));
    },
  );

  app.get(
    "/schedules/:name",
    {
      schema: {
        tags: ["schedules"],
        summary: "Get a schedule",
        description: "The schedule, its job, its latest tick dealt with and its next tick.",
        params: ScheduleParams,
        response: { 200: ScheduleResponse, 404: missing, 422: invalid },
      },
    },
    async (request, reply) => {
      const schedule = await ledger.getSchedule(request.params.name);
      if (!schedule) throw new ScheduleNotFoundError(request.params.name);
      return reply.send(toScheduleResponse(schedule));
    },
  );

  app.get(
    "/schedules",
    {
      schema: {
        tags: ["schedules"],
        summary: "List schedules",
        description: "Schedules by name, paged with `limit` (1–1000, default 1000) and `offset`.",
        querystring: ListQuerystring,
        response: { 200: ScheduleListResponse, 422: invalid },
      },
    },
    async (request, reply) => {
      const limit = request.query.limit ?? 1000;
      const offset = request.query.offset ?? 0;
      const schedules = await ledger.listSchedules({ limit, offset });
      return reply.send({ schedules: schedules.map(toScheduleResponse), limit, offset });
    },
  );

  app.delete(
    "/schedules/:name",
    {
      schema: {
        tags: ["schedules"],
        summary: "Delete a schedule",
        description: "Deletes the schedule and answers it as it was; the jobs it enqueued stay.",
        params: ScheduleParams,
        response: { 200: ScheduleResponse, 404: missing, 422: invalid },
      },
    },
    async (request, reply) => reply.send(toScheduleResponse(await ledger.unschedule(request.params.name))),
  );
};
