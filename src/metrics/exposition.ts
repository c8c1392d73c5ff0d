/**
 * Metrics whose values are computed at scrape time from a snapshot (the database's counters), in
 * prom-client's registry. prom-client's own Counter and Histogram only grow in this process; these
 * report totals kept elsewhere, so they hand the registry their samples directly (the registry's
 * metric interface: `get()` returning name, help, type and values).
 */
import { collectDefaultMetrics, type Metric, type Registry } from "prom-client";

/** One sample: labels and value, and the series name when it differs from the metric's. */
export interface Sample {
  labels: Record<string, string | number>;
  value: number;
  metricName?: string;
}

/** The Prometheus metric types these snapshots report. */
export type SnapshotType = "counter" | "gauge" | "histogram";

/**
 * Registers a metric named `name` in `registry` whose samples `samples()` returns at each scrape.
 * A counter's name ends in `_total` (Prometheus' convention; `promtool check metrics` asks for it).
 */
export function snapshotMetric(
  registry: Registry,
  p: { name: string; help: string; type: SnapshotType; samples: () => Sample[] },
): void {
  const metric = {
    name: p.name,
    help: p.help,
    type: p.type,
    aggregator: "sum",
    get: () => ({ name: p.name, help: p.help, type: p.type, aggregator: "sum", values: p.samples() }),
    reset: () => undefined,
  };
  registry.registerMetric(metric as unknown as Metric);
}

/**
 * The samples of one histogram series: cumulative `_bucket{le}` counts over `boundsSeconds` and
 * +Inf, `_sum` and `_count`. `counts[i]` is the count of bucket `i` (not cumulative; index
 * `boundsSeconds.length` is +Inf).
 */
export function histogramSamples(
  name: string,
  labels: Record<string, string>,
  boundsSeconds: readonly number[],
  counts: readonly number[],
  sumSeconds: number,
): Sample[] {
  const samples: Sample[] = [];
  let cumulative = 0;
  for (let i = 0; i <= boundsSeconds.length; i++) {
    cumulative += counts[i] ?? 0;
    const le = i < boundsSeconds.length ? String(boundsSeconds[i]) : "+Inf";
    samples.push({ metricName: `${name}_bucket`, labels: { ...labels, le }, value: cumulative });
  }
  samples.push({ metricName: `${name}_sum`, labels, value: sumSeconds });
  samples.push({ metricName: `${name}_count`, labels, value: cumulative });
  return samples;
}

/**
 * prom-client's default metrics that are gauges named `_total`, which `promtool check metrics`
 * refuses (a `_total` name is a counter's); `nodejs_active_handles` and the like carry the same
 * figures by type.
 */
const GAUGES_NAMED_TOTAL = [
  "nodejs_active_handles_total",
  "nodejs_active_requests_total",
  "nodejs_active_resources_total",
];

/** Adds this process's metrics (prom-client's defaults: `process_*`, `nodejs_*`) to `registry`. */
export function processMetrics(registry: Registry): void {
  collectDefaultMetrics({ register: registry });
  for (const name of GAUGES_NAMED_TOTAL) registry.removeSingleMetric(name);
}
