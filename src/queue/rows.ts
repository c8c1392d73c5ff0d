import type { AttemptError, DeadLetterJob, Job, JobStatus, JsonValue } from "./types.js";

/** A jobs row as node-postgres returns it (JOB_COLUMNS). */
export interface JobRow {
  id: number;
  type: string;
  payload: JsonValue;
  status: JobStatus;
  priority: number;
  attempt: number;
  max_retries: number;
  run_at: Date;
  claimed_at: Date | null;
  started_at: Date | null;
  heartbeat_at: Date | null;
  completed_at: Date | null;
  result: JsonValue | null;
  error: string | null;
  errors: AttemptError[];
  worker_id: string | null;
  created_at: Date;
  payload_omitted?: boolean;
  result_omitted?: boolean;
}

export function rowToJob(row: JobRow): Job {
  const omitted: Pick<Job, "payloadOmitted" | "resultOmitted"> = {};
  if (row.payload_omitted) omitted.payloadOmitted = true;
  if (row.result_omitted) omitted.resultOmitted = true;
  return {
    ...omitted,
    id: row.id,
    type: row.type,
    payload: row.payload,
    status: row.status,
    priority: row.priority,
    attempt: row.attempt,
    maxRetries: row.max_retries,
    runAt: row.run_at,
    claimedAt: row.claimed_at,
    startedAt: row.started_at,
    heartbeatAt: row.heartbeat_at,
    completedAt: row.completed_at,
    result: row.result,
    error: row.error,
    errors: row.errors,
    workerId: row.worker_id,
    createdAt: row.created_at,
  };
}

export interface DeadLetterRow {
  job_id: number;
  type: string;
  payload: JsonValue;
  priority: number;
  max_retries: number;
  error: string | null;
  attempts: number;
  errors: AttemptError[];
  worker_id: string | null;
  created_at: Date;
  died_at: Date;
}

export function rowToDeadLetter(row: DeadLetterRow): DeadLetterJob {
  return {
    jobId: row.job_id,
    type: row.type,
    payload: row.payload,
    priority: row.priority,
    maxRetries: row.max_retries,
    error: row.error,
    attempts: row.attempts,
    errors: row.errors,
    workerId: row.worker_id,
    createdAt: row.created_at,
    diedAt: row.died_at,
  };
}
