/**
 * The printed comparison: one table with every system's figures, then taskqueue's ratio to the
 * best PostgreSQL peer per column (naming it), to sql-floor, and to the bullmq-redis reference.
 */
import {
  BASELINE,
  PEERS,
  PER_JOB_PEERS,
  type ResultRow,
  type RoundFigures,
  type SystemName,
  type SystemReport,
} from "./types.js";

export type Column = {
  key: Exclude<keyof ResultRow, "system" | "settings">;
  title: string;
  /** Which way is better. */
  better: "higher" | "lower";
  digits: number;
  /** Peers of this column (default PEERS). */
  peers?: readonly SystemName[];
};

export const COLUMNS: Column[] = [
  { key: "enqueue_bulk_per_s", title: "bulk enq/s", better: "higher", digits: 0 },
  { key: "enqueue_single_per_s", title: "single enq/s", better: "higher", digits: 0 },
  // The issue compares the drain with per-job handlers: pg-boss-batch hands 1,000 jobs to one call.
  { key: "drain_per_s", title: "drain/s", better: "higher", digits: 0, peers: PER_JOB_PEERS },
  { key: "pickup_p50_ms", title: "pickup p50 ms", better: "lower", digits: 2 },
  { key: "pickup_p99_ms", title: "pickup p99 ms", better: "lower", digits: 2 },
  { key: "claim_latency_ratio_1m", title: "1M/empty", better: "lower", digits: 2 },
];

/**
 * CPU time per job of the enqueue and drain passes (cpu.ts): the work a system's processes and
 * their PostgreSQL backends did, which other load on the machine does not inflate as it does the
 * wall-clock rates.
 */
export const CPU_COLUMNS: Column[] = [
  { key: "enqueue_bulk_cpu_us_per_job", title: "bulk CPU µs/job", better: "lower", digits: 2 },
  { key: "enqueue_single_cpu_us_per_job", title: "single CPU µs/job", better: "lower", digits: 2 },
  { key: "drain_cpu_us_per_job", title: "drain CPU µs/job", better: "lower", digits: 2 },
];

/** `value` with `digits` decimals and thousands separators (en-US). */
export const numberText = (value: number, digits: number) =>
  value.toLocaleString("en-US", { minimumFractionDigits: digits, maximumFractionDigits: digits });

function cell(report: SystemReport, column: Column): string {
  const value = report.row[column.key];
  const missing = report.missing[column.key];
  if (value === null) return missing?.kind === "n/a" ? "n/a" : "FAILED";
  const text = numberText(value, column.digits);
  return missing?.kind === "n/a" ? `${text}*` : text;
}

/** Rows as aligned text columns, the first row a header underlined with dashes. */
export function render(rows: string[][], alignRight: boolean[]): string {
  const widths = rows[0]?.map((_, c) => Math.max(...rows.map((r) => (r[c] ?? "").length))) ?? [];
  const line = (r: string[]) =>
    r
      .map((text, c) => (alignRight[c] ? text.padStart(widths[c] ?? 0) : text.padEnd(widths[c] ?? 0)))
      .join("  ")
      .trimEnd();
  const rule = widths.map((w) => "-".repeat(w)).join("  ");
  return [line(rows[0] ?? []), rule, ...rows.slice(1).map(line)].join("\n");
}

/** The main table: one row per system, `columns` (default the headline figures) and the settings. */
export function figuresTable(reports: SystemReport[], columns: Column[] = COLUMNS, settings = true): string {
  const header = ["system", ...columns.map((c) => `${c.title} ${c.better === "higher" ? "↑" : "↓"}`)];
  const rows = reports.map((r) => [r.row.system, ...columns.map((c) => cell(r, c))]);
  if (settings) {
    header.push("settings");
    for (const [i, r] of reports.entries()) rows[i]?.push(r.row.settings);
  }
  return render([header, ...rows], [false, ...columns.map(() => true), false]);
}

/** The best of `candidates` in a column (skipping n/a-by-construction values), or null. */
function best(reports: Map<SystemName, SystemReport>, candidates: readonly SystemName[], column: Column) {
  let found: { system: SystemName; value: number } | null = null;
  for (const system of candidates) {
    const report = reports.get(system);
    const value = report?.row[column.key];
    if (report === undefined || value === null || value === undefined || report.missing[column.key]) continue;
    if (!found || (column.better === "higher" ? value > found.value : value < found.value))
      found = { system, value };
  }
  return found;
}

function ratioText(ours: number | null, theirs: number | null, column: Column): string {
  if (ours === null || theirs === null || theirs === 0) return "—";
  const ratio = ours / theirs;
  const ahead = column.better === "higher" ? ratio > 1 : ratio < 1;
  const verdict = Math.abs(ratio - 1) < 0.005 ? "even" : ahead ? "better" : "worse";
  return `${numberText(ratio, 2)}× (${verdict})`;
}

