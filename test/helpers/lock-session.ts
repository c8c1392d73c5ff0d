/**
 * A lock session for tests that drive the claim protocol by hand: the real {@link LockSession},
 * plus `complete`, `fail` and `release`, which write a batch and resolve once its unlock has run
 * too (the worker never waits for an unlock; a test asserting on locks must).
 */
import type { BackoffPolicy } from "../../src/queue/ledger.js";
import type {
  ClaimRef,
  Completion,
  Failure,
  LockSession,
  WriteOutcome,
  Written,
} from "../../src/queue/lock-session.js";

export interface TestLockSession extends LockSession {
  /** `writeCompletions`, resolving once the batch is also unlocked: the refused ids. */
  complete(batch: readonly Completion[]): Promise<number[]>;
  /** `writeFailures`, resolving once the batch is also unlocked: one outcome per job. */
  fail(batch: readonly Failure[], policy: BackoffPolicy): Promise<WriteOutcome[]>;
  /** `writeReleases`, resolving once the batch is also unlocked: the refused ids. */
  release(refs: readonly ClaimRef[]): Promise<number[]>;
}

/** The outcome of a write, once its unlock has run too. */
async function unlockedOutcome<T>(written: Promise<Written<T>>): Promise<T> {
  const { outcome, unlocked } = await written;
  await unlocked;
  return outcome;
}

/** Adds the write-then-await-unlock wrappers to `session`. */
export function withTestWrites(session: LockSession): TestLockSession {
  return Object.assign(session, {
    complete: (batch: readonly Completion[]) => unlockedOutcome(session.writeCompletions(batch)),
    fail: (batch: readonly Failure[], policy: BackoffPolicy) =>
      unlockedOutcome(session.writeFailures(batch, policy)),
    release: (refs: readonly ClaimRef[]) => unlockedOutcome(session.writeReleases(refs)),
  });
}
