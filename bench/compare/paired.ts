/**
 * Paired ratios of an interleaved run (`--interleave`): per round, taskqueue's figure ÷ another
 * system's figure of the same round, measured seconds apart; then the median of those per-round
 * ratios and their min–max. A slow phase of the machine that lasts longer than a round's window
 * hits both sides of a ratio alike and cancels in it, where it would not cancel in a ratio of two
 * medians taken minutes apart.
 *
 * How to read them: if the rounds are independent, each per-round ratio is below the true median
 * ratio with probability ½, so the k-th smallest and the k-th largest of n ratios enclose it with
 * probability 1 − 2·P(Binomial(n, ½) ≤ k − 1) (the distribution-free interval for a median; the
 * sign test's). The interval printed takes the largest k whose coverage is at least 95 %: min–max
 * up to 8 rounds (88 % for 4, 94 % for 5, 99 % for 8), the 2nd smallest to the 2nd largest from 9
 * (96 %), the 6th from 20 (96 %). A difference is resolved when 1.00 lies outside it.
 */
import { median } from "./harness.js";
import { COLUMNS, CPU_COLUMNS, numberText, render } from "./table.js";
import type { RoundFigure, SystemName, SystemReport } from "./types.js";

/** taskqueue ÷ one other system on one figure, round by round. */
export interface PairedRatio {
  /** The row divided (e.g. taskqueue). */
  ours: SystemName;
  /** The row it is divided by. */
  against: SystemName;
  figure: RoundFigure;
  /** Which way is better for the figure (for a ratio: above 1 is better when "higher"). */
  better: "higher" | "lower";
  /** Per round (index 0 = round 1): ours ÷ theirs, null where either figure is missing or theirs is 0. */
  perRound: (number | null)[];
  /** Rounds with a ratio. */
  n: number;
  median: number | null;
  min: number | null;
  max: number | null;
  /** The interval for the median ratio ({@link medianInterval}); null for fewer than 2 rounds. */
  interval: MedianInterval | null;
}

/** An interval for a median from the order statistics of a sample. */
export interface MedianInterval {
  low: number;
  high: number;
  /** The probability that it holds the true median, if the values are independent. */
  coverage: number;
}

/** 1 − 2·P(Binomial(n, ½) ≤ k − 1): the coverage of [k-th smallest, k-th largest] of n values. */
export function intervalCoverage(n: number, k: number): number {
  if (k < 1 || 2 * k > n) return 0;
  let tail = 0;
  let choose = 1; // C(n, 0)
  for (let i = 0; i < k; i++) {
    tail += choose;
    choose = (choose * (n - i)) / (i + 1);
  }
  return 1 - 2 * tail * 2 ** -n;
}

/**
 * The distribution-free interval for the median of `values`: [k-th smallest, k-th largest] with
 * the largest k whose coverage is at least `level` (k = 1, min–max, when no k reaches it); null
 * for fewer than 2 values.
 */
export function medianInterval(values: readonly number[], level = 0.95): MedianInterval | null {
  if (values.length < 2) return null;
  const sorted = [...values].sort((a, b) => a - b);
  const n = sorted.length;
  let k = 1;
  while (intervalCoverage(n, k + 1) >= level) k++;
  return { low: sorted[k - 1] as number, high: sorted[n - k] as number, coverage: intervalCoverage(n, k) };
}

/** The figures measured per round, in table order. */
export const ROUND_COLUMNS = [...COLUMNS, ...CPU_COLUMNS].filter(
  (c): c is (typeof COLUMNS)[number] & { key: RoundFigure } => c.key !== "claim_latency_ratio_1m",
);

/**
 * Per-round ratios `ours` ÷ X for every other system X of the run (in report order) and every
 * figure measured by round. A figure that is n/a on either side is left out; one that failed in
 * every round is kept, with n 0. Empty when `ours` did not run.
 */
export function pairedRatios(
  reports: readonly SystemReport[],
  ours: SystemName = "taskqueue",
): PairedRatio[] {
  const mine = reports.find((r) => r.row.system === ours);
  if (!mine) return [];
  const out: PairedRatio[] = [];
  for (const theirs of reports) {
    if (theirs === mine) continue;
    for (const column of ROUND_COLUMNS) {
      const figure = column.key;
      if (mine.missing[figure]?.kind === "n/a" || theirs.missing[figure]?.kind === "n/a") continue;
      const rounds = Math.max(mine.rounds.length, theirs.rounds.length);
      const perRound: (number | null)[] = [];
      for (let r = 0; r < rounds; r++) {
        const a = mine.rounds[r]?.[figure];
        const b = theirs.rounds[r]?.[figure];
        perRound.push(typeof a === "number" && typeof b === "number" && b > 0 ? a / b : null);
      }
      const ratios = perRound.filter((v): v is number => v !== null);
      out.push({
        ours,
        against: theirs.row.system,
        figure,
        better: column.better,
        perRound,
        n: ratios.length,
        median: median(ratios),
        min: ratios.length > 0 ? Math.min(...ratios) : null,
        max: ratios.length > 0 ? Math.max(...ratios) : null,
        interval: medianInterval(ratios),
      });
    }
  }
  return out;
}

/**
 * The spread of the per-round ratios around their median, as a share of it: the larger of
 * max ÷ median − 1 and 1 − min ÷ median (0.03 = ±3 %). null without a ratio.
 */
export function spread(p: PairedRatio): number | null {
  if (p.median === null || p.min === null || p.max === null || p.median === 0) return null;
  return Math.max(p.max / p.median - 1, 1 - p.min / p.median);
}

/**
 * What the rounds say: "better" or "worse" when the interval for the median ratio lies on one
 * side of 1.00, else "not resolved"; "one round" when there is no interval to judge by.
 */
export function reading(p: PairedRatio): "better" | "worse" | "not resolved" | "one round" | "no rounds" {
  if (p.n === 0) return "no rounds";
  if (p.interval === null) return "one round";
  const above = p.interval.low > 1;
  const below = p.interval.high < 1;
  if (!above && !below) return "not resolved";
  return above === (p.better === "higher") ? "better" : "worse";
}

/** The table of paired ratios: one line per figure and system divided by. */
export function pairedTable(ratios: readonly PairedRatio[]): string {
  if (ratios.length === 0) return "(no paired ratios: taskqueue did not run)";
  const ours = ratios[0]?.ours ?? "taskqueue";
  const header = ["figure", `${ours} ÷`, "median", "interval", "min–max", "spread", "reading", "per round"];
  const rows = ratios.map((p) => {
    const column = ROUND_COLUMNS.find((c) => c.key === p.figure);
    const s = spread(p);
    return [
      `${column?.title ?? p.figure} ${p.better === "higher" ? "↑" : "↓"}`,
      p.against,
      p.median === null ? "—" : `${numberText(p.median, 3)}×`,
      p.interval === null
        ? "—"
        : `${numberText(p.interval.low, 3)}–${numberText(p.interval.high, 3)}× (${numberText(p.interval.coverage * 100, 0)} %)`,
      p.min === null || p.max === null ? "—" : `${numberText(p.min, 3)}–${numberText(p.max, 3)}×`,
      s === null ? "—" : `±${numberText(s * 100, 1)} %`,
      reading(p),
      p.perRound.map((v) => (v === null ? "—" : numberText(v, 3))).join(" "),
    ];
  });
  return render([header, ...rows], [false, false, true, true, true, true, false, false]);
}
