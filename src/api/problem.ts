/**
 * RFC 9457 problem details for every error the API answers with (DESIGN.md §8).
 *
 * Mapping, in order:
 * - request validation failure (path, query or body schema) → 422, one entry per bad field;
 * - {@link JobValidationError} from the ledger → 422 with its problems;
 * - {@link BatchTooLargeError} (more jobs than `LIMITS.batchJobs`) → 422 naming `jobs`;
 * - {@link QueueFullError} (a pending-jobs cap reached) → 429, naming the cap and the type;
 * - {@link JobNotFoundError}, {@link DeadLetterNotFoundError}, {@link ScheduleNotFoundError} → 404; {@link JobStateConflictError},
 *   {@link IdempotencyConflictError} → 409;
 * - PostgreSQL data exceptions (SQLSTATE class 22), integrity violations (23) and program limits
 *   (54, e.g. a payload nested too deep) → 422. The ledger validates before it writes, so these
 *   should not happen; they are a second line of defence so that bad input never yields a 500;
 * - the database unreachable (connection errors, SQLSTATE classes 08, 53, 57P0x) → 503;
 * - the database not answering in time ({@link DatabaseUnavailableError}: connect, acquisition or
 *   query deadline, the API's `apiTimeoutSeconds`; pg's "Query read timeout"; the server's
 *   statement_timeout, SQLSTATE 57014) → 503 with `Retry-After`;
 * - Fastify's own client errors keep their status: malformed JSON → 400, body too large → 413,
 *   unsupported content type → 415, ...;
 * - anything else → 500 with a generic detail (the error is logged, never sent).
 */
import { STATUS_CODES } from "node:http";
import type { FastifyError, FastifyInstance, FastifyReply, FastifyRequest } from "fastify";
import {
  BatchTooLargeError,
  DatabaseUnavailableError,
  DeadLetterNotFoundError,
  type FieldProblem,
  IdempotencyConflictError,
  JobNotFoundError,
  JobStateConflictError,
  JobValidationError,
  PoolTimeoutError,
  QueueFullError,
  ScheduleNotFoundError,
} from "../errors.js";
import { JOB_CONSTRAINTS, LIMITS, wireName } from "../queue/job-shape.js";
import type { Problem } from "./schemas.js";

/** Media type of every error response. */
export const PROBLEM_CONTENT_TYPE = "application/problem+json";

/**
 * Problem type URIs (the `type` member). They identify the kind of problem; they are names, not
 * documents to fetch.
 */
export const PROBLEM_TYPES = {
  invalidInput: "urn:taskqueue:problem:invalid-input",
  malformedRequest: "urn:taskqueue:problem:malformed-request",
  notFound: "urn:taskqueue:problem:not-found",
  jobNotFound: "urn:taskqueue:problem:job-not-found",
  jobStateConflict: "urn:taskqueue:problem:job-state-conflict",
  deadLetterNotFound: "urn:taskqueue:problem:dead-letter-not-found",
  scheduleNotFound: "urn:taskqueue:problem:schedule-not-found",
  idempotencyConflict: "urn:taskqueue:problem:idempotency-conflict",
  bodyTooLarge: "urn:taskqueue:problem:body-too-large",
  unsupportedMediaType: "urn:taskqueue:problem:unsupported-media-type",
  databaseUnavailable: "urn:taskqueue:problem:database-unavailable",
  queueFull: "urn:taskqueue:problem:queue-full",
  serverBusy: "urn:taskqueue:problem:server-busy",
  notReady: "urn:taskqueue:problem:not-ready",
  internal: "urn:taskqueue:problem:internal-error",
  http: "about:blank",
} as const;

/** Most `errors` entries one response carries. */
const MAX_FIELD_PROBLEMS = LIMITS.fieldProblems;

/** An error a route throws to answer with a given problem (e.g. 503 from /ready). */
export class HttpProblem extends Error {
  constructor(
    readonly status: number,
    readonly type: string,
    readonly title: string,
    readonly detail: string,
    readonly errors?: FieldProblem[],
  ) {
    super(detail);
    this.name = "HttpProblem";
  }
}

/** A validation error as Fastify attaches it (Ajv's shape, or the TypeBox compiler's in validation.ts). */
interface ValidationEntry {
  instancePath?: string;
  message?: string;
  params?: Record<string, unknown>;
}

/** What part of the request failed validation, as Fastify names it. */
type ValidationContext = "body" | "params" | "querystring" | "headers" | string;

function unescapePointer(segment: string): string {
  return segment.replaceAll("~1", "/").replaceAll("~0", "~");
}

/**
 * Field name of a validation error: the JSON pointer without its leading slash (`jobs/3/type`),
 * extended by Ajv's `missingProperty` / `additionalProperty` when present; the request part
 * (`body`, `querystring`) when the whole part is at fault.
 */
