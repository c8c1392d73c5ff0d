/**
 * Job catalogs (issue 13 item 1): job types with TypeBox schemas. A catalog types the queue like a
 * job map (map.ts) and also checks every payload at enqueue, through the library and the HTTP API:
 *
 * ```ts
 * const jobs = defineJobs({
 *   send_email: defineJob(Type.Object({ to: Type.String({ format: "email" }) })),
 *   resize: defineJob(Type.Object({ url: Type.String() }), Type.Object({ bytes: Type.Integer() })),
 * });
 * const queue = new TaskQueue({ databaseUrl, jobs }); // TaskQueue<CatalogJobs<typeof jobs>>
 * await queue.addJob({ type: "send_email", payload: { to: 42 } }); // compile error, and at run time
 * // a JobValidationError naming payload/to (HTTP 422 through buildApp({ ledger: queue.ledger, … }))
 * ```
 */
import type { Static, TSchema } from "@sinclair/typebox";
import { type TypeCheck, TypeCompiler } from "@sinclair/typebox/compiler";
import type { FieldProblem } from "../errors.js";
import type { PayloadChecker } from "../queue/enqueue.js";
import type { JobSpec } from "../queue/types.js";
import type { JobType } from "./map.js";

/** One job type's schemas, made by {@link defineJob}. */
export interface JobDefinition<
  P extends TSchema = TSchema,
  R extends TSchema | undefined = TSchema | undefined,
> {
  /** Checked at enqueue: a payload it refuses is a `JobValidationError` naming the field. */
  readonly payload: P;
  /** Types the handler's result; not checked at run time. */
  readonly result: R;
}

/** The job map a catalog stands for: each type's payload and result as TypeBox's `Static` of its schemas. */
export type CatalogJobs<C> = C extends JobCatalog<infer M> ? M : never;

/** The job map of a record of definitions. */
export type DefinitionsMap<D extends Record<string, JobDefinition>> = {
  [K in keyof D]: JobType<
    Static<D[K]["payload"]>,
    D[K]["result"] extends TSchema ? Static<D[K]["result"]> : unknown
  >;
};

/**
 * A job type's definition: the payload's TypeBox schema (checked at enqueue) and, optionally,
 * the result's (typing only).
 */
export function defineJob<P extends TSchema, R extends TSchema | undefined = undefined>(
  payload: P,
  result?: R,
): JobDefinition<P, R> {
  return Object.freeze({ payload, result: result as R });
}

/** Most problems one payload reports (a large payload wrong everywhere would otherwise list thousands). */
const MAX_PROBLEMS_PER_PAYLOAD = 10;

/**
 * A set of job types and their schemas, made by {@link defineJobs}. Pass it as `jobs` to
 * `new TaskQueue(…)`: the queue is typed by it and its ledger checks payloads at enqueue. A type
 * the catalog does not define is enqueued unchecked (set `allowedJobTypes` to refuse it).
 */
export class JobCatalog<M extends object> implements PayloadChecker {
  /** Phantom: the job map this catalog types a queue with. Never set. */
  declare readonly jobs: M;
  private readonly compiled = new Map<string, TypeCheck<TSchema>>();

  constructor(readonly definitions: Readonly<Record<string, JobDefinition>>) {}

  /** The job types it defines, sorted. */
  types(): string[] {
    return Object.keys(this.definitions).sort();
  }

  /**
   * Checks each spec's payload against its type's schema (a missing payload is `{}`, as at
   * enqueue). Field names are `payload/<path>`, prefixed `jobs/<index>/` in a batch.
   * @returns every problem found (empty: all valid).
   */
  checkPayloads(specs: readonly JobSpec[], batch: boolean): FieldProblem[] {
    const problems: FieldProblem[] = [];
    specs.forEach((spec, index) => {
      const check = this.checker(spec.type);
      if (!check) return;
      const payload = spec.payload === undefined ? {} : spec.payload;
      if (check.Check(payload)) return;
      const prefix = batch ? `jobs/${index}/payload` : "payload";
      const seen = new Set<string>();
      for (const error of check.Errors(payload)) {
        if (seen.has(error.path)) continue;
        seen.add(error.path);
        problems.push({ field: `${prefix}${error.path}`, message: error.message.toLowerCase() });
        if (seen.size >= MAX_PROBLEMS_PER_PAYLOAD) break;
      }
    });
    return problems;
  }

  /** The compiled check of a type's payload schema (compiled on first use), or undefined. */
  private checker(type: string): TypeCheck<TSchema> | undefined {
    let check = this.compiled.get(type);
    if (check) return check;
    if (!Object.hasOwn(this.definitions, type)) return undefined;
    check = TypeCompiler.Compile((this.definitions[type] as JobDefinition).payload);
    this.compiled.set(type, check);
    return check;
  }
}

/** A catalog of job definitions: `defineJobs({ send_email: defineJob(Type.Object({ to: Type.String() })) })`. */
export function defineJobs<D extends Record<string, JobDefinition>>(
  definitions: D,
): JobCatalog<DefinitionsMap<D>> {
  return new JobCatalog<DefinitionsMap<D>>(Object.freeze({ ...definitions }));
}
