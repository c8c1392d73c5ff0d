/**
 * Logging of repeated failures (shared/cases 02): a few lines per distinct error, not one per
 * failure. The first occurrence of a message with a given error is logged as it comes; later ones
 * are counted, and a summary ("… (repeated N times in X s)") is logged with the next occurrence at
 * least `summaryEveryMs` after the last line of that kind, or by {@link RepeatedLog.settle} once
 * the trouble is over.
 */
import type { Logger } from "../log.js";

type Level = "error" | "warn" | "info";

interface Seen {
  level: Level;
  message: string;
  /** Occurrences not logged yet. */
  unlogged: number;
  /** When the last line of this kind was logged, ms (performance.now()). */
  loggedAt: number;
  /** When the first unlogged occurrence came, ms. */
  firstUnloggedAt: number;
  fields: Record<string, unknown>;
}

/** The part of an error that tells two failures apart: its code, else its message. */
function errorKey(error: unknown): string {
  if (error instanceof Error) {
    const code = (error as { code?: unknown }).code;
    return typeof code === "string" ? code : error.message;
  }
  return error === undefined ? "" : String(error);
}

export class RepeatedLog {
  private readonly seen = new Map<string, Seen>();

  constructor(
    private readonly logger: Logger,
    /** At most one summary line per kind this often, ms. Default 5 s. */
    private readonly summaryEveryMs = 5000,
  ) {}

  /**
   * Logs `message` at `level` with `fields` (an `err` field tells kinds apart: same message, same
   * error code or message, same kind), unless a line of its kind went out within `summaryEveryMs`:
   * then it is only counted.
   */
  log(level: Level, fields: Record<string, unknown>, message: string): void {
    const key = `${message}\u0000${errorKey(fields.err)}`;
    const now = performance.now();
    const seen = this.seen.get(key);
    if (!seen) {
      this.seen.set(key, { level, message, unlogged: 0, loggedAt: now, firstUnloggedAt: now, fields });
      this.logger[level](fields, message);
      return;
    }
    if (seen.unlogged === 0) seen.firstUnloggedAt = now;
    seen.unlogged++;
    seen.fields = fields;
    if (now - seen.loggedAt >= this.summaryEveryMs) this.summarize(seen, now);
  }

  /** The trouble is over: logs the summary of every kind with unlogged occurrences, and forgets them. */
  settle(): void {
    const now = performance.now();
    for (const seen of this.seen.values()) if (seen.unlogged > 0) this.summarize(seen, now);
    this.seen.clear();
  }

  private summarize(seen: Seen, now: number): void {
    const seconds = Math.round((now - seen.firstUnloggedAt) / 100) / 10;
    this.logger[seen.level](
      { ...seen.fields, repeated: seen.unlogged },
      `${seen.message} (repeated ${seen.unlogged} times in ${seconds} s)`,
    );
    seen.unlogged = 0;
    seen.loggedAt = now;
  }
}
