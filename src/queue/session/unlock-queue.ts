/**
 * The unlock queue of a lock session: releases of advisory locks whose outcome has committed,
 * waiting for the lock connection. Most of them ride on the next claim (one round trip per batch
 * instead of two); those that wake workers go out alone.
 */
import { LockSessionLostError } from "../../errors.js";
import { unlockJobs } from "../sql/finish.js";
import { numberArray } from "../sql/params.js";
import type { SerialConnection } from "./connection.js";

/** An unlock waiting for the lock connection. */
interface PendingUnlock {
  ids: readonly number[];
  wakeTypes: string | null;
  /** Called first when the statement carrying the unlock returns: `error` null once released. */
  onSettled: ((error: unknown) => void) | undefined;
  resolve: () => void;
  reject: (error: unknown) => void;
}

/** The unlocks a claim takes with it: their ids, and `settle`, to call with the claim's promise. */
export interface CarriedUnlocks {
  ids: number[];
  /** Settles each carried unlock with the statement that carries it (its `onSettled` first). */
  settle: (statement: Promise<unknown>) => void;
}

export class UnlockQueue {
  private pending: PendingUnlock[] = [];

  constructor(
    private readonly locks: SerialConnection,
    private readonly schema: string,
    private readonly lockClass: number,
  ) {}

  /**
   * Queues the release of the advisory locks of `ids`, whose outcome has committed, then the wake
   * of `wakeTypes` (comma-separated; null: nobody). Calls `onSettled` once the statement that
   * carries the unlock has returned, before resolving.
   *
   * The unlock waits for the end of this event-loop turn, so that a claim asked for meanwhile can
   * carry it ({@link takeForClaim}); whatever no claim took then goes out by itself. Either way it
   * reaches the lock connection before any claim asked for later.
   */
  request(
    ids: readonly number[],
    wakeTypes: string | null,
    onSettled?: (error: unknown) => void,
  ): Promise<void> {
    return new Promise((resolve, reject) => {
      this.pending.push({ ids, wakeTypes, onSettled, resolve, reject });
      if (this.pending.length === 1) setImmediate(() => this.send(false));
    });
  }

  /**
   * Rule (b): workers are woken (NOTIFY) only after the unlock, in the same statement, and an
   * unlock that wakes goes out alone, ahead of any claim, so that a failed claim cannot roll its
   * NOTIFY back. Proved by test/worker/ordering.test.ts "a worker woken by a give-back's NOTIFY
   * claims the job at once: its lock was released first" and test/queue/claim.test.ts "an unlock
   * that wakes workers goes out ahead of the claim, so a failing claim loses neither the unlock nor
   * its NOTIFY".
   *
   * Sends, as one statement, the pending unlocks that wake workers (`wakingOnly`) or all of them.
   */
  send(wakingOnly: boolean): void {
    const requests = this.take(wakingOnly);
    if (!requests) return;
    const types = new Set(requests.flatMap((r) => (r.wakeTypes === null ? [] : r.wakeTypes.split(","))));
    settle(
      requests,
      this.locks.query({
        ...unlockJobs(this.schema),
        values: [
          numberArray(requests.flatMap((r) => r.ids)),
          this.lockClass,
          types.size > 0 ? [...types].join(",") : null,
        ],
      }),
    );
  }

  /**
   * Takes every pending unlock left for a claim to carry (call {@link send} with `wakingOnly`
   * first: those that wake never ride on a claim). Null when none is pending.
   */
  takeForClaim(): CarriedUnlocks | null {
    const requests = this.take(false);
    if (!requests) return null;
    return { ids: requests.flatMap((r) => r.ids), settle: (statement) => settle(requests, statement) };
  }

  private take(wakingOnly: boolean): PendingUnlock[] | null {
    if (this.pending.length === 0) return null;
    if (!wakingOnly) {
      const all = this.pending;
      this.pending = [];
      return all;
    }
    const waking = this.pending.filter((r) => r.wakeTypes !== null);
    if (waking.length === 0) return null;
    this.pending = this.pending.filter((r) => r.wakeTypes === null);
    return waking;
  }
}

/** Settles each of `requests` once `statement` has: every `onSettled` first, then the promises. */
function settle(requests: PendingUnlock[], statement: Promise<unknown>): void {
  const settleAll = (error: unknown) => {
    for (const r of requests) {
      try {
        r.onSettled?.(error);
      } catch {
        // A callback's failure is its own: every unlock of the statement still settles.
      }
    }
    for (const r of requests) {
      if (error === null) r.resolve();
      else r.reject(error);
    }
  };
  void statement.then(
    () => settleAll(null),
    (error: unknown) => settleAll(error ?? new LockSessionLostError("unlock failed")),
  );
}