/**
 * `system` (a taskqueue row) ÷ best peer, ÷ sql-floor, ÷ bullmq-redis and, for the taskqueue row
 * of a run with `--baseline`, ÷ taskqueue-baseline, per column: ratios of the rows' figures.
 */
export function ratioTable(reports: SystemReport[], system: SystemName = "taskqueue"): string {
  const byName = new Map(reports.map((r) => [r.row.system, r]));
  const ours = byName.get(system);
  if (!ours) return `(${system} did not run: no ratios)`;
  const floor = byName.get("sql-floor");
  const redis = byName.get("bullmq-redis");
  const baseline = system === "taskqueue" ? byName.get(BASELINE) : undefined;
  const header = [
    "column",
    system,
    "best peer",
    "peer value",
    "taskqueue ÷ peer",
    "sql-floor",
    "÷ sql-floor",
  ];
  if (redis) header.push("bullmq-redis", "÷ bullmq-redis");
  if (baseline) header.push(BASELINE, `÷ ${BASELINE}`);
  const rows: string[][] = [header];
  const value = (report: SystemReport | undefined, column: Column) =>
    report && !report.missing[column.key] ? report.row[column.key] : null;
  for (const column of [...COLUMNS, ...CPU_COLUMNS]) {
    const mine = ours.missing[column.key] ? null : ours.row[column.key];
    const peer = best(byName, column.peers ?? PEERS, column);
    const floorValue = floor && !floor.missing[column.key] ? floor.row[column.key] : null;
    const row = [
      column.title,
      mine === null ? "—" : numberText(mine, column.digits),
      peer?.system ?? "—",
      peer ? numberText(peer.value, column.digits) : "—",
      ratioText(mine, peer?.value ?? null, column),
      floorValue === null ? "—" : numberText(floorValue, column.digits),
      ratioText(mine, floorValue, column),
    ];
    for (const other of [redis, baseline]) {
      if (!other) continue;
      const otherValue = value(other, column);
      row.push(
        otherValue === null ? "—" : numberText(otherValue, column.digits),
        ratioText(mine, otherValue, column),
      );
    }
    rows.push(row);
  }
  return render(rows, [false, true, false, ...Array<boolean>(header.length - 3).fill(true)]);
}

/** Why figures are missing, drain repeats, (e) details and each system's notes. */
export function notesText(reports: SystemReport[]): string {
  const lines: string[] = [];
  for (const r of reports) {
    const items: string[] = [`backend: ${r.backend}`];
    const reasons = new Map<string, string[]>();
    for (const [field, missing] of Object.entries(r.missing)) {
      const key = `${missing.kind === "n/a" ? "n/a" : "FAILED"}: ${missing.reason}`;
      reasons.set(key, [...(reasons.get(key) ?? []), field]);
    }
    for (const [reason, fields] of reasons) items.push(`${fields.join(", ")} ${reason}`);
    if (r.bulkRuns.length > 1)
      items.push(`bulk enqueue runs: ${r.bulkRuns.map((v) => numberText(v, 0)).join(", ")} jobs/s`);
    if (r.drainRuns.length > 1)
      items.push(`drain runs: ${r.drainRuns.map((v) => numberText(v, 0)).join(", ")} jobs/s`);
    const byRound = (key: keyof RoundFigures, digits: number) =>
      r.rounds.map((f) => (typeof f[key] === "number" ? numberText(f[key], digits) : "—"));
    if (r.rounds.filter((f) => f.enqueue_single_per_s !== undefined).length > 1)
      items.push(`single enqueue runs: ${byRound("enqueue_single_per_s", 0).join(", ")} jobs/s`);
    if (r.rounds.filter((f) => f.pickup_p50_ms !== undefined).length > 1) {
      const p99 = byRound("pickup_p99_ms", 2);
      const pairs = byRound("pickup_p50_ms", 2).map((p50, i) => `${p50}/${p99[i]}`);
      items.push(`pickup p50/p99 runs: ${pairs.join(", ")} ms`);
    }
    const c = r.claim;
    if (c.emptyBeforeMs !== null || c.seededMedianMs !== null)
      items.push(
        `(e) median pickup ms: empty ${c.emptyBeforeMs ?? "—"}, with 1M finished ${c.seededMedianMs ?? "—"}, ` +
          `empty again ${c.emptyAfterMs ?? "—"}` +
          (c.seedSeconds !== null ? `; seed + VACUUM ANALYZE took ${c.seedSeconds} s` : ""),
      );
    items.push(...r.notes);
    lines.push(`${r.row.system}:`, ...items.map((i) => `  - ${i}`));
  }
  return lines.join("\n");
}

/** One target of the performance issue, evaluated on one run. */
export interface TargetResult {
  target: string;
  /** What was measured: a ratio (×) or milliseconds; null when a figure is missing. */
  measured: number | null;
  unit: "×" | "ms";
  /** The bound: at least (ratios) or under (milliseconds). */
  bound: number;
  met: boolean | null;
  /** How far from the bound, as a share of it: positive = margin, negative = missed by. */
  margin: number | null;
}

