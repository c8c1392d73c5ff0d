/**
 * Typed jobs: the job-map types (compile-time payload and result types per job type) and the
 * catalog of TypeBox definitions that validates payloads at run time. Re-exported by the package
 * root; the README shows usage.
 */
export {
  type CatalogJobs,
  type DefinitionsMap,
  defineJob,
  defineJobs,
  JobCatalog,
  type JobDefinition,
} from "./catalog.js";
export type {
  JobMap,
  JobType,
  JobTypeName,
  PayloadOf,
  ResultOf,
  TypedHandlerJob,
  TypedJobHandler,
  TypedJobSpec,
  TypedRegisteredHandler,
  UntypedJobs,
} from "./map.js";
