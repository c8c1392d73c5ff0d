/**
 * A handler's outcome as the worker stores it, computed the same way in the worker's own process
 * and in a sandboxed handler's child process (runner.ts): the result as JSON text, or the failed
 * attempt's error text.
 */
import { isPermanentFailure } from "../../errors.js";
import { toStorableJson } from "../../queue/validate.js";

/**
 * What one handler execution ended with: its result as JSON text, or an error message, `permanent`
 * when the handler asked for no more retries (a `PermanentJobError`, see errors.ts).
 */
export type HandlerOutcome = { json: string } | { error: string; permanent?: boolean };

/**
 * The outcome of a handler that returned `result`: undefined is stored as null; a value that is
 * not storable JSON (a BigInt, a cycle, NaN, too deep) is an error naming why.
 */
export function resultOutcome(result: unknown): HandlerOutcome {
  const stored = toStorableJson(result, "result");
  if ("json" in stored) return stored;
  return { error: `handler result cannot be stored: ${stored.problem.field} ${stored.problem.message}` };
}

/** The outcome of a handler that threw `error`: its text, and whether it is permanent. */
export function failureOutcome(error: unknown): { error: string; permanent?: boolean } {
  return isPermanentFailure(error)
    ? { error: describeError(error), permanent: true }
    : { error: describeError(error) };
}

/** A failed attempt's error text: `Name: message`, NUL-free and at most 4,000 characters. */
export function describeError(error: unknown): string {
  let text: string;
  try {
    text =
      error instanceof Error
        ? `${error.name === "Error" ? "" : `${error.name}: `}${error.message}`
        : String(error);
  } catch {
    // A thrown value with no way to become a string (Object.create(null), a throwing toString).
    text = "handler threw a value that cannot be turned into a message";
  }
  return String(text).replaceAll("\u0000", "\\u0000").slice(0, 4000) || "handler failed without a message";
}
