/**
 * Cron expressions of schedules (DESIGN.md §3, "Schedules"), read with croner: 5 fields (minute
 * precision) or 6 (the first is seconds), or a nickname (`@hourly`, `@daily`, …), in an IANA time
 * zone. Local times follow the zone's daylight saving transitions as croner resolves them: a tick
 * whose local time is skipped in spring (02:30 in Europe/Berlin on the last Sunday of March) fires
 * at the first instant after the gap (03:00 local), one repeated in autumn fires once (its first
 * occurrence); an hourly schedule fires every real hour (23 in spring, 25 in autumn).
 *
 * Pure: the database's clock is passed in (`now`), never read here.
 */
import { Cron } from "croner";

/** Croner's view of a schedule, reused while its expression and zone stay the same. */
const parsed = new Map<string, Cron>();

/** The parsed expression (cached, at most 10,000 entries). @throws croner's error on a bad expression. */
function cronOf(expression: string, timezone: string): Cron {
  const key = `${timezone}\u0000${expression}`;
  let cron = parsed.get(key);
  if (!cron) {
    cron = new Cron(expression, { timezone, paused: true, mode: "5-or-6-parts" });
    if (parsed.size >= 10_000) parsed.clear();
    parsed.set(key, cron);
  }
  return cron;
}

/** True if `timezone` is an IANA zone name this Node.js knows (or `UTC`). */
export function isTimeZone(timezone: string): boolean {
  try {
    new Intl.DateTimeFormat("en-US", { timeZone: timezone });
    return true;
  } catch {
    return false;
  }
}

/**
 * Why `expression` is not a usable cron expression in `timezone` (a message for the field), or
 * null when it is: it parses, and it has a tick after `from`.
 */
export function cronProblem(expression: string, timezone: string, from: Date = new Date()): string | null {
  let cron: Cron;
  try {
    cron = cronOf(expression, timezone);
  } catch (error) {
    return `is not a cron expression: ${(error as Error).message.replace(/^CronPattern: /, "")}`;
  }
  try {
    if (cron.nextRun(from) === null) return "never fires";
  } catch (error) {
    return `cannot be evaluated: ${(error as Error).message}`;
  }
  return null;
}

/** The first tick strictly after `after`, or null if there is none. */
export function nextTick(expression: string, timezone: string, after: Date): Date | null {
  return cronOf(expression, timezone).nextRun(after);
}

/** What {@link dueTicks} decided. */
export interface DueTicks {
  /** Ticks to enqueue, oldest first. */
  ticks: Date[];
  /** The latest tick at or before `now`, if it is after `lastTick`: the schedule's new `last_tick`. */
  latest: Date | null;
  /** Due ticks left out: older than the misfire window, or beyond the catch-up limit (at least). */
  skipped: number;
}

/**
 * The ticks of a schedule that are due: after `lastTick`, at or before `now`. At most `limit` of
 * them (the latest), and without catch-up only those within `misfireSeconds` of `now` (a tick
 * found late, e.g. after a pause of the event loop, still fires; one from a downtime does not).
 * Costs `limit` steps of the expression at most, however long the downtime.
 */
export function dueTicks(
  expression: string,
  timezone: string,
  options: { lastTick: Date; now: Date; catchUp: boolean; limit: number; misfireSeconds: number },
): DueTicks {
  const { lastTick, now, catchUp, limit, misfireSeconds } = options;
  if (now.getTime() <= lastTick.getTime()) return { ticks: [], latest: null, skipped: 0 };
  const cron = cronOf(expression, timezone);
  // previousRuns excludes its reference: one millisecond later includes a tick at `now`.
  const recent = cron
    .previousRuns(limit + 1, new Date(now.getTime() + 1))
    .filter((tick) => tick.getTime() > lastTick.getTime());
  const latest = recent[0] ?? null;
  const oldest = catchUp ? Number.NEGATIVE_INFINITY : now.getTime() - misfireSeconds * 1000;
  const ticks = recent
    .slice(0, limit)
    .filter((tick) => tick.getTime() >= oldest)
    .reverse();
  return { ticks, latest, skipped: recent.length - ticks.length };
}