export function validationField(entry: ValidationEntry, context: ValidationContext | undefined): string {
  const segments = (entry.instancePath ?? "").split("/").slice(1).map(unescapePointer);
  const named = entry.params?.missingProperty ?? entry.params?.additionalProperty;
  if (typeof named === "string") segments.push(named);
  const field = segments.join("/");
  return field === "" ? (context ?? "body") : field;
}

function validationProblems(
  entries: readonly ValidationEntry[],
  context: string | undefined,
): FieldProblem[] {
  return entries.slice(0, MAX_FIELD_PROBLEMS).map((entry) => ({
    field: validationField(entry, context),
    message: entry.message ?? "is invalid",
  }));
}

/** Wire names of the fields the jobs table's CHECK constraints bound (job-shape.ts), for the class-23 fallback. */
const CONSTRAINT_FIELDS: Record<string, string> = Object.fromEntries(
  Object.entries(JOB_CONSTRAINTS).map(([constraint, { field }]) => [constraint, wireName(field)]),
);

interface DatabaseErrorLike {
  code: string;
  message: string;
  constraint?: string;
}

/** True for an error reported by the PostgreSQL server (it carries a SQLSTATE and a severity). */
function isDatabaseError(error: unknown): error is DatabaseErrorLike {
  if (typeof error !== "object" || error === null) return false;
  const { code, severity } = error as { code?: unknown; severity?: unknown };
  return typeof code === "string" && /^[0-9A-Z]{5}$/.test(code) && typeof severity === "string";
}

const CONNECTION_ERROR_CODES = new Set([
  "ECONNREFUSED",
  "ECONNRESET",
  "ETIMEDOUT",
  "ENOTFOUND",
  "EPIPE",
  "EAI_AGAIN",
]);

/** True if the database could not be reached or went away (not the request's fault). */
function isConnectionError(error: unknown): boolean {
  if (isDatabaseError(error)) {
    return error.code.startsWith("08") || error.code.startsWith("53") || /^57P0[1-3]$/.test(error.code);
  }
  if (!(error instanceof Error)) return false;
  const code = (error as { code?: unknown }).code;
  if (typeof code === "string" && CONNECTION_ERROR_CODES.has(code)) return true;
  return /Connection terminated|timeout exceeded when trying to connect/i.test(error.message);
}

/**
 * True if the database did not answer in time: a {@link DatabaseUnavailableError} (connect or
 * acquisition timeout, query deadline, the API's own deadline), pg's "Query read timeout" from a
 * pool that is not taskqueue's, or the server's `statement_timeout` (SQLSTATE 57014).
 */
function isDatabaseDeadlineError(error: unknown): boolean {
  if (error instanceof DatabaseUnavailableError) return true;
  if (isDatabaseError(error)) return error.code === "57014";
  return error instanceof Error && /^Query read timeout$/.test(error.message);
}

/** 503 naming the database as unavailable (sent with `Retry-After`, see {@link sendProblem}). */
function databaseUnavailable(error: unknown, instance: string): Problem {
  const reason =
    error instanceof PoolTimeoutError
      ? "no database connection became free in time"
      : "the database did not answer in time";
  return make(
    503,
    PROBLEM_TYPES.databaseUnavailable,
    "Database unavailable",
    `The database is unavailable: ${reason}; retry later. A write may or may not have been stored.`,
    instance,
  );
}

function make(
  status: number,
  type: string,
  title: string,
  detail: string,
  instance: string,
  errors?: FieldProblem[],
): Problem {
  const problem: Problem = { type, title, status, detail, instance };
  if (errors) problem.errors = errors.slice(0, MAX_FIELD_PROBLEMS);
  return problem;
}

function invalid(instance: string, errors: FieldProblem[], detail?: string): Problem {
  const fields = [...new Set(errors.map((e) => e.field))];
  return make(
    422,
    PROBLEM_TYPES.invalidInput,
    "Invalid input",
    detail ??
      (fields.length > 0
        ? `The request has ${errors.length} invalid field${errors.length === 1 ? "" : "s"}: ${fields.slice(0, 10).join(", ")}${fields.length > 10 ? ", ..." : ""}.`
        : "The request is invalid."),
    instance,
    errors,
  );
}

/**
 * The problem document for an error raised while handling `request`, per the mapping at the top
 * of this file. Never includes internal details (stack, SQL, server messages) for a 5xx.
 */
