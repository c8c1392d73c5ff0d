/**
 * Parsers of the command line's numeric flags (commander `argParser`s). Each refuses what `Number`
 * alone would take by accident (`8e3`, `0x10`, `+2`, ` 5`), with a message naming the flag;
 * ranges beyond the sign are checked by the option's own rule (config.ts) where it has one.
 */
import { accessSync, constants, existsSync, statSync } from "node:fs";
import { dirname, resolve } from "node:path";
import { InvalidArgumentError } from "commander";

/** Digits only: no sign, fraction, exponent or hex. */
const DIGITS = /^[0-9]+$/;
/** A plain decimal: digits with at most one point, no sign or exponent. */
const DECIMAL = /^(?:[0-9]+\.?[0-9]*|\.[0-9]+)$/;

/** An integer ≥ 1, up to `max` (default 2^53 − 1). */
export const positiveInteger =
  (flag: string, max = Number.MAX_SAFE_INTEGER) =>
  (value: string) => {
    const n = Number(value);
    if (!DIGITS.test(value) || !Number.isSafeInteger(n) || n < 1)
      throw new InvalidArgumentError(`${flag} must be a positive integer`);
    if (n > max) throw new InvalidArgumentError(`${flag} must be at most ${max.toLocaleString("en-US")}`);
    return n;
  };

/**
 * A file to write at the end of a long run: its folder must exist and be writable now, and the path
 * must not be a folder, so that a typo fails before the run, not after it.
 */
export const writableFile = (flag: string) => (value: string) => {
  const path = resolve(value);
  try {
    if (existsSync(path) && statSync(path).isDirectory()) throw new Error("is a folder");
    accessSync(dirname(path), constants.W_OK);
  } catch (error) {
    const reason =
      (error as NodeJS.ErrnoException).code === "ENOENT"
        ? "its folder does not exist"
        : (error as Error).message;
    throw new InvalidArgumentError(`${flag} ${value}: cannot write there (${reason})`);
  }
  return value;
};

/** An integer ≥ 0 (up to 2^53 − 1). */
export const nonNegativeInteger = (flag: string) => (value: string) => {
  const n = Number(value);
  if (!DIGITS.test(value) || !Number.isSafeInteger(n))
    throw new InvalidArgumentError(`${flag} must be an integer ≥ 0`);
  return n;
};

/** A number > 0, e.g. `10` or `0.5` (seconds, where the flag says so). */
export const positiveNumber = (flag: string) => (value: string) => {
  const n = Number(value);
  if (!DECIMAL.test(value) || !(n > 0) || !Number.isFinite(n))
    throw new InvalidArgumentError(`${flag} must be a positive number`);
  return n;
};

/** A port: a whole number; 0 picks a free port, like PORT=0. The range is PORT's rule. */
export const port = (flag: string) => (value: string) => {
  if (!DIGITS.test(value))
    throw new InvalidArgumentError(`${flag} must be a whole number (0 picks a free port)`);
  return Number(value);
};
