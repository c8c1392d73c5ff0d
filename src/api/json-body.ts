/**
 * The API's one body parser: `application/json` (with or without parameters such as charset).
 *
 * It replaces Fastify's default parser for two reasons: the default answers a body holding a
 * `__proto__` key (or `constructor.prototype`) with a misleading "not valid JSON"; here such a key
 * is refused with 422 naming it (e.g. `payload/__proto__`), because handlers that merge payloads
 * into objects could be prototype-polluted by it. A syntax error is reported with its position, and
 * bytes that are not UTF-8 are refused (400) instead of being stored as U+FFFD. A number that a
 * double cannot hold exactly (`9007199254740993`, `1e400`) is refused with 422 naming its field
 * (json-numbers.ts), never stored altered. It also reads the body itself, with fewer copies than
 * Fastify's reader (see readBody), and frees a large body's bytes once they are decoded.
 */
import { isUtf8 } from "node:buffer";
import { errorCodes, type FastifyInstance, type FastifyRequest } from "fastify";
import { JobValidationError } from "../errors.js";
import { LIMITS } from "../queue/job-shape.js";
import { fieldPaths, findInexactNumbers, inexactNumberMessage } from "./json-numbers.js";
import { HttpProblem, PROBLEM_TYPES } from "./problem.js";

/**
 * Path of the first key that could pollute a prototype when the value is merged into another
 * object: `__proto__` anywhere, or `prototype` inside a `constructor` object. Null if none.
 * Iterative, so arbitrarily deep values cannot overflow the stack.
 */
export function findForbiddenKey(value: unknown): string | null {
  const stack: { value: unknown; path: string; underConstructor: boolean }[] = [
    { value, path: "", underConstructor: false },
  ];
  while (stack.length > 0) {
    const { value: current, path, underConstructor } = stack.pop() as (typeof stack)[number];
    if (current === null || typeof current !== "object") continue;
    if (Array.isArray(current)) {
      current.forEach((item, index) => {
        stack.push({ value: item, path: `${path}/${index}`, underConstructor: false });
      });
      continue;
    }
    for (const key of Object.keys(current)) {
      const at = `${path}/${key}`;
      if (key === "__proto__" || (underConstructor && key === "prototype")) return at.slice(1);
      stack.push({
        value: (current as Record<string, unknown>)[key],
        path: at,
        underConstructor: key === "constructor",
      });
    }
  }
  return null;
}

/**
 * False when no key of the JSON `text` can be `__proto__` or `prototype`: neither word appears, and
 * there is no `\u` escape that could spell one. Walking a 1,000-job batch for keys took a tenth of
 * the request's CPU; bodies that may hold such a key are still walked in full.
 */
export function mayHoldForbiddenKey(text: string): boolean {
  return text.includes("__proto__") || text.includes("prototype") || text.includes("\\u");
}

/**
 * The `charset` parameter of a Content-Type header, lower-cased and unquoted; null if none or
 * empty. Parameters are read in order, so a quoted value that contains `;charset=` is not taken
 * for one.
 */
export function declaredCharset(contentType: string | undefined): string | null {
  const parameter = /;\s*([^\s=;]+)\s*=\s*("(?:[^"\\]|\\.)*"|[^;]*)/g;
  for (const [, name, raw] of (contentType ?? "").matchAll(parameter)) {
    if (name?.toLowerCase() !== "charset") continue;
    const value = (raw ?? "")
      .trim()
      .replace(/^"(.*)"$/, "$1")
      .trim()
      .toLowerCase();
    return value === "" ? null : value;
  }
  return null;
}

/** Charsets whose text is UTF-8 as it stands. */
const UTF8_COMPATIBLE = new Set(["utf-8", "utf8", "us-ascii", "ascii"]);

/**
 * Whether a body declared in `charset` can be read as UTF-8 without changing its meaning: UTF-8
 * and ASCII always; any other charset only when every byte is ASCII (which most charsets share);
 * UTF-16 and UTF-32 never.
 */
function readableAsUtf8(charset: string | null, body: Buffer): boolean {
  if (charset === null || UTF8_COMPATIBLE.has(charset)) return true;
  if (/^utf-?(16|32)/.test(charset)) return false;
  return body.every((byte) => byte < 0x80);
}

/**
 * Installs the JSON parser on `app` (removing Fastify's defaults, so any other media type is
 * answered 415). Errors: a body in another charset than UTF-8 (or ASCII) → 415; bytes that are not
 * UTF-8, an empty or malformed body → 400 problem; a forbidden key, or a number a double cannot
 * hold exactly → {@link JobValidationError} (422, naming each field). A leading byte order mark is
 * ignored.
 */
export function registerJsonBodyParser(app: FastifyInstance): void {
  app.removeAllContentTypeParsers();
  app.addContentTypeParser("application/json", (request, payload, done) => {
    readBody(request, payload, (error, body) => {
      if (error) done(error);
      else parseJsonBody(request, body as Buffer, done);
    });
  });
}

/** Bodies at least this long have their bytes released once decoded ({@link releaseBytes}). */
const RELEASE_MIN_BYTES = 1024 * 1024;

/**
 * Frees the memory of `bytes`, a large body already decoded to text, now instead of when the
 * collector gets to it: its ArrayBuffer (its own, never a shared pool's: checked) is transferred
 * away, which leaves `bytes` empty and the memory with a new, short-lived owner that the next minor
 * collection frees. The body, read before the request's other copies were made, would otherwise
 * sit in the old generation until a full collection.
 */
