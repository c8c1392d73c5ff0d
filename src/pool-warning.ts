/** The start-up warning of `TaskQueue.startWorker` about the shared pool (src/index.ts). */

/**
 * The start-up warning for a worker whose handlers can exhaust the shared pool, or null when they
 * cannot: with `workerCount` ≥ the pool's size, handlers that each hold a client of `queue.pool` (a
 * transaction) and call `addJob` without it leave no connection for those calls, nor for anything
 * else on the pool. Such waits end after `connectTimeoutSeconds` with a `PoolTimeoutError`.
 */
export function poolStarvationWarning(workerCount: number, poolSize: number): string | null {
  if (workerCount < poolSize) return null;
  return (
    `workerCount (${workerCount}) is at least the shared pool's size (${poolSize}): handlers that hold a client of queue.pool ` +
    "and call addJob without it can take every connection and starve each other (PoolTimeoutError). " +
    "Pass {client} to addJob inside the transaction, or raise poolSize (POOL_SIZE) above workerCount"
  );
}
