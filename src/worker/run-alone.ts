/**
 * Running alone (DESIGN.md §6): a job reclaimed from a lost worker process is flagged `run_alone`,
 * and a worker process runs such a job only while it holds no other job, across all its lanes, and
 * claims nothing else until that job's outcome is written. This gate is shared by the dispatchers
 * of one worker process (worker.ts) and decides, for each claim one of them is about to send, what
 * it may claim:
 * - `none` while another lane claims or runs a run-alone job, or while run-alone jobs are due and
 *   the process still holds jobs (it drains: the lanes stop claiming until what they hold is done);
 * - `alone` once run-alone jobs are due and the process holds nothing: that lane becomes the
 *   gate's owner until it holds nothing again;
 * - `normal` otherwise.
 * That run-alone jobs are due is learnt from the claims themselves (`LockSession.claimReporting`):
 * every ordinary claim reports it, and a claim for a run-alone job that finds none clears it. So a
 * busy process gets to a due run-alone job within the time its held jobs take to finish.
 */

/** What a lane's dispatcher shows the gate. */
export interface RunAloneMember {
  /** True while the lane holds a job (buffered, running, outcome not yet written) or claims. */
  readonly holdsJobs: boolean;
  /** Asks the lane for a claim (it asks the gate again first). */
  wake(): void;
}

/** What a lane may claim now (see the module's docstring). */
export type ClaimKind = "normal" | "alone" | "none";

export class RunAloneGate {
  private readonly members: RunAloneMember[] = [];
  /** A claim reported run-alone jobs due for this process's types. */
  private aloneDue = false;
  /** The lane claiming or running a run-alone job: every other lane claims nothing meanwhile. */
  private owner: RunAloneMember | null = null;

  /** Adds a lane to the process's gate. */
  join(member: RunAloneMember): void {
    this.members.push(member);
  }

  /** True while run-alone jobs are known to be due. */
  get due(): boolean {
    return this.aloneDue;
  }

  /** What `member` may claim now; `alone` makes it the owner until it holds nothing again. */
  claimKind(member: RunAloneMember): ClaimKind {
    this.releaseIdleOwner();
    if (this.owner !== null) return "none";
    if (!this.aloneDue) return "normal";
    if (this.members.some((m) => m.holdsJobs)) return "none";
    this.owner = member;
    return "alone";
  }

  /**
   * What a claim said: after an ordinary claim, `result` is its report (run-alone jobs due or
   * not); after a claim for a run-alone job, whether it got one (none: none is due). The claiming
   * lane calls {@link changed} once its claim is over.
   */
  report(kind: Exclude<ClaimKind, "none">, result: boolean): void {
    if (kind === "normal" || !result) this.aloneDue = result;
  }

  /**
   * A lane's holdings changed (a claim returned, an outcome was written): wakes every lane if
   * that may let one claim (the owner let go, or the process drained for a run-alone job).
   */
  changed(): void {
    const hadOwner = this.owner !== null;
    this.releaseIdleOwner();
    const drained = this.aloneDue && this.owner === null && !this.members.some((m) => m.holdsJobs);
    if ((hadOwner && this.owner === null) || drained) for (const m of this.members) m.wake();
  }

  /** The owner's run-alone job is done (or it claimed none): it owns the gate no longer. */
  private releaseIdleOwner(): void {
    if (this.owner !== null && !this.owner.holdsJobs) this.owner = null;
  }
}
