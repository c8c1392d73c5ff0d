/** Bounded concurrency for the benchmarks' request loops. */

/**
 * Runs `task(i)` for i = 0 … count − 1 with at most `inFlight` running at once; resolves with the
 * results in index order. The first rejection rejects the whole run (no new tasks start after it).
 */
export async function runPool<T>(
  count: number,
  inFlight: number,
  task: (index: number) => Promise<T>,
): Promise<T[]> {
  const results = new Array<T>(count);
  let next = 0;
  let failed = false;
  const lane = async () => {
    while (!failed && next < count) {
      const index = next++;
      try {
        results[index] = await task(index);
      } catch (error) {
        failed = true;
        throw error;
      }
    }
  };
  await Promise.all(Array.from({ length: Math.max(1, Math.min(inFlight, count)) }, lane));
  return results;
}
