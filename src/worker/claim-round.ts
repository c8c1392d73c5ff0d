/**
 * What a lane's claim round sends (DESIGN.md §4 "Type limits", §6): the ordinary claim for its
 * types that are not limited, and the limited claim (sql/claim-limited.ts) for those that are, or
 * the run-alone claim. Which of its types are limited the lane reads at start, at each heartbeat
 * and when a NOTIFY says a limit changed (lane.ts), never per claim: with no limited type a round
 * is the ordinary claim alone, as before limits existed.
 */
import type { ClaimResult, LimitedClaimResult, LockSession } from "../queue/lock-session.js";
import type { ClaimKind } from "./run-alone.js";

/** No wait, nothing held back: what the ordinary and run-alone claims report. */
const unlimited = (result: ClaimResult): LimitedClaimResult => ({
  jobs: result.jobs,
  aloneDue: result.aloneDue,
  waitSeconds: null,
  heldBack: false,
});

export class ClaimRound {
  /** The lane's types that are not limited (all of them until the lane reads the limits). */
  private ordinary: readonly string[];
  /** The lane's types that are limited (rows of type_limits when last read). */
  private limited: readonly string[] = [];
  /**
   * The last limited claim left due jobs of a type held back by its `max_running`: a job of this
   * lane that ends may free room, so the lane claims again once its outcomes are written.
   */
  heldBack = false;

  /** @param types the lane's types, sorted. */
  constructor(private readonly types: readonly string[]) {
    this.ordinary = types;
  }

  /** Sets which of the lane's types are limited now; returns whether that changed. */
  setLimited(limited: readonly string[]): boolean {
    const next = this.types.filter((t) => limited.includes(t));
    if (next.length === this.limited.length && next.every((t, i) => this.limited[i] === t)) return false;
    this.limited = next;
    this.ordinary = this.types.filter((t) => !next.includes(t));
    if (next.length === 0) this.heldBack = false;
    return true;
  }

  /**
   * Claims up to `free` jobs (one for `alone`): the limited claim first (its room is bounded by the
   * limits), then the ordinary claim for what is left of `free`. Their jobs in that order.
   * @throws the claim's error (the caller then drops the session, which releases every lock it
   * took, the first claim's included).
   */
  async claim(
    session: LockSession,
    kind: Exclude<ClaimKind, "none">,
    free: number,
  ): Promise<LimitedClaimResult> {
    if (kind === "alone") {
      const job = await session.claimAlone(this.types);
      return unlimited({ jobs: job ? [job] : [], aloneDue: job !== null });
    }
    if (this.limited.length === 0) return unlimited(await session.claimReporting(this.types, free));
    const limited = await session.claimLimited(this.limited, free);
    this.heldBack = limited.heldBack;
    const left = free - limited.jobs.length;
    if (this.ordinary.length === 0 || left <= 0) return limited;
    const ordinary = await session.claimReporting(this.ordinary, left);
    return {
      ...limited,
      jobs: [...limited.jobs, ...ordinary.jobs],
      aloneDue: limited.aloneDue || ordinary.aloneDue,
    };
  }
}
