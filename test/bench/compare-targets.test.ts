/**
 * bench:compare's verdicts on the performance issue's targets: each is a ratio within one run (or an
 * absolute figure), met or missed, and a missed one says by how much.
 */
import assert from "node:assert/strict";
import { it } from "node:test";
import { evaluateTargets, targetsTable } from "../../bench/compare/table.js";
import {
  blankReport,
  type ResultRow,
  type SystemName,
  type SystemReport,
} from "../../bench/compare/types.js";

function report(system: SystemName, figures: Partial<ResultRow>): SystemReport {
  const r = blankReport(system, "", "PostgreSQL");
  Object.assign(r.row, figures);
  return r;
}

const run = [
  report("taskqueue", {
    enqueue_bulk_per_s: 60_000,
    enqueue_single_per_s: 20_000,
    drain_per_s: 22_000,
    pickup_p50_ms: 3.6,
    pickup_p99_ms: 6,
    claim_latency_ratio_1m: 1.05,
  }),
  report("taskqueue-http", { enqueue_bulk_per_s: 40_000, enqueue_single_per_s: 2_500 }),
  // The drain's best peer is taken among per-job handlers only: pg-boss-batch's 30,000 does not count.
  report("pg-boss-batch", { enqueue_bulk_per_s: 20_000, drain_per_s: 30_000 }),
  report("graphile-worker", { enqueue_bulk_per_s: 25_000, enqueue_single_per_s: 1_000, drain_per_s: 20_000 }),
  report("sql-floor", { drain_per_s: 25_000 }),
];

it("each target is met or missed by its ratio to the best peer, to sql-floor, or by its figure", () => {
  const verdicts = Object.fromEntries(
    evaluateTargets(run).map((t) => [t.target, [t.met, Number(t.measured?.toFixed(3))]]),
  );
  assert.deepEqual(verdicts, {
    "(a) bulk enqueue, library ≥ 1.5× best peer": [true, 2.4],
    "(a) bulk enqueue, HTTP ≥ 1.5× best peer": [true, 1.6],
    "(b) single enqueue, library ≥ 3× best peer": [true, 20],
    "(b) single enqueue, HTTP ≥ 2× best peer": [true, 2.5],
    "(c) drain ≥ 1.2× best per-job peer": [false, 1.1],
    "(c) drain ≥ 0.8× sql-floor": [true, 0.88],
    "(d) pickup p50 < 3 ms": [false, 3.6],
    "(d) pickup p99 < 8 ms": [true, 6],
    "(e) claim latency, 1M finished ÷ empty ≤ 1.2": [true, 1.05],
  });
});

it("a missed target says by how much; one not measured in the run says so", () => {
  const partial = run.filter((r) => r.row.system !== "taskqueue-http");
  const table = targetsTable(evaluateTargets(partial));
  assert.match(table, /\(c\) drain ≥ 1\.2× best per-job peer +1\.10× +MISSED by 8\.3 %/);
  assert.match(table, /\(d\) pickup p50 < 3 ms +3\.60 ms +MISSED by 20\.0 %/);
  assert.match(table, /\(d\) pickup p99 < 8 ms +6\.00 ms +met \(25\.0 % margin\)/);
  assert.match(table, /\(a\) bulk enqueue, HTTP ≥ 1\.5× best peer +— +not measured in this run/);
});