type TargetSpec = {
  target: string;
  system: SystemName;
  column: Column["key"];
  /** `peer`: ratio to the best peer of the column; `sql-floor`: ratio to it; `value`: the figure. */
  against: "peer" | "sql-floor" | "value";
  bound: number;
};

/** The targets of the performance issue (item 4), as ratios within one run or absolute figures. */
const TARGETS: TargetSpec[] = [
  {
    target: "(a) bulk enqueue, library ≥ 1.5× best peer",
    system: "taskqueue",
    column: "enqueue_bulk_per_s",
    against: "peer",
    bound: 1.5,
  },
  {
    target: "(a) bulk enqueue, HTTP ≥ 1.5× best peer",
    system: "taskqueue-http",
    column: "enqueue_bulk_per_s",
    against: "peer",
    bound: 1.5,
  },
  {
    target: "(b) single enqueue, library ≥ 3× best peer",
    system: "taskqueue",
    column: "enqueue_single_per_s",
    against: "peer",
    bound: 3,
  },
  {
    target: "(b) single enqueue, HTTP ≥ 2× best peer",
    system: "taskqueue-http",
    column: "enqueue_single_per_s",
    against: "peer",
    bound: 2,
  },
  {
    target: "(c) drain ≥ 1.2× best per-job peer",
    system: "taskqueue",
    column: "drain_per_s",
    against: "peer",
    bound: 1.2,
  },
  {
    target: "(c) drain ≥ 0.8× sql-floor",
    system: "taskqueue",
    column: "drain_per_s",
    against: "sql-floor",
    bound: 0.8,
  },
  {
    target: "(d) pickup p50 < 3 ms",
    system: "taskqueue",
    column: "pickup_p50_ms",
    against: "value",
    bound: 3,
  },
  {
    target: "(d) pickup p99 < 8 ms",
    system: "taskqueue",
    column: "pickup_p99_ms",
    against: "value",
    bound: 8,
  },
  {
    target: "(e) claim latency, 1M finished ÷ empty ≤ 1.2",
    system: "taskqueue",
    column: "claim_latency_ratio_1m",
    against: "value",
    bound: 1.2,
  },
];

/**
 * A ratio of two rows on one figure measured in another way than as the ratio of the rows'
 * figures (the median of an interleaved run's per-round ratios), or null where there is none.
 */
export type RatioLookup = (ours: SystemName, against: SystemName, figure: Column["key"]) => number | null;

/**
 * Evaluates every target of the performance issue on this run's reports. A ratio target is
 * `pairedRatio` of the two rows where it gives one (an interleaved run), else the ratio of the
 * rows' figures; the best peer is chosen by the rows' figures either way.
 */
export function evaluateTargets(reports: SystemReport[], pairedRatio?: RatioLookup): TargetResult[] {
  const byName = new Map(reports.map((r) => [r.row.system, r]));
  return TARGETS.map((spec) => {
    const column = COLUMNS.find((c) => c.key === spec.column) as Column;
    const report = byName.get(spec.system);
    const value = report && !report.missing[spec.column] ? report.row[spec.column] : null;
    let measured: number | null = null;
    if (value !== null && spec.against === "value") measured = value;
    else if (value !== null) {
      const floor = byName.get("sql-floor");
      const other =
        spec.against === "peer"
          ? best(byName, column.peers ?? PEERS, column)
          : floor && !floor.missing[spec.column] && floor.row[spec.column] !== null
            ? { system: floor.row.system, value: floor.row[spec.column] as number }
            : null;
      const paired = other ? (pairedRatio?.(spec.system, other.system, spec.column) ?? null) : null;
      measured = paired ?? (other?.value ? value / other.value : null);
    }
    const unit = spec.column.endsWith("_ms") ? "ms" : "×";
    // Ratios and (e) are "at least"/"at most" bounds; pickup times are "under".
    const lowerIsBetter = spec.against === "value";
    const margin =
      measured === null
        ? null
        : lowerIsBetter
          ? (spec.bound - measured) / spec.bound
          : (measured - spec.bound) / spec.bound;
    const met =
      measured === null
        ? null
        : lowerIsBetter
          ? unit === "ms"
            ? measured < spec.bound
            : measured <= spec.bound
          : measured >= spec.bound;
    return { target: spec.target, measured, unit, bound: spec.bound, met, margin };
  });
}

/** The targets, each met or missed, and by how much. */
export function targetsTable(results: TargetResult[]): string {
  const rows = results.map((r) => [
    r.target,
    r.measured === null ? "—" : `${numberText(r.measured, 2)}${r.unit === "ms" ? " ms" : "×"}`,
    r.met === null
      ? "not measured in this run"
      : r.met
        ? `met (${numberText(Math.abs(r.margin ?? 0) * 100, 1)} % margin)`
        : `MISSED by ${numberText(Math.abs(r.margin ?? 0) * 100, 1)} %`,
  ]);
  return render([["target", "measured", "verdict"], ...rows], [false, true, false]);
}