function releaseBytes(bytes: Buffer): void {
  const { buffer } = bytes;
  if (bytes.length < RELEASE_MIN_BYTES || bytes.byteOffset !== 0 || buffer.byteLength !== bytes.length)
    return;
  structuredClone(buffer, { transfer: [buffer as ArrayBuffer] });
}

/** What a parser answers Fastify: an error, or the parsed body. */
type ParserDone = (error: Error | null, value?: unknown) => void;

/**
 * Reads the body of `request` from `payload` as Fastify's own reader does (`parseAs: "buffer"`:
 * the same 413 past the route's body limit, the same 400 when the bytes received differ from
 * `Content-Length` or the stream fails), except that a body with a `Content-Length` is read into
 * one buffer of that length as it arrives instead of keeping every chunk and joining them at the
 * end: for a 32 MiB batch, 32 MiB less held at once. A body without a length is joined at the end.
 */
function readBody(
  request: FastifyRequest,
  payload: NodeJS.ReadableStream,
  done: (error: Error | null, body?: Buffer) => void,
): void {
  const limit = request.routeOptions.bodyLimit;
  const contentLength = Number(request.headers["content-length"]);
  if (contentLength > limit) {
    done(new errorCodes.FST_ERR_CTP_BODY_TOO_LARGE());
    return;
  }
  const known = Number.isSafeInteger(contentLength) && contentLength >= 0;
  // Not from the shared pool when large, so that releaseBytes can free it alone.
  const whole = known
    ? contentLength >= RELEASE_MIN_BYTES
      ? Buffer.allocUnsafeSlow(contentLength)
      : Buffer.allocUnsafe(contentLength)
    : null;
  const chunks: Buffer[] = [];
  let received = 0;
  const stop = () => {
    payload.removeListener("data", onData);
    payload.removeListener("end", onEnd);
    payload.removeListener("error", onEnd);
  };
  function onData(data: Buffer | string): void {
    const chunk = typeof data === "string" ? Buffer.from(data) : data;
    if (whole && received + chunk.length <= whole.length) chunk.copy(whole, received);
    else if (!whole) chunks.push(chunk);
    received += chunk.length;
    if (received > limit) {
      stop();
      done(new errorCodes.FST_ERR_CTP_BODY_TOO_LARGE());
    }
  }
  function onEnd(error?: Error & { statusCode?: number }): void {
    stop();
    if (error) {
      if (!(typeof error.statusCode === "number" && error.statusCode >= 400)) error.statusCode = 400;
      done(error);
      return;
    }
    if (!Number.isNaN(contentLength) && received !== contentLength) {
      done(new errorCodes.FST_ERR_CTP_INVALID_CONTENT_LENGTH());
      return;
    }
    done(null, whole ?? Buffer.concat(chunks, received));
  }
  payload.on("data", onData);
  payload.on("end", onEnd);
  payload.on("error", onEnd);
  payload.resume();
}

/** Checks and parses a body read whole (see {@link registerJsonBodyParser}). */
function parseJsonBody(request: FastifyRequest, body: Buffer, done: ParserDone): void {
  // JSON text is UTF-8 (RFC 8259 §8.1): another declared charset is refused rather than
  // misread, and bytes that are not UTF-8 rather than stored as U+FFFD.
  const charset = declaredCharset(request.headers["content-type"]);
  if (!readableAsUtf8(charset, body)) {
    done(
      new HttpProblem(
        415,
        PROBLEM_TYPES.unsupportedMediaType,
        "Unsupported Media Type",
        `JSON must be UTF-8 (RFC 8259); charset=${charset} is not supported.`,
      ),
    );
    return;
  }
  if (!isUtf8(body)) {
    done(new HttpProblem(400, PROBLEM_TYPES.malformedRequest, "Bad Request", "The body is not valid UTF-8."));
    return;
  }
  let text = body.toString("utf8");
  releaseBytes(body);
  // A byte order mark may be ignored (RFC 8259 §8.1); JSON.parse would refuse it.
  if (text.charCodeAt(0) === 0xfeff) text = text.slice(1);
  if (text.trim() === "") {
    done(new HttpProblem(400, PROBLEM_TYPES.malformedRequest, "Bad Request", "The JSON body is empty."));
    return;
  }
  let parsed: unknown;
  try {
    parsed = JSON.parse(text);
  } catch (error) {
    const reason = error instanceof Error ? error.message : "syntax error";
    done(
      new HttpProblem(
        400,
        PROBLEM_TYPES.malformedRequest,
        "Bad Request",
        `The body is not valid JSON: ${reason}.`,
      ),
    );
    return;
  }
  const field = mayHoldForbiddenKey(text) ? findForbiddenKey(parsed) : null;
  if (field !== null) {
    done(
      new JobValidationError([
        {
          field,
          message: "is a key that could pollute object prototypes (__proto__, constructor.prototype)",
        },
      ]),
    );
    return;
  }
  // A number a double cannot hold exactly is refused rather than stored altered (json-numbers.ts).
  const inexact = findInexactNumbers(text, LIMITS.fieldProblems);
  if (inexact.length > 0) {
    const paths = fieldPaths(
      text,
      inexact.map((token) => token.start),
    );
    done(
      new JobValidationError(
        inexact.map((token, i) => ({
          field: paths[i] ?? "body",
          message: inexactNumberMessage(text.slice(token.start, token.end)),
        })),
      ),
    );
    return;
  }
  done(null, parsed);
}
