/**
 * Lossless numbers in request bodies. `JSON.parse` reads every number as a double, so
 * `9007199254740993` would be stored as 9007199254740992, a 30-digit integer as
 * `1.2345678901234568e+29` and `1e-400` as 0, silently. The API refuses such a number instead
 * (422 naming its field, see json-body.ts): a number is kept only when its decimal value is exactly
 * the value of what the parsed double prints back as (`String(Number(token))`, the shortest text
 * that reads back as the same double). Values are compared, not spellings: `1.0`, `1E2`, `0.1`,
 * `-0` and `5e-324` pass; 2^53 + 1, `1e400` (Infinity) and `1e-400` (0) do not.
 *
 * Fast path: a number token of at most 15 characters without an exponent has at most 15
 * significant digits and a magnitude between 1e-14 and 1e15, and every such decimal reads back as
 * itself (15 digits is the precision a double always keeps), so only longer tokens and tokens with
 * an exponent are examined. Strings are skipped with `indexOf`.
 */

/** Character codes the scanners compare against. */
const QUOTE = 0x22;
const BACKSLASH = 0x5c;
const MINUS = 0x2d;
const PLUS = 0x2b;
const DOT = 0x2e;
const ZERO = 0x30;
const NINE = 0x39;
const LOWER_E = 0x65;
const UPPER_E = 0x45;

/** Longest token (characters, no exponent) that is always exact: see the top of this file. */
const ALWAYS_EXACT_LENGTH = 15;

/** Index of the quote closing the JSON string that opens at `open` (the text is valid JSON). */
function stringEnd(text: string, open: number): number {
  let close = text.indexOf('"', open + 1);
  for (;;) {
    let backslashes = 0;
    for (let k = close - 1; text.charCodeAt(k) === BACKSLASH; k--) backslashes++;
    if (backslashes % 2 === 0) return close;
    close = text.indexOf('"', close + 1);
  }
}

/**
 * A decimal value in canonical form: `"0"` for zero (of either sign), else sign, significant
 * digits without leading or trailing zeros, and the power of ten of the last digit, e.g. `12e-1`
 * for `1.20`. Two numerals have equal values exactly when their forms are equal. `numeral` is a JSON
 * number token or what `String(number)` prints for a finite number (`1e+21`, `5e-324`).
 */
export function canonicalDecimal(numeral: string): string {
  const negative = numeral.charCodeAt(0) === MINUS;
  const body = negative ? numeral.slice(1) : numeral;
  const e = body.search(/[eE]/);
  const mantissa = e === -1 ? body : body.slice(0, e);
  let exponent = e === -1 ? 0 : Number(body.slice(e + 1));
  const dot = mantissa.indexOf(".");
  const digits = dot === -1 ? mantissa : mantissa.slice(0, dot) + mantissa.slice(dot + 1);
  if (dot !== -1) exponent -= mantissa.length - dot - 1;
  let first = 0;
  while (first < digits.length && digits.charCodeAt(first) === ZERO) first++;
  if (first === digits.length) return "0";
  let last = digits.length;
  while (digits.charCodeAt(last - 1) === ZERO) last--;
  exponent += digits.length - last;
  return `${negative ? "-" : ""}${digits.slice(first, last)}e${exponent}`;
}

/**
 * True if the JSON number `token` survives a parse to a double unchanged in value: the double is
 * finite and prints back as the same decimal value. See the top of this file.
 */
export function isExactNumber(token: string): boolean {
  const value = Number(token);
  if (!Number.isFinite(value)) return false;
  return canonicalDecimal(token) === canonicalDecimal(String(value));
}

/** A number token of a JSON text: its offsets (`end` exclusive). */
export interface NumberToken {
  start: number;
  end: number;
}

/**
 * The number tokens of the JSON `text` (which must be valid JSON: `JSON.parse` accepted it) whose
 * value a double does not hold exactly, in text order, at most `max` of them.
 */
export function findInexactNumbers(text: string, max: number): NumberToken[] {
  const found: NumberToken[] = [];
  const n = text.length;
  let i = 0;
  while (i < n) {
    const c = text.charCodeAt(i);
    if (c === QUOTE) {
      i = stringEnd(text, i) + 1;
      continue;
    }
    if (c === MINUS || (c >= ZERO && c <= NINE)) {
      const start = i;
      let exponent = false;
      for (i++; i < n; i++) {
        const d = text.charCodeAt(i);
        if (d === LOWER_E || d === UPPER_E) exponent = true;
        else if (!((d >= ZERO && d <= NINE) || d === DOT || d === MINUS || d === PLUS)) break;
      }
      if ((exponent || i - start > ALWAYS_EXACT_LENGTH) && !isExactNumber(text.slice(start, i))) {
        found.push({ start, end: i });
        if (found.length >= max) return found;
      }
      continue;
    }
    i++;
  }
  return found;
}

/** One open object or array while {@link fieldPaths} walks a text. */
interface Frame {
  array: boolean;
  /** The current key (object) or index (array), as a path segment. */
  segment: string;
  index: number;
}

/**
 * Field paths of values of the valid JSON `text` that start at `offsets` (ascending), in the
 * API's spelling: segments joined by `/` without a leading one (`payload/n`,
 * `jobs/3/payload/a/2`); keys as they are, array indexes in decimal. One pass over the text up to
 * the last offset.
 */
export function fieldPaths(text: string, offsets: readonly number[]): string[] {
  const paths: string[] = [];
  const frames: Frame[] = [];
  let expectKey = false;
  let i = 0;
  for (const offset of offsets) {
    while (i < offset) {
      const c = text.charCodeAt(i);
      if (c === QUOTE) {
        const end = stringEnd(text, i);
        const top = frames[frames.length - 1];
        if (expectKey && top) top.segment = JSON.parse(text.slice(i, end + 1)) as string;
        expectKey = false;
        i = end + 1;
        continue;
      }
      if (c === 0x7b /* { */) {
        frames.push({ array: false, segment: "", index: 0 });
        expectKey = true;
      } else if (c === 0x5b /* [ */) {
        frames.push({ array: true, segment: "0", index: 0 });
        expectKey = false;
      } else if (c === 0x7d /* } */ || c === 0x5d /* ] */) {
        frames.pop();
        expectKey = false;
      } else if (c === 0x2c /* , */) {
        const top = frames[frames.length - 1];
        if (top?.array) {
          top.index++;
          top.segment = String(top.index);
        } else expectKey = true;
      }
      i++;
    }
    paths.push(frames.map((frame) => frame.segment).join("/"));
  }
  return paths;
}

/** Longest token quoted in a refusal; longer ones are cut with an ellipsis. */
const QUOTED_TOKEN_CHARS = 40;

/**
 * The refusal of the inexact number `token`: what a parse would make of it, and to send it as a
 * string instead.
 */
export function inexactNumberMessage(token: string): string {
  const value = Number(token);
  const quoted = token.length > QUOTED_TOKEN_CHARS ? `${token.slice(0, QUOTED_TOKEN_CHARS)}…` : token;
  return `is a number that cannot be stored exactly (${quoted} would become ${String(value)}): send it as a string`;
}
