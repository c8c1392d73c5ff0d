/** Summary statistics of the benchmarks' samples. */

/**
 * The q-quantile (0 ≤ q ≤ 1) of ascending `sorted` values by linear interpolation between closest
 * ranks (NumPy's default, "type 7"): q = 0 is the minimum, q = 1 the maximum. NaN when empty.
 */
export function percentile(sorted: readonly number[], q: number): number {
  if (q < 0 || q > 1 || Number.isNaN(q)) throw new RangeError(`quantile must be in [0, 1], got ${q}`);
  if (sorted.length === 0) return Number.NaN;
  const position = (sorted.length - 1) * q;
  const below = Math.floor(position);
  const lower = sorted[below] as number;
  const upper = sorted[Math.min(below + 1, sorted.length - 1)] as number;
  return lower + (upper - lower) * (position - below);
}

/** Quantiles of a latency sample, milliseconds (NaN fields when the sample is empty). */
export interface LatencySummaryMs {
  count: number;
  p50Ms: number;
  p75Ms: number;
  p90Ms: number;
  p95Ms: number;
  p99Ms: number;
  maxMs: number;
  meanMs: number;
}

/** p50/p75/p90/p95/p99/max/mean of latencies given in milliseconds. */
export function summarizeMs(valuesMs: readonly number[]): LatencySummaryMs {
  const sorted = [...valuesMs].sort((a, b) => a - b);
  const sum = sorted.reduce((a, b) => a + b, 0);
  return {
    count: sorted.length,
    p50Ms: percentile(sorted, 0.5),
    p75Ms: percentile(sorted, 0.75),
    p90Ms: percentile(sorted, 0.9),
    p95Ms: percentile(sorted, 0.95),
    p99Ms: percentile(sorted, 0.99),
    maxMs: sorted.length ? (sorted.at(-1) as number) : Number.NaN,
    meanMs: sorted.length ? sum / sorted.length : Number.NaN,
  };
}

/** Smallest and largest of `values` (±Infinity when empty), without spreading a large array. */
export function extent(values: Iterable<number>): { min: number; max: number } {
  let min = Number.POSITIVE_INFINITY;
  let max = Number.NEGATIVE_INFINITY;
  for (const v of values) {
    if (v < min) min = v;
    if (v > max) max = v;
  }
  return { min, max };
}

/** `value` with `digits` decimals, or "n/a" when it is not finite. */
export function fixed(value: number, digits: number): string {
  return Number.isFinite(value) ? value.toFixed(digits) : "n/a";
}

/** Rounds for the JSON record: finite numbers to `digits` decimals, anything else to null. */
export function round(value: number, digits = 3): number | null {
  if (!Number.isFinite(value)) return null;
  const factor = 10 ** digits;
  return Math.round(value * factor) / factor;
}
