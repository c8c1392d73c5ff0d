/** The eight built-in handlers (DESIGN.md §7). */
import { setTimeout as sleep } from "node:timers/promises";
import { PayloadError } from "../../errors.js";
import type { HandlerRegistry, JobHandler } from "../registry.js";
import { collatz, isPrime, sha256Chain } from "./math.js";
import { payloadObject } from "./payload.js";

/** `{sleep_seconds}` (0–3600) → `{slept_seconds}`; stops early when the signal aborts. */
const slow: JobHandler = async (job, signal) => {
  const seconds = payloadObject("slow", job.payload).sleep_seconds;
  if (typeof seconds !== "number" || !Number.isFinite(seconds) || seconds < 0 || seconds > 3600)
    throw new PayloadError(
      `slow: payload.sleep_seconds must be a number from 0 to 3600, got ${JSON.stringify(seconds)}`,
    );
  const started = performance.now();
  try {
    await sleep(seconds * 1000, undefined, { signal });
  } catch (error) {
    if (!signal.aborted) throw error;
    throw new Error(`slow: aborted after ${((performance.now() - started) / 1000).toFixed(3)} s`);
  }
  return { slept_seconds: seconds };
};

export const builtinHandlers: Readonly<Record<string, JobHandler>> = {
  noop: () => null,
  echo: (job) => job.payload,
  slow,
  always_fail: (job) => {
    throw new Error(`always_fail: job ${job.id} failed on purpose (attempt ${job.attempt})`);
  },
  flaky: (job) => {
    if (job.attempt < 2) throw new Error(`flaky: fails on attempt ${job.attempt}, succeeds on attempt 2`);
    return { succeeded_on_attempt: job.attempt };
  },
  is_prime: (job) => isPrime(job.payload),
  collatz: (job) => collatz(job.payload),
  sha256_chain: (job) => sha256Chain(job.payload),
};

/** Registers every built-in handler on `registry`. */
export function registerBuiltinHandlers(registry: HandlerRegistry): HandlerRegistry {
  for (const [type, handler] of Object.entries(builtinHandlers)) registry.register(type, handler);
  return registry;
}
