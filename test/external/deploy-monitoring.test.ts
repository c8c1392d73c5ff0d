/**
 * deploy/prometheus/alerts.yml passes `promtool check rules` and its unit tests
 * (`promtool test rules alerts.test.yml`); deploy/grafana/taskqueue.json is an importable
 * dashboard whose every query, like every alert, names only metrics taskqueue exports.
 */
import assert from "node:assert/strict";
import { spawnSync } from "node:child_process";
import { readFileSync } from "node:fs";
import { it } from "node:test";
import { fileURLToPath } from "node:url";
import { parse } from "yaml";
import { DatabaseMetrics } from "../../src/metrics/database.js";
import { WorkerProcessMetrics } from "../../src/metrics/worker.js";
import type { Ledger } from "../../src/queue/ledger.js";

const ROOT = new URL("../../../", import.meta.url);
const PROMETHEUS_DIR = fileURLToPath(new URL("deploy/prometheus/", ROOT));

function promtool(args: string[]): { status: number | null; output: string } {
  const r = spawnSync("promtool", args, { cwd: PROMETHEUS_DIR, encoding: "utf8", timeout: 60_000 });
  assert.ok(!r.error, `promtool could not run (Debian package prometheus): ${r.error?.message}`);
  return { status: r.status, output: `${r.stdout}${r.stderr}` };
}

/** Every series name the API's and a worker's registries export (histograms: _bucket, _sum, _count). */
function exportedSeries(): Set<string> {
  // The constructors read nothing: the ledger is only used at scrape time.
  const registries = [
    new DatabaseMetrics({} as Ledger, 30).registry,
    new WorkerProcessMetrics(() => 0).registry,
  ];
  const names = new Set<string>();
  for (const registry of registries)
    for (const metric of registry.getMetricsAsArray() as unknown as { name: string; type: string }[]) {
      names.add(metric.name);
      if (metric.type === "histogram")
        for (const s of ["_bucket", "_sum", "_count"]) names.add(metric.name + s);
    }
  return names;
}

/** Metric names in a PromQL expression (taskqueue's, process and Node ones). */
function metricNames(expr: string): string[] {
  return [...expr.matchAll(/\b(?:taskqueue|process|nodejs)_[a-z0-9_]+\b/g)].map((m) => m[0]);
}

it("alerts.yml passes promtool check rules", () => {
  const r = promtool(["check", "rules", "alerts.yml"]);
  assert.equal(r.status, 0, r.output);
  assert.match(r.output, /SUCCESS: 5 rules found/);
});

it("alerts.yml passes its unit tests: promtool test rules alerts.test.yml", () => {
  const r = promtool(["test", "rules", "alerts.test.yml"]);
  assert.equal(r.status, 0, r.output);
});

it("every alert names metrics taskqueue exports, and the five alerts are there", () => {
  const series = exportedSeries();
  const doc = parse(readFileSync(new URL("alerts.yml", `file://${PROMETHEUS_DIR}`), "utf8")) as {
    groups: { rules: { alert: string; expr: string }[] }[];
  };
  const rules = doc.groups.flatMap((g) => g.rules);
  assert.deepEqual(rules.map((r) => r.alert).sort(), [
    "TaskqueueDeadLettersGrowing",
    "TaskqueueExecutionP99High",
    "TaskqueueNoLiveWorkers",
    "TaskqueueOldestPendingTooOld",
    "TaskqueuePendingDepthHigh",
  ]);
  for (const rule of rules) {
    const names = metricNames(rule.expr);
    assert.ok(names.length > 0, `${rule.alert} names a metric`);
    for (const name of names) assert.ok(series.has(name), `${rule.alert}: ${name} is not exported`);
  }
});

it("the Grafana dashboard is importable JSON whose every query names an exported metric", () => {
  const series = exportedSeries();
  const dashboard = JSON.parse(readFileSync(new URL("deploy/grafana/taskqueue.json", ROOT), "utf8")) as {
    title: string;
    uid: string;
    __inputs: { name: string; type: string; pluginId: string }[];
    panels: { title: string; gridPos: object; targets: { expr: string; datasource: { uid: string } }[] }[];
  };
  assert.equal(dashboard.title, "taskqueue");
  assert.ok(dashboard.uid);
  // Import asks for the data source named by __inputs; every panel's queries use it.
  assert.deepEqual(
    dashboard.__inputs.map((i) => [i.name, i.type, i.pluginId]),
    [["DS_PROMETHEUS", "datasource", "prometheus"]],
  );
  assert.ok(dashboard.panels.length >= 8);
  const used = new Set<string>();
  for (const panel of dashboard.panels) {
    assert.ok(panel.gridPos, `${panel.title} has a position`);
    assert.ok(panel.targets.length > 0, `${panel.title} has a query`);
    for (const target of panel.targets) {
      // Grafana's import placeholder, not a template literal.
      assert.equal(target.datasource.uid, `\${DS_PROMETHEUS}`);
      const names = metricNames(target.expr);
      assert.ok(names.length > 0, `${panel.title}: ${target.expr} names a metric`);
      for (const name of names) {
        assert.ok(series.has(name), `${panel.title}: ${name} is not exported`);
        used.add(name);
      }
    }
  }
  for (const name of ["taskqueue_jobs_completed_total", "taskqueue_job_execution_seconds_bucket"])
    assert.ok(used.has(name), `the dashboard shows ${name}`);
});
