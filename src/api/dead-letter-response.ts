/**
 * A dead-letter entry's wire shape and the answers of the /dead-letters routes (DESIGN.md §8):
 * {@link DeadLetterResponse} and {@link toDeadLetterResponse}, the one mapping from the library's
 * {@link DeadLetterJob} to it. Re-exported by schemas.ts.
 */
import { type Static, Type } from "@sinclair/typebox";
import { LIMITS } from "../queue/job-shape.js";
import type { DeadLetterJob } from "../queue/types.js";
import { AttemptErrorSchema, JobResponse, nullable } from "./job-response.js";

/** A dead-letter entry as the API returns it. */
export const DeadLetterResponse = Type.Object(
  {
    job_id: Type.Integer({ minimum: 1 }),
    type: Type.String(),
    payload: Type.Unknown({ description: "The payload the job died with." }),
    priority: Type.Integer({ minimum: LIMITS.priority.min, maximum: LIMITS.priority.max }),
    max_retries: Type.Integer({ minimum: LIMITS.maxRetries.min, maximum: LIMITS.maxRetries.max }),
    error: nullable(Type.String({ description: "The final error." })),
    attempts: Type.Integer({ minimum: 0, description: "Failed attempts when it died." }),
    errors: Type.Array(AttemptErrorSchema, { description: "Every failed attempt, oldest first." }),
    worker_id: nullable(Type.String({ description: "The worker of the last attempt." })),
    created_at: Type.String({
      format: "date-time",
      description: "When the job was created (ISO-8601, UTC).",
    }),
    died_at: Type.String({ format: "date-time", description: "When it died (ISO-8601, UTC)." }),
    replayed_at: nullable(
      Type.String({
        format: "date-time",
        description: "When it was last replayed; null while the job waits dead.",
      }),
    ),
    replays: Type.Integer({ minimum: 0, description: "How many times it was replayed." }),
    payload_omitted: Type.Optional(
      Type.Boolean({
        description: `In lists only: the payload is over ${LIMITS.listValueBytes / 1024} KiB and left out (null); GET /dead-letters/{job_id} has it.`,
      }),
    ),
  },
  { description: "A dead-letter entry: a job that exhausted its retries, or failed permanently." },
);
export type DeadLetterResponse = Static<typeof DeadLetterResponse>;

/** Maps a dead-letter entry to its wire shape (snake_case, ISO-8601 timestamps). */
export function toDeadLetterResponse(entry: DeadLetterJob): DeadLetterResponse {
  const response: DeadLetterResponse = {
    job_id: entry.jobId,
    type: entry.type,
    payload: entry.payload,
    priority: entry.priority,
    max_retries: entry.maxRetries,
    error: entry.error,
    attempts: entry.attempts,
    errors: entry.errors,
    worker_id: entry.workerId,
    created_at: entry.createdAt.toISOString(),
    died_at: entry.diedAt.toISOString(),
    replayed_at: entry.replayedAt?.toISOString() ?? null,
    replays: entry.replays,
  };
  if (entry.payloadOmitted) response.payload_omitted = true;
  return response;
}

/** Response of GET /dead-letters. */
export const DeadLetterListResponse = Type.Object({
  dead_letters: Type.Array(DeadLetterResponse, { description: "Newest death first." }),
  limit: Type.Integer(),
  offset: Type.Integer(),
});

/** Response of POST /dead-letters/{job_id}/replay. */
export const ReplayResponse = Type.Object({
  replayed: Type.Boolean({
    description:
      "True if this call sent the job back to pending; false if it was no longer dead (replayed already).",
  }),
  job: nullable(JobResponse),
});

/** Response of a bulk replay or discard. */
export const DeadLetterBatchResponse = Type.Object({
  job_ids: Type.Array(Type.Integer(), {
    description: "The jobs replayed (or whose entries were discarded) by this call, ascending.",
  }),
  more: Type.Boolean({ description: "The batch was full: more entries may match; call again." }),
});
