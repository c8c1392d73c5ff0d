import { pino } from "pino";
import type { LogLevel } from "./config.js";

/** The logger every part of taskqueue writes to: pino, JSON lines on stdout. */
export type Logger = pino.Logger;

export function createLogger(level: LogLevel, name = "taskqueue"): Logger {
  return pino({ name, level });
}
