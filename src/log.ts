import { pino } from "pino";
import { PinoPretty } from "pino-pretty";
import type { LogFormat, LogLevel } from "./config.js";

/** The logger every part of taskqueue writes to: pino, on stdout. */
export type Logger = pino.Logger;

/**
 * A pino logger on stdout at `level`: JSON lines, or human-readable lines (pino-pretty, written
 * synchronously in this thread) for `format` `pretty`, or `auto` when stdout is a terminal.
 */
export function createLogger(level: LogLevel, name = "taskqueue", format: LogFormat = "auto"): Logger {
  const pretty = format === "pretty" || (format === "auto" && process.stdout.isTTY === true);
  if (!pretty) return pino({ name, level });
  return pino(
    { name, level },
    PinoPretty({ colorize: process.stdout.isTTY === true, sync: true, translateTime: "SYS:HH:MM:ss.l" }),
  );
}
