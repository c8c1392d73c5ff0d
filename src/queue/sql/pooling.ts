/**
 * Statements of the pooling probe (src/queue/pooling.ts). Plain text, sent with the simple query
 * protocol: a named statement is exactly what a transaction pooler cannot carry between clients.
 */

/** The server process of the session that runs it: one row, `pid`. */
export const probeBackendPid = "SELECT pg_backend_pid() AS pid";

/** Opens a transaction block; a statement-mode pooler refuses it. */
export const probeBegin = "BEGIN";

/** Ends the block {@link probeBegin} opened. */
export const probeCommit = "COMMIT";
