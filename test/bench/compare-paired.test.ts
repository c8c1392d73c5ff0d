/**
 * bench:compare's paired ratios (`--interleave`): per round taskqueue ÷ each other system, their
 * median, min–max, spread and reading; the ratio table's ÷ taskqueue-baseline column; and the
 * targets read from the paired medians of an interleaved run.
 */
import assert from "node:assert/strict";
import { describe, it } from "node:test";
import { median } from "../../bench/compare/harness.js";
import {
  intervalCoverage,
  medianInterval,
  type PairedRatio,
  pairedRatios,
  pairedTable,
  reading,
  spread,
} from "../../bench/compare/paired.js";
import { evaluateTargets, notesText, ratioTable } from "../../bench/compare/table.js";
import {
  blankReport,
  type Missing,
  type ResultRow,
  type RoundFigure,
  type RoundFigures,
  type SystemName,
  type SystemReport,
} from "../../bench/compare/types.js";

/** A report with these rounds; each row figure is the median of its rounds, as the runner sets it. */
function report(
  system: SystemName,
  rounds: RoundFigures[],
  missing: Partial<Record<keyof ResultRow, Missing>> = {},
): SystemReport {
  const r = blankReport(system, "", "PostgreSQL");
  r.rounds = rounds;
  r.missing = missing;
  const figures: RoundFigure[] = [
    "enqueue_bulk_per_s",
    "enqueue_single_per_s",
    "drain_per_s",
    "pickup_p50_ms",
    "pickup_p99_ms",
  ];
  for (const f of figures)
    r.row[f] = median(rounds.map((x) => x[f]).filter((v): v is number => typeof v === "number"));
  return r;
}

const find = (ratios: PairedRatio[], against: SystemName, figure: RoundFigure) => {
  const found = ratios.find((p) => p.against === against && p.figure === figure);
  assert.ok(found, `no paired ratio against ${against} for ${figure}`);
  return found;
};

const close = (actual: number | null, expected: number, what: string) =>
  assert.ok(actual !== null && Math.abs(actual - expected) < 1e-9, `${what}: ${actual} ≠ ${expected}`);

