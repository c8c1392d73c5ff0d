/** The API's answers, as the dashboard reads them (snake_case, ISO-8601 timestamps). */

export const STATUSES = ["pending", "claimed", "running", "done", "dead", "cancelled"] as const;

export interface AttemptError {
  attempt?: number;
  error?: string;
  worker_id?: string | null;
  failed_at?: string;
  permanent?: boolean;
}

export interface Job {
  id: number;
  type: string;
  payload: unknown;
  status: string;
  priority: number;
  attempt: number;
  max_retries: number;
  run_at: string;
  claimed_at: string | null;
  started_at: string | null;
  heartbeat_at: string | null;
  completed_at: string | null;
  result: unknown;
  error: string | null;
  errors: AttemptError[];
  worker_id: string | null;
  created_at: string;
  payload_omitted?: boolean;
  result_omitted?: boolean;
}

export interface Metrics {
  queue_depth: Record<string, number>;
  active_workers: number;
  jobs_per_second: number;
  error_rate: number;
  dead_letter_count: number;
  window_seconds: number;
  execution_seconds: { p50: number | null; p90: number | null; p99: number | null; samples: number };
}

export interface TypeDepth {
  type: string;
  pending: number;
  due: number;
  claimed: number;
  running: number;
  oldest_due_seconds: number | null;
  next_run_at: string | null;
  live_workers: number;
}

export interface ThroughputMinute {
  minute: string;
  done: number;
  failed: number;
  exec_seconds: number;
}

export interface Worker {
  id: string;
  host: string;
  pid: number;
  types: string[];
  concurrency: number;
  in_flight: number;
  started_at: string;
  heartbeat_at: string;
}

export interface DeadLetter {
  job_id: number;
  type: string;
  payload: unknown;
  error: string | null;
  attempts: number;
  errors: AttemptError[];
  worker_id: string | null;
  created_at: string;
  died_at: string;
  replayed_at: string | null;
  replays: number;
}

/** A type's pause state, from GET /types (read leniently: the route came with job control). */
export interface TypeState {
  type: string;
  paused: boolean;
}

/** Reads GET /types's answer: `{types: [...]}` or an array, each `{type|name, paused|paused_at}`. */
export function readTypeStates(answer: unknown): TypeState[] {
  const list = Array.isArray(answer) ? answer : ((answer as { types?: unknown[] } | null)?.types ?? []);
  return list.flatMap((entry) => {
    if (typeof entry !== "object" || entry === null) return [];
    const e = entry as Record<string, unknown>;
    const type = typeof e.type === "string" ? e.type : typeof e.name === "string" ? e.name : null;
    if (type === null) return [];
    const paused =
      typeof e.paused === "boolean" ? e.paused : e.paused_at !== null && e.paused_at !== undefined;
    return [{ type, paused }];
  });
}
