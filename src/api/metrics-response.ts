/** TypeBox schema of GET /metrics's answer (DESIGN.md §8), re-exported by schemas.ts. */
import { type Static, Type } from "@sinclair/typebox";
import { JOB_STATUSES } from "../queue/types.js";
import { nullable } from "./job-response.js";

/** Response of GET /metrics. Rates cover the trailing `window_seconds`. */
export const MetricsResponse = Type.Object({
  queue_depth: Type.Object(
    Object.fromEntries(JOB_STATUSES.map((status) => [status, Type.Integer({ minimum: 0 })])) as Record<
      (typeof JOB_STATUSES)[number],
      ReturnType<typeof Type.Integer>
    >,
    { description: "Jobs per status, every worker process on every host." },
  ),
  active_workers: Type.Integer({
    description: "Worker lock sessions (one per worker process, or per lane) with a fresh heartbeat.",
  }),
  jobs_per_second: Type.Number({ description: "Jobs completed per second over the trailing window." }),
  error_rate: Type.Number({
    description: "Failed attempts / finished attempts over the window (0 when none).",
  }),
  average_execution_seconds: nullable(
    Type.Number({ description: "Mean execution time of jobs completed in the window; null when none." }),
  ),
  execution_seconds: Type.Object(
    {
      p50: nullable(Type.Number()),
      p90: nullable(Type.Number()),
      p99: nullable(Type.Number()),
      samples: Type.Integer({ description: "Jobs completed in the window, which the quantiles describe." }),
    },
    {
      description:
        "Execution-time quantiles of the jobs completed in the trailing window, seconds, estimated from a " +
        "histogram with eight bins per doubling (within 9 %; exact when a bin's jobs took the same time).",
    },
  ),
  dead_letter_count: Type.Integer({
    description: "Dead-letter entries whose job waits dead (not replayed since it died).",
  }),
  fenced_writes: Type.Integer({
    description: "Late writes refused by the claim fence, summed over live workers.",
  }),
  window_seconds: Type.Number({ description: "Length of the trailing window of the rates." }),
  paused_types: Type.Array(
    Type.Object({ type: Type.String(), paused_at: Type.String({ format: "date-time" }) }),
    { description: "Paused types (no worker claims their jobs), in type order (POST /types/{type}/pause)." },
  ),
  type_limits: Type.Array(
    Type.Object({
      type: Type.String(),
      max_running: nullable(Type.Integer({ description: "At most this many held at once; null: unset." })),
      rate_per_second: nullable(
        Type.Number({ description: "At most this many starts per second; null: unset." }),
      ),
      burst: nullable(Type.Integer({ description: "The token bucket as set; null: ceil(rate_per_second)." })),
    }),
    { description: "Types with global limits (PUT /types/{type}/limit), in type order." },
  ),
  unhandled_types: Type.Array(
    Type.Object({
      type: Type.String(),
      pending: Type.Integer({ description: "Pending jobs of the type." }),
      oldest_pending_age_seconds: nullable(
        Type.Number({
          description: "Seconds since the oldest due pending job became due; null when none is due.",
        }),
      ),
    }),
    { description: "Types with pending jobs that no live worker claims: nobody will run them." },
  ),
});
export type MetricsResponse = Static<typeof MetricsResponse>;