describe("paired ratios", () => {
  it("are taskqueue ÷ X round by round; the median, min and max leave out a round missing on either side", () => {
    const ours = report("taskqueue", [
      { enqueue_bulk_per_s: 100 },
      { enqueue_bulk_per_s: 60 },
      { enqueue_bulk_per_s: 110 },
      { enqueue_bulk_per_s: null },
      { enqueue_bulk_per_s: 90 },
    ]);
    const base = report("taskqueue-baseline", [
      { enqueue_bulk_per_s: 100 },
      { enqueue_bulk_per_s: 50 },
      { enqueue_bulk_per_s: 100 },
      { enqueue_bulk_per_s: 95 },
      { enqueue_bulk_per_s: 100 },
    ]);
    const p = find(pairedRatios([ours, base]), "taskqueue-baseline", "enqueue_bulk_per_s");
    assert.deepEqual(
      p.perRound.map((v) => (v === null ? null : Number(v.toFixed(6)))),
      [1, 1.2, 1.1, null, 0.9],
    );
    assert.equal(p.n, 4);
    close(p.median, 1.05, "median");
    close(p.min, 0.9, "min");
    close(p.max, 1.2, "max");
    close(spread(p), 1.2 / 1.05 - 1, "spread"); // here min and max are as far from the median
    assert.equal(reading(p), "not resolved");
  });

  it("cancel a slow phase of the machine that hits both systems of a round: A/A within ±2 % while each system's own figures move by ±40 %", () => {
    // The machine's speed in five rounds; both builds of the same code see the same speed, with
    // ±1 % of their own noise.
    const speed = [1.0, 0.6, 0.9, 0.7, 1.0];
    const noiseA = [1.0, 1.01, 0.99, 1.0, 1.01];
    const noiseB = [1.01, 1.0, 1.0, 0.99, 0.99];
    const a = report(
      "taskqueue",
      speed.map((s, i) => ({ drain_per_s: 40_000 * s * (noiseA[i] as number) })),
    );
    const b = report(
      "taskqueue-baseline",
      speed.map((s, i) => ({ drain_per_s: 40_000 * s * (noiseB[i] as number) })),
    );
    const own = (r: SystemReport) => r.rounds.map((f) => f.drain_per_s as number);
    const ownSpread = (values: number[]) => {
      const m = median(values) as number;
      return Math.max(Math.max(...values) / m - 1, 1 - Math.min(...values) / m);
    };
    assert.ok(ownSpread(own(a)) > 0.3 && ownSpread(own(b)) > 0.3);
    const p = find(pairedRatios([a, b]), "taskqueue-baseline", "drain_per_s");
    assert.ok(Math.abs((p.median as number) - 1) < 0.02, `median ${p.median}`);
    assert.ok((spread(p) as number) < 0.02, `spread ${spread(p)}`);
  });

  it("read better or worse only when every round is on one side of 1.00, by the figure's direction", () => {
    const ours = report("taskqueue", [
      { drain_per_s: 110, pickup_p50_ms: 2 },
      { drain_per_s: 105, pickup_p50_ms: 2.5 },
      { drain_per_s: 108, pickup_p50_ms: 2.2 },
    ]);
    const peer = report("graphile-worker", [
      { drain_per_s: 100, pickup_p50_ms: 3 },
      { drain_per_s: 100, pickup_p50_ms: 3 },
      { drain_per_s: 100, pickup_p50_ms: 3 },
    ]);
    const slower = report("sql-floor", [{ drain_per_s: 120 }, { drain_per_s: 120 }, { drain_per_s: 120 }]);
    const ratios = pairedRatios([ours, peer, slower]);
    assert.equal(reading(find(ratios, "graphile-worker", "drain_per_s")), "better");
    assert.equal(reading(find(ratios, "graphile-worker", "pickup_p50_ms")), "better"); // lower is better
    assert.equal(reading(find(ratios, "sql-floor", "drain_per_s")), "worse");
    const none = find(ratios, "sql-floor", "pickup_p50_ms");
    assert.equal(none.n, 0);
    assert.equal(reading(none), "no rounds");
    const oneRound = pairedRatios([
      report("taskqueue", [{ drain_per_s: 2 }]),
      report("bullmq", [{ drain_per_s: 1 }]),
    ]);
    assert.equal(reading(find(oneRound, "bullmq", "drain_per_s")), "one round");
  });

  it("leave out a figure that is n/a on either side, and are empty when taskqueue did not run", () => {
    const na: Missing = { kind: "n/a", reason: "enqueue-only row" };
    const ours = report("taskqueue", [{ enqueue_bulk_per_s: 10, drain_per_s: 5 }]);
    const http = report("taskqueue-http", [{ enqueue_bulk_per_s: 5 }], { drain_per_s: na });
    const figures = pairedRatios([ours, http]).map((p) => p.figure);
    assert.ok(figures.includes("enqueue_bulk_per_s"));
    assert.ok(!figures.includes("drain_per_s"));
    assert.deepEqual(pairedRatios([http]), []);
  });

  it("the interval for the median ratio is min–max up to 8 rounds, then narrower order statistics with ≥ 95 % coverage", () => {
    assert.equal(intervalCoverage(5, 1), 1 - 2 / 32); // min–max of 5: 93.75 %
    assert.equal(intervalCoverage(4, 1), 0.875);
    assert.equal(intervalCoverage(9, 2), 1 - (2 * (1 + 9)) / 512);
    assert.equal(intervalCoverage(4, 3), 0); // no such interval
    const values = (n: number) => Array.from({ length: n }, (_, i) => 1 + i / 100); // 1.00, 1.01, …
    assert.equal(medianInterval([1]), null);
    assert.deepEqual(medianInterval(values(5)), { low: 1, high: values(5)[4], coverage: 0.9375 });
    const eight = medianInterval(values(8));
    assert.deepEqual([eight?.low, eight?.high], [1, values(8)[7]]);
    const nine = medianInterval(values(9));
    assert.deepEqual([nine?.low, nine?.high], [values(9)[1], values(9)[7]]);
    assert.ok((nine?.coverage ?? 0) >= 0.95);
    const twenty = medianInterval([...values(20)].reverse());
    assert.deepEqual([twenty?.low, twenty?.high], [values(20)[5], values(20)[14]]); // the 6th smallest and largest
    assert.ok((twenty?.coverage ?? 0) >= 0.95 && intervalCoverage(20, 7) < 0.95);
  });

  it("print one line per figure and system: median, interval, min–max, spread, reading and each round", () => {
    const ours = report("taskqueue", [{ drain_per_s: 103 }, { drain_per_s: 98 }, { drain_per_s: null }]);
    const base = report("taskqueue-baseline", [
      { drain_per_s: 100 },
      { drain_per_s: 100 },
      { drain_per_s: 100 },
    ]);
    const table = pairedTable(pairedRatios([ours, base]));
    assert.match(
      table,
      /drain\/s ↑ +taskqueue-baseline +1\.005× +0\.980–1\.030× \(50 %\) +0\.980–1\.030× +±2\.5 % +not resolved +1\.030 0\.980 —/,
    );
    assert.match(
      table.split("\n")[0] ?? "",
      /figure +taskqueue ÷ +median +interval +min–max +spread +reading +per round/,
    );
  });
});

