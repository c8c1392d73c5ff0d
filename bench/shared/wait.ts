/** Waiting for the system under test, by polling the database (the jobs run in other processes). */
import { setTimeout as sleep } from "node:timers/promises";
import type { TaskQueue } from "../../src/index.js";
import type { Progress } from "./progress.js";

/** How often the benchmarks re-read job counts while waiting, milliseconds. */
export const POLL_INTERVAL_MS = 100;

/**
 * Waits until at least `target` jobs of the schema are final (done or dead; the schema is the
 * benchmark's own, so every job in it is one of ours), or until `timeoutMs` has passed.
 * Reports the count to `progress`. Resolves with the last count seen.
 */
export async function waitForFinalJobs(
  queue: TaskQueue,
  target: number,
  timeoutMs: number,
  progress: Progress,
): Promise<number> {
  const deadline = Date.now() + timeoutMs;
  for (;;) {
    const { depth } = await queue.metrics();
    const final = depth.done + depth.dead;
    progress.update(Math.min(final, target));
    if (final >= target || Date.now() >= deadline) return final;
    await sleep(POLL_INTERVAL_MS);
  }
}
