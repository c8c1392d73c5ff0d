/**
 * The ledger's checks of its arguments beyond one job spec (validate.ts): job ids, batches, list
 * queries and the allow-list of job types. Each throws a {@link JobValidationError} naming every
 * bad field before anything is sent to the database.
 */
import { BatchTooLargeError, type FieldProblem, JobValidationError } from "../errors.js";
import { integerRangeMessage, LIMITS } from "./job-shape.js";
import { JOB_STATUSES, type JobSpec, type ListJobsQuery } from "./types.js";
import { type FieldNaming, type NormalizedJobSpec, validateJobSpec } from "./validate.js";

/** @throws {JobValidationError} naming `id` unless it is a positive safe integer. */
export function checkJobId(id: number): void {
  if (!Number.isSafeInteger(id) || id < 1)
    throw new JobValidationError([{ field: "id", message: "must be a positive integer" }]);
}

/**
 * Validates a batch of specs, field names prefixed `jobs/<index>/`.
 * @throws {BatchTooLargeError} for more than `LIMITS.batchJobs` specs.
 * @throws {JobValidationError} listing every bad field of every spec.
 */
export function validateBatch(specs: readonly JobSpec[], naming?: FieldNaming): NormalizedJobSpec[] {
  if (specs.length > LIMITS.batchJobs) throw new BatchTooLargeError(specs.length, LIMITS.batchJobs);
  const problems: FieldProblem[] = [];
  const jobs: NormalizedJobSpec[] = [];
  specs.forEach((spec, index) => {
    try {
      jobs.push(validateJobSpec(spec, `jobs/${index}/`, naming));
    } catch (error) {
      if (error instanceof JobValidationError) problems.push(...error.problems);
      else throw error;
    }
  });
  if (problems.length > 0) throw new JobValidationError(problems);
  return jobs;
}

/**
 * Checks the filters and page of a job list.
 * @throws {JobValidationError} for an unknown status, limit outside `LIMITS.listLimit` (1–1000), negative offset or invalid date.
 */
export function checkListQuery(query: ListJobsQuery): void {
  const problems: FieldProblem[] = [];
  const { limit = LIMITS.listLimit.default, offset = 0, status, createdAfter } = query;
  if (status !== undefined && !JOB_STATUSES.includes(status))
    problems.push({ field: "status", message: `must be one of ${JOB_STATUSES.join(", ")}` });
  if (!Number.isInteger(limit) || limit < LIMITS.listLimit.min || limit > LIMITS.listLimit.max)
    problems.push({ field: "limit", message: integerRangeMessage(LIMITS.listLimit) });
  if (!Number.isInteger(offset) || offset < 0)
    problems.push({ field: "offset", message: "must be an integer ≥ 0" });
  if (createdAfter !== undefined && !(createdAfter instanceof Date && !Number.isNaN(createdAfter.getTime())))
    problems.push({ field: "created_after", message: "must be a valid date" });
  if (problems.length > 0) throw new JobValidationError(problems);
}

/**
 * The allow-list check of enqueued types (`allowedJobTypes`, issue 14 item 6): a problem naming
 * `<prefix>type` for each job whose type is not on `allowed`.
 * @throws {JobValidationError} listing every job of another type.
 */
export function checkAllowedTypes(
  jobs: readonly NormalizedJobSpec[],
  allowed: ReadonlySet<string>,
  batch: boolean,
): void {
  const problems: FieldProblem[] = [];
  jobs.forEach((job, i) => {
    if (allowed.has(job.type)) return;
    const names = [...allowed];
    const list = names.length <= 10 ? names.join(", ") : `${names.slice(0, 10).join(", ")}, …`;
    problems.push({
      field: batch ? `jobs/${i}/type` : "type",
      message: `is not an allowed job type (allowed: ${list})`,
    });
  });
  if (problems.length > 0) throw new JobValidationError(problems);
}
