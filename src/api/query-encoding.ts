/**
 * Query strings whose percent-encoding is not UTF-8. Fastify's query parser keeps such a value
 * as it was sent (`type=%FF` becomes the three characters "%FF"), so a filter would quietly look
 * for a type nobody has. Those requests are refused instead, naming the parameter, like a body
 * that is not UTF-8 (json-body.ts).
 */
import type { FastifyInstance } from "fastify";
import { HttpProblem, PROBLEM_TYPES } from "./problem.js";

/** Decodes one `application/x-www-form-urlencoded` component, or null if it is not UTF-8. */
function decodeComponent(text: string): string | null {
  try {
    return decodeURIComponent(text.replaceAll("+", " "));
  } catch {
    return null;
  }
}

/**
 * The names (decoded where they can be) of the query parameters of `url` whose name or value is
 * not valid percent-encoded UTF-8 (a lone `%`, `%FF`, a truncated sequence), in order.
 */
function badlyEncodedParameters(url: string): string[] {
  const start = url.indexOf("?");
  if (start < 0) return [];
  const bad: string[] = [];
  for (const pair of url.slice(start + 1).split("&")) {
    if (pair === "") continue;
    const eq = pair.indexOf("=");
    const rawName = eq < 0 ? pair : pair.slice(0, eq);
    const name = decodeComponent(rawName);
    if (name === null || (eq >= 0 && decodeComponent(pair.slice(eq + 1)) === null)) bad.push(name ?? rawName);
  }
  return bad;
}

/** Answers 400, naming each parameter, a request whose query string is not percent-encoded UTF-8. */
export function registerQueryEncodingCheck(app: FastifyInstance): void {
  app.addHook("onRequest", async (request) => {
    const bad = badlyEncodedParameters(request.raw.url ?? "");
    if (bad.length === 0) return;
    throw new HttpProblem(
      400,
      PROBLEM_TYPES.malformedRequest,
      "Bad Request",
      `The query string is not valid percent-encoded UTF-8: ${bad.join(", ")}.`,
      bad.map((field) => ({ field, message: "is not valid percent-encoded UTF-8" })),
    );
  });
}
