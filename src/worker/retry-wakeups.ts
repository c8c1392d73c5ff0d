/**
 * The wake-ups of a lane's retries. A failed attempt with a backoff sends no NOTIFY when it comes
 * due, so the lane that wrote it wakes itself at each due time it knows of, not only at the first:
 * ten jobs failing together with jittered backoffs come due at ten different times, and each is
 * claimed within a claim round trip of its time instead of at the next poll. Due times within
 * {@link COALESCE_MS} of each other share one wake-up.
 */

/** Due times closer than this share a wake-up, milliseconds; also the slack after a due time. */
const COALESCE_MS = 5;

/** Most due times kept; beyond it, the latest are left to the poll. */
const MAX_DUE_TIMES = 10_000;

/**
 * The longest delay a Node timer takes, milliseconds (2^31 - 1, about 24.8 days): a longer one
 * fires after 1 ms instead (with a TimeoutOverflowWarning). A due time further away (a type limited
 * to a tiny rate, a far backoff) is waited for in steps of at most this.
 */
export const MAX_TIMER_DELAY_MS = 2_147_483_647;

export class RetryWakeups {
  /** Due times not yet woken for, epoch milliseconds, ascending. */
  private dueAtMs: number[] = [];
  private timer: { atMs: number; handle: NodeJS.Timeout } | null = null;

  /** @param wake asks the lane for a claim (called once per wake-up). */
  constructor(private readonly wake: () => void) {}

  /** Wakes the lane `seconds` from now (plus a few milliseconds), and at every other due time. */
  add(seconds: number): void {
    const atMs = Date.now() + seconds * 1000;
    const i = this.insertionPoint(atMs);
    const near = (j: number) =>
      j >= 0 && j < this.dueAtMs.length && Math.abs((this.dueAtMs[j] as number) - atMs) < COALESCE_MS;
    if (near(i) || near(i - 1)) return;
    if (this.dueAtMs.length >= MAX_DUE_TIMES) {
      if (i >= this.dueAtMs.length) return;
      this.dueAtMs.pop();
    }
    this.dueAtMs.splice(i, 0, atMs);
    this.arm();
  }

  /** Forgets every due time (the lane stops: nothing is left to wake). */
  cancel(): void {
    if (this.timer) clearTimeout(this.timer.handle);
    this.timer = null;
    this.dueAtMs = [];
  }

  /** The first index whose due time is not before `atMs` (binary search). */
  private insertionPoint(atMs: number): number {
    let low = 0;
    let high = this.dueAtMs.length;
    while (low < high) {
      const mid = (low + high) >>> 1;
      if ((this.dueAtMs[mid] as number) < atMs) low = mid + 1;
      else high = mid;
    }
    return low;
  }

  /** Keeps one timer armed for the earliest due time. */
  private arm(): void {
    const next = this.dueAtMs[0];
    if (next === undefined) return;
    if (this.timer && this.timer.atMs <= next) return;
    if (this.timer) clearTimeout(this.timer.handle);
    const delayMs = Math.min(Math.max(0, next - Date.now()) + COALESCE_MS, MAX_TIMER_DELAY_MS);
    this.timer = { atMs: next, handle: setTimeout(() => this.fire(), delayMs) };
  }

  /** Wakes the lane if a due time has come (a capped timer may fire before any), and re-arms. */
  private fire(): void {
    this.timer = null;
    const now = Date.now();
    let due = 0;
    while (due < this.dueAtMs.length && (this.dueAtMs[due] as number) <= now) due++;
    this.dueAtMs.splice(0, due);
    if (due > 0) this.wake();
    this.arm();
  }
}