describe("the ratio table and the targets with a baseline", () => {
  const ours = report("taskqueue", [{ drain_per_s: 44_000, enqueue_bulk_per_s: 100_000 }]);
  const base = report("taskqueue-baseline", [{ drain_per_s: 40_000, enqueue_bulk_per_s: 100_000 }]);
  const peer = report("graphile-worker", [{ drain_per_s: 40_000, enqueue_bulk_per_s: 50_000 }]);

  it("shows taskqueue ÷ taskqueue-baseline for every figure next to the ratio to the best peer", () => {
    const table = ratioTable([ours, base, peer]);
    assert.match(table.split("\n")[0] ?? "", /taskqueue ÷ peer .* taskqueue-baseline +÷ taskqueue-baseline$/);
    assert.match(
      table,
      /drain\/s +44,000 +graphile-worker +40,000 +1\.10× \(better\) .* 40,000 +1\.10× \(better\)/,
    );
    assert.match(
      table,
      /bulk enq\/s +100,000 +graphile-worker +50,000 +2\.00× \(better\) .* 100,000 +1\.00× \(even\)/,
    );
    assert.doesNotMatch(ratioTable([ours, peer]), /taskqueue-baseline/);
  });

  it("reads a ratio target from the paired median when the run was interleaved", () => {
    const drain = "(c) drain ≥ 1.2× best per-job peer";
    const plain = evaluateTargets([ours, base, peer]).find((t) => t.target === drain);
    assert.equal(plain?.measured, 1.1);
    const paired = evaluateTargets([ours, base, peer], (o, against, figure) =>
      o === "taskqueue" && against === "graphile-worker" && figure === "drain_per_s" ? 1.25 : null,
    ).find((t) => t.target === drain);
    assert.equal(paired?.measured, 1.25);
    assert.equal(paired?.met, true);
  });

  it("the notes list each round's single enqueue and pickup when there were several", () => {
    const r = report("taskqueue", [
      { enqueue_single_per_s: 30_000, pickup_p50_ms: 2.5, pickup_p99_ms: 6 },
      { enqueue_single_per_s: null, pickup_p50_ms: 2.75, pickup_p99_ms: 7.126 },
    ]);
    const notes = notesText([r]);
    assert.match(notes, /single enqueue runs: 30,000, — jobs\/s/);
    assert.match(notes, /pickup p50\/p99 runs: 2\.50\/6\.00, 2\.75\/7\.13 ms/);
  });
});