export function problemFor(error: unknown, request: FastifyRequest): Problem {
  const instance = request.url;
  if (error instanceof HttpProblem) {
    return make(error.status, error.type, error.title, error.detail, instance, error.errors);
  }
  const fastifyError = error as Partial<FastifyError> & { validationContext?: string };
  if (Array.isArray(fastifyError.validation)) {
    return invalid(instance, validationProblems(fastifyError.validation, fastifyError.validationContext));
  }
  if (error instanceof JobValidationError) return invalid(instance, error.problems);
  if (error instanceof BatchTooLargeError)
    return invalid(instance, [{ field: "jobs", message: `must be an array of 1 to ${error.max} items` }]);
  if (error instanceof QueueFullError) {
    // The Retry-After header is set by the route (routes/jobs.ts), which sees the error first.
    return make(429, PROBLEM_TYPES.queueFull, "Queue full", `${error.message}.`, instance);
  }
  if (error instanceof JobNotFoundError) {
    return make(404, PROBLEM_TYPES.jobNotFound, "Job not found", error.message, instance);
  }
  if (error instanceof JobStateConflictError) {
    return make(409, PROBLEM_TYPES.jobStateConflict, "Job state conflict", error.message, instance);
  }
  if (error instanceof DeadLetterNotFoundError) {
    return make(404, PROBLEM_TYPES.deadLetterNotFound, "Dead letter not found", error.message, instance);
  }
  if (error instanceof ScheduleNotFoundError) {
    return make(404, PROBLEM_TYPES.scheduleNotFound, "Schedule not found", error.message, instance);
  }
  if (error instanceof IdempotencyConflictError) {
    return make(
      409,
      PROBLEM_TYPES.idempotencyConflict,
      "Idempotency key conflict",
      `${error.message}.`,
      instance,
      [
        {
          field: error.field,
          message: `is taken by job ${error.jobId}, enqueued with a different body`,
        },
      ],
    );
  }
  if (isDatabaseDeadlineError(error)) return databaseUnavailable(error, instance);
  if (isConnectionError(error)) {
    return make(
      503,
      PROBLEM_TYPES.databaseUnavailable,
      "Database unavailable",
      "The database cannot be reached right now; retry later.",
      instance,
    );
  }
  if (isDatabaseError(error)) {
    const cls = error.code.slice(0, 2);
    if (cls === "23") {
      const field = error.constraint ? CONSTRAINT_FIELDS[error.constraint] : undefined;
      const errors = field ? [{ field, message: "is out of the allowed range" }] : [];
      return invalid(instance, errors, "A value in the request violates a constraint of the job ledger.");
    }
    if (cls === "22" || cls === "54") {
      return invalid(instance, [], `The database refused a value in the request: ${error.message}.`);
    }
  }
  const status = typeof fastifyError.statusCode === "number" ? fastifyError.statusCode : 500;
  if (status >= 400 && status < 500) {
    const title = STATUS_CODES[status] ?? "Client error";
    const type =
      status === 413
        ? PROBLEM_TYPES.bodyTooLarge
        : status === 415
          ? PROBLEM_TYPES.unsupportedMediaType
          : status === 400
            ? PROBLEM_TYPES.malformedRequest
            : PROBLEM_TYPES.http;
    let detail = fastifyError.message || title;
    if (status === 415) detail = `${detail}: send the body as application/json.`;
    // A path that is not percent-encoded UTF-8 (`/jobs/%FF`) fails before routing: name the path.
    if (fastifyError.code === "FST_ERR_BAD_URL")
      return make(status, type, title, detail, instance, [
        { field: "path", message: "is not valid percent-encoded UTF-8" },
      ]);
    return make(status, type, title, detail, instance);
  }
  return make(
    500,
    PROBLEM_TYPES.internal,
    "Internal Server Error",
    "The server failed to handle the request. The fault is logged.",
    instance,
  );
}

/** Sends `problem` as `application/problem+json` with its status. */
export function sendProblem(reply: FastifyReply, problem: Problem): FastifyReply {
  if (problem.status === 503) reply.header("retry-after", "5");
  return reply.code(problem.status).type(PROBLEM_CONTENT_TYPE).send(problem);
}

/**
 * Installs the error handler, the not-found handler and the framework-error hook of `app` so that
 * every error answer is problem+json. 5xx answers are logged at error level with the cause.
 */
export function registerProblemHandling(app: FastifyInstance): void {
  app.setErrorHandler((error, request, reply) => {
    const problem = problemFor(error, request);
    if (problem.status >= 500) request.log.error({ err: error }, "request failed");
    else request.log.debug({ status: problem.status, detail: problem.detail }, "request refused");
    return sendProblem(reply, problem);
  });
  app.setNotFoundHandler((request, reply) =>
    sendProblem(
      reply,
      make(
        404,
        PROBLEM_TYPES.notFound,
        "Not Found",
        `No route ${request.method} ${request.url.split("?")[0]}.`,
        request.url,
      ),
    ),
  );
}
