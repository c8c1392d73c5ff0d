/**
 * The API's bound on database calls: every {@link Ledger} method a route calls answers within
 * `apiTimeoutSeconds`, or rejects with a {@link DatabaseUnavailableError} (answered 503 with
 * `Retry-After`, see problem.ts). The call itself goes on until its own deadlines end it (the
 * pool's connect timeout, statement timeout and query deadline, db/pool.ts); only the wait of the
 * request is cut. A write cut off this way may still commit.
 */
import { withDeadline as withDeadlineOf } from "../db/pool.js";
import { DatabaseUnavailableError } from "../errors.js";
import type { Ledger } from "../queue/ledger.js";

/**
 * Settles like `promise`, or rejects with a {@link DatabaseUnavailableError} naming `what` once
 * `timeoutMs` have passed first. A late rejection of `promise` is swallowed (it was answered).
 */
export function withDeadline<T>(promise: Promise<T>, timeoutMs: number, what: string): Promise<T> {
  return withDeadlineOf(
    promise,
    timeoutMs,
    () => new DatabaseUnavailableError(`the database did not answer within ${timeoutMs / 1000} s (${what})`),
  );
}

/**
 * Methods with a bound of their own, longer than `apiTimeoutSeconds` on purpose: a long-poll
 * (GET /jobs/{id}?wait=, at most `LIMITS.waitSeconds`; its reads go through the pool's deadlines).
 */
const OWN_BOUND: ReadonlySet<string | symbol> = new Set(["waitForJob"]);

/**
 * A view of `ledger` whose promise-returning methods are each bounded by `timeoutMs`
 * ({@link withDeadline}); everything else (properties, synchronous methods) is the ledger's own.
 */
export function boundedLedger(ledger: Ledger, timeoutMs: number): Ledger {
  return new Proxy(ledger, {
    get(target, property) {
      const value: unknown = Reflect.get(target, property, target);
      if (typeof value !== "function") return value;
      if (OWN_BOUND.has(property)) return value.bind(target);
      return (...args: unknown[]) => {
        const result: unknown = (value as (...a: unknown[]) => unknown).apply(target, args);
        return result instanceof Promise ? withDeadline(result, timeoutMs, "apiTimeoutSeconds") : result;
      };
    },
  });
}
