/**
 * Parsers of the command line's numeric flags (commander `argParser`s). Each refuses what `Number`
 * alone would take by accident (`8e3`, `0x10`, `+2`, ` 5`), with a message naming the flag;
 * ranges beyond the sign are checked by the option's own rule (config.ts) where it has one.
 */
import { InvalidArgumentError } from "commander";

/** Digits only: no sign, fraction, exponent or hex. */
const DIGITS = /^[0-9]+$/;
/** A plain decimal: digits with at most one point, no sign or exponent. */
const DECIMAL = /^(?:[0-9]+\.?[0-9]*|\.[0-9]+)$/;

/** An integer ≥ 1 (up to 2^53 − 1). */
export const positiveInteger = (flag: string) => (value: string) => {
  const n = Number(value);
  if (!DIGITS.test(value) || !Number.isSafeInteger(n) || n < 1)
    throw new InvalidArgumentError(`${flag} must be a positive integer`);
  return n;
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
