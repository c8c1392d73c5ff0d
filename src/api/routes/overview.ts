/**
 * The dashboard's overview reads (issue 12), also usable on their own: GET /stats/types (live jobs
 * per type, oldest due age, live workers per type), GET /stats/throughput (finished attempts per
 * minute over the last hour) and GET /workers (live worker lock sessions). Each is one ledger
 * statement that reads only bounded data (the live jobs' partial indexes, the per-second stats
 * buckets kept an hour, the worker rows), so they stay fast with millions of finished jobs.
 */
import type { FastifyPluginAsyncTypebox } from "@fastify/type-provider-typebox";
import { Type } from "@sinclair/typebox";
import type { ResolvedConfig } from "../../config.js";
import type { Ledger } from "../../queue/ledger.js";
import { TYPE_DEPTHS_MAX } from "../../queue/overview.js";
import { nullable } from "../job-response.js";
import { problemResponse } from "../schemas.js";

/** Options of {@link overviewRoutes}. */
export interface OverviewRoutesOptions {
  ledger: Ledger;
  config: ResolvedConfig;
}

const Timestamp = () => Type.String({ format: "date-time", description: "ISO-8601, UTC." });
const count = (description: string) => Type.Integer({ minimum: 0, description });

/** Response of GET /stats/types. */
export const TypeDepthsResponse = Type.Object({
  types: Type.Array(
    Type.Object({
      type: Type.String(),
      pending: count("Pending jobs, due or scheduled."),
      due: count("Pending jobs due now."),
      claimed: count("Claimed jobs."),
      running: count("Running jobs."),
      oldest_due_seconds: nullable(
        Type.Number({ description: "Seconds since the oldest due pending job became due; null when none." }),
      ),
      next_run_at: nullable(Timestamp()),
      live_workers: count(
        "Live worker lock sessions that claim this type: 0 with pending jobs means nobody runs them.",
      ),
    }),
    { description: `Types with live jobs, busiest first, at most ${TYPE_DEPTHS_MAX}.` },
  ),
});

/** Query string of GET /stats/throughput. */
const ThroughputQuerystring = Type.Object(
  {
    minutes: Type.Optional(
      Type.Integer({ minimum: 1, maximum: 60, default: 60, description: "Minutes back, 1–60. Default 60." }),
    ),
  },
  { additionalProperties: false },
);

/** Response of GET /stats/throughput. */
export const ThroughputResponse = Type.Object({
  minutes: Type.Array(
    Type.Object({
      minute: Timestamp(),
      done: count("Jobs completed in this minute."),
      failed: count("Failed attempts (retried or dead) in this minute."),
      exec_seconds: Type.Number({ description: "Total execution seconds of the jobs completed." }),
    }),
    { description: "One entry per minute, oldest first, the current minute last." },
  ),
});

/** Response of GET /workers. */
export const WorkersResponse = Type.Object({
  workers: Type.Array(
    Type.Object({
      id: Type.String({ description: "Worker id (one per lock session: `<process id>/<lane>` with lanes)." }),
      host: Type.String(),
      pid: Type.Integer(),
      types: Type.Array(Type.String(), { description: "Job types it claims." }),
      concurrency: Type.Integer(),
      in_flight: count("Jobs it holds now (claimed or running)."),
      fenced_writes: count("Late writes refused by the claim fence."),
      started_at: Timestamp(),
      heartbeat_at: Timestamp(),
    }),
    {
      description:
        "Worker lock sessions with a heartbeat younger than STALE_THRESHOLD_SECONDS, newest first.",
    },
  ),
});

const unavailable = problemResponse("The database is unreachable.");

/** Registers GET /stats/types, GET /stats/throughput and GET /workers. */
export const overviewRoutes: FastifyPluginAsyncTypebox<OverviewRoutesOptions> = async (
  app,
  { ledger, config },
) => {
  app.get(
    "/stats/types",
    {
      schema: {
        tags: ["metrics"],
        summary: "Live jobs per type",
        description:
          "Pending (all and due now), claimed and running jobs per type, the age of the oldest due pending job, " +
          "the next scheduled run and the live workers that claim the type. Read from the live jobs only.",
        response: { 200: TypeDepthsResponse, 503: unavailable },
      },
    },
    async () => {
      const types = await ledger.typeDepths(config.staleThresholdSeconds);
      return {
        types: types.map((t) => ({
          type: t.type,
          pending: t.pending,
          due: t.due,
          claimed: t.claimed,
          running: t.running,
          oldest_due_seconds: t.oldestDueSeconds,
          next_run_at: t.nextRunAt?.toISOString() ?? null,
          live_workers: t.liveWorkers,
        })),
      };
    },
  );

  app.get(
    "/stats/throughput",
    {
      schema: {
        tags: ["metrics"],
        summary: "Throughput per minute",
        description:
          "Completed jobs and failed attempts per minute over the last `minutes` (default 60), from the " +
          "per-second counters every worker writes; minutes without any are zeros.",
        querystring: ThroughputQuerystring,
        response: { 200: ThroughputResponse, 422: problemResponse("Invalid `minutes`."), 503: unavailable },
      },
    },
    async (request) => {
      const minutes = await ledger.throughput(request.query.minutes ?? 60);
      return {
        minutes: minutes.map((m) => ({
          minute: m.minute.toISOString(),
          done: m.done,
          failed: m.failed,
          exec_seconds: m.execSeconds,
        })),
      };
    },
  );

  app.get(
    "/workers",
    {
      schema: {
        tags: ["metrics"],
        summary: "Live workers",
        description:
          "Worker lock sessions with a fresh heartbeat: host, pid, types, in-flight jobs, last heartbeat.",
        response: { 200: WorkersResponse, 503: unavailable },
      },
    },
    async () => {
      const workers = await ledger.listWorkers(config.staleThresholdSeconds);
      return {
        workers: workers.map((w) => ({
          id: w.id,
          host: w.host,
          pid: w.pid,
          types: w.types,
          concurrency: w.concurrency,
          in_flight: w.heldJobs,
          fenced_writes: w.fencedWrites,
          started_at: w.startedAt.toISOString(),
          heartbeat_at: w.heartbeatAt.toISOString(),
        })),
      };
    },
  );
};
