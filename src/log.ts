import { pino } from "pino";
import { PinoPretty } from "pino-pretty";
import type { LogFormat, LogLevel } from "./config.js";

/** The logger every part of taskqueue writes to: pino, on stdout. */
export type Logger = pino.Logger;

/**
 * A pino logger on stdout at `level`: JSON lines, or human-readable lines (pino-pretty, written
 * synchronously in this thread) for `format` `pretty`, or `auto` when stdout is a terminal.
 * JSON lines go out through {@link BatchedLines}: a line logged after a quiet spell is written at
 * once; lines that follow it closely are gathered and written together within
 * {@link LOG_FLUSH_INTERVAL_MS} while the event loop runs; all waiting lines are written when the
 * process exits.
 */
export function createLogger(level: LogLevel, name = "taskqueue", format: LogFormat = "auto"): Logger {
  const pretty = format === "pretty" || (format === "auto" && process.stdout.isTTY === true);
  if (!pretty) return pino({ name, level }, stdoutLines());
  return pino(
    { name, level },
    PinoPretty({ colorize: process.stdout.isTTY === true, sync: true, translateTime: "SYS:HH:MM:ss.l" }),
  );
}

/**
 * Longest a JSON log line waits in {@link BatchedLines} before it is written while the event loop
 * runs, milliseconds (a handler that blocks the loop holds the waiting lines as long as it blocks).
 */
export const LOG_FLUSH_INTERVAL_MS = 20;

/** Characters of waiting lines at which {@link BatchedLines} writes them at once. */
const LOG_BATCH_CHARS = 64 * 1024;

/** Where {@link BatchedLines} writes: pino's stdout destination (SonicBoom), or a test's sink. */
export interface LineSink {
  write(text: string): unknown;
}

/**
 * A pino destination that gathers lines and writes them to `sink` as one text. A line that comes
 * the interval ({@link LOG_FLUSH_INTERVAL_MS} by default) or more after the last write is written
 * at once (sparse logging pays one write a line, as before, and never waits); lines that follow
 * closely wait, and leave
 * together once {@link LOG_BATCH_CHARS} characters wait, when the interval's timer fires, or with
 * the first line logged after the interval has passed (a timer held up by a busy event loop does
 * not hold them longer than the loop does), or on {@link flushSync}. A worker logs a line per job
 * event (README, "Metrics and logs"); pino's own destination pays a write per line on a
 * synchronous stream (measured: 3.7 µs a line to a file, of which 1.2 µs is building it) and,
 * asynchronous with a `minLength`, measures its buffer again at every line (5 µs a line);
 * gathered here, a line costs 1.3–1.7 µs, which kept a drain at the default `info` level from
 * losing a third of its rate to its job log (docs/benchmarks.md).
 */
export class BatchedLines {
  private lines: string[] = [];
  private chars = 0;
  private timer: NodeJS.Timeout | null = null;
  /** performance.now() of the last write to the sink (or of the start). */
  private writtenAt = Number.NEGATIVE_INFINITY;

  /** @param flushIntervalMs the interval (default {@link LOG_FLUSH_INTERVAL_MS}), milliseconds. */
  constructor(
    private readonly sink: LineSink,
    private readonly flushIntervalMs = LOG_FLUSH_INTERVAL_MS,
  ) {}

  /**
   * Takes one line (pino calls this). What the sink throws is thrown (pino's stdout destination
   * stops writing at a closed pipe and retries a full one; another error, a full disk say, is
   * thrown as pino's own destination would).
   */
  write(line: string): boolean {
    this.lines.push(line);
    this.chars += line.length;
    if (this.chars >= LOG_BATCH_CHARS || performance.now() - this.writtenAt >= this.flushIntervalMs)
      this.flushSync();
    else if (this.timer === null) {
      this.timer = setTimeout(() => this.flushSync(), this.flushIntervalMs);
      this.timer.unref();
    }
    return true;
  }

  /** Writes every waiting line now. */
  flushSync(): void {
    if (this.timer !== null) {
      clearTimeout(this.timer);
      this.timer = null;
    }
    if (this.lines.length === 0) return;
    const text = this.lines.length === 1 ? (this.lines[0] as string) : this.lines.join("");
    this.lines = [];
    this.chars = 0;
    this.writtenAt = performance.now();
    this.sink.write(text);
  }

  /** `logger.flush(callback)`: writes every waiting line, then calls `callback`. */
  flush(callback?: (error?: Error) => void): void {
    this.flushSync();
    callback?.();
  }
}

let stdout: BatchedLines | null = null;

/**
 * The process's one {@link BatchedLines} on stdout (every logger of the process shares it, so that
 * their lines keep their order), over pino's synchronous stdout destination (which retries a full
 * pipe and stops at a closed one); what waits is written when the process exits.
 */
function stdoutLines(): BatchedLines {
  if (stdout === null) {
    const lines = new BatchedLines(pino.destination({ dest: 1, sync: true }));
    process.on("exit", () => lines.flushSync());
    stdout = lines;
  }
  return stdout;
}

/**
 * Writes the JSON log lines waiting in this process now: before the process writes something of
 * its own to stdout or stderr (an error message before it exits, say), so that they come first.
 */
export function flushLogs(): void {
  stdout?.flushSync();
}
