import { pino } from "pino";
import { PinoPretty } from "pino-pretty";
import type { LogFormat, LogLevel } from "./config.js";

/** The logger every part of taskqueue writes to: pino, on stdout. */
export type Logger = pino.Logger;

/**
 * A pino logger on stdout at `level`: JSON lines, or human-readable lines (pino-pretty, written
 * synchronously in this thread) for `format` `pretty`, or `auto` when stdout is a terminal.
 * JSON lines go out in batches ({@link stdoutLines}): a line waits at most
 * {@link LOG_FLUSH_INTERVAL_MS} before it is written, and all waiting lines are written when the
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

/** Longest a JSON log line waits in {@link BatchedLines} before it is written, milliseconds. */
export const LOG_FLUSH_INTERVAL_MS = 20;

/** Characters of waiting lines at which {@link BatchedLines} writes them at once. */
const LOG_BATCH_CHARS = 64 * 1024;

/** Where {@link BatchedLines} writes: pino's stdout destination (SonicBoom), or a test's sink. */
export interface LineSink {
  write(text: string): unknown;
}

/**
 * A pino destination that gathers lines and writes them to `sink` as one text: once
 * {@link LOG_BATCH_CHARS} characters wait, or {@link LOG_FLUSH_INTERVAL_MS} after the first one,
 * or on {@link flushSync}. A worker logs a line per job event (README, "Metrics and logs"); pino's
 * own destination pays a write per line on a synchronous stream (measured: 3.7 µs a line to a
 * file, of which 1.2 µs is building it) and, asynchronous with a `minLength`, measures each line's
 * buffer again (5 µs a line); gathered here, a line costs 1.3–1.7 µs, which kept a drain with the
 * default `info` level from losing a third of its rate to its job log (docs/benchmarks.md).
 */
export class BatchedLines {
  private lines: string[] = [];
  private chars = 0;
  private timer: NodeJS.Timeout | null = null;

  constructor(private readonly sink: LineSink) {}

  /** Takes one line (pino calls this); never throws. */
  write(line: string): boolean {
    this.lines.push(line);
    this.chars += line.length;
    if (this.chars >= LOG_BATCH_CHARS) this.flushSync();
    else if (this.timer === null) {
      this.timer = setTimeout(() => this.flushSync(), LOG_FLUSH_INTERVAL_MS);
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
