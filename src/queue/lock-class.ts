import { createHash } from "node:crypto";

/**
 * The advisory-lock class of a schema: the first four bytes of SHA-256("taskqueue:" + schema), as
 * a signed int32. Every lock taskqueue takes is the two-key form (class, objid): job locks use
 * objid = job id mod 2^31, the migration lock objid -1. Two schemas in one database get different
 * classes, and no single-bigint-key lock of another application can meet ours.
 */
export function lockClassFor(schema: string): number {
  return createHash("sha256").update(`taskqueue:${schema}`).digest().readInt32BE(0);
}
