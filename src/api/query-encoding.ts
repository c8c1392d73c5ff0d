/**
 * The API's query-string parser, given to Fastify as its `querystringParser`. It parses as
 * Fastify's default does (`application/x-www-form-urlencoded`: `&`-separated pairs, `+` for a
 * space, a repeated name gives an array of its values) and notes, in the same pass, each parameter
 * whose name or value is not valid percent-encoded UTF-8 (a lone `%`, `%FF`, a truncated
 * sequence). Fastify's default keeps such a value as it was sent (`type=%FF` becomes the three
 * characters "%FF"), so a filter would quietly look for a type nobody has; those requests are
 * refused instead, with 400 naming each such parameter, like a body that is not UTF-8
 * (json-body.ts).
 *
 * The parser runs inside Fastify's router, where an error it threw would not reach the problem
 * handler; so it throws nothing, and leaves its finding on the parsed object under a symbol
 * (not enumerable: no schema check sees it), which an `onRequest` hook turns into the 400.
 * Fastify's not-found router does not use this parser: a path no route serves is answered 404,
 * whatever its query string.
 */
import type { FastifyInstance } from "fastify";
import { HttpProblem, PROBLEM_TYPES } from "./problem.js";

/** Names of the badly encoded parameters of a parsed query, when there are any. */
const BADLY_ENCODED = Symbol("taskqueue.badlyEncodedQueryParameters");

/** A parsed query string: each name with its value, or its values when repeated. */
export type ParsedQuery = Record<string, string | string[]>;

/** Decodes one `application/x-www-form-urlencoded` component, or null if it is not UTF-8. */
function decodeComponent(text: string): string | null {
  const spaced = text.includes("+") ? text.replaceAll("+", " ") : text;
  if (!spaced.includes("%")) return spaced;
  try {
    return decodeURIComponent(spaced);
  } catch {
    return null;
  }
}

/**
 * Parses a query string (without its `?`). A component that is not valid percent-encoded UTF-8
 * is kept as sent (with `+` still a space), as Fastify's default parser keeps it, and its
 * parameter is noted for {@link registerQueryEncodingCheck}. Never throws.
 */
export function parseQueryString(query: string): ParsedQuery {
  const parsed: ParsedQuery = Object.create(null) as ParsedQuery;
  if (query.length === 0) return parsed;
  let bad: string[] | undefined;
  for (const pair of query.split("&")) {
    if (pair === "") continue;
    const eq = pair.indexOf("=");
    const rawName = eq < 0 ? pair : pair.slice(0, eq);
    const rawValue = eq < 0 ? "" : pair.slice(eq + 1);
    const decodedName = decodeComponent(rawName);
    const decodedValue = decodeComponent(rawValue);
    const name = decodedName ?? rawName.replaceAll("+", " ");
    const value = decodedValue ?? rawValue.replaceAll("+", " ");
    if (decodedName === null || decodedValue === null) {
      bad ??= [];
      bad.push(name);
    }
    const previous = parsed[name];
    if (previous === undefined) parsed[name] = value;
    else if (Array.isArray(previous)) previous.push(value);
    else parsed[name] = [previous, value];
  }
  if (bad) Object.defineProperty(parsed, BADLY_ENCODED, { value: bad, enumerable: false });
  return parsed;
}

/** Answers 400, naming each parameter, a request whose query string is not percent-encoded UTF-8. */
export function registerQueryEncodingCheck(app: FastifyInstance): void {
  app.addHook("onRequest", async (request) => {
    const query = request.query as { [BADLY_ENCODED]?: string[] } | undefined;
    const bad = query?.[BADLY_ENCODED];
    if (!bad) return;
    throw new HttpProblem(
      400,
      PROBLEM_TYPES.malformedRequest,
      "Bad Request",
      `The query string is not valid percent-encoded UTF-8: ${bad.join(", ")}.`,
      bad.map((field) => ({ field, message: "is not valid percent-encoded UTF-8" })),
    );
  });
}
