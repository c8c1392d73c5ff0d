/**
 * A real Prometheus server (the `prometheus` binary, Debian package `prometheus`) on loopback
 * scrapes a running `taskqueue start` (the API's database-wide /metrics/prometheus, and the
 * worker's own /metrics on --metrics-port) every second, while jobs run; its HTTP API then answers
 * `rate(taskqueue_jobs_completed_total[1m])` and a histogram quantile with numbers. Both bodies
 * also pass `promtool check metrics`. Every wait is bounded.
 */
import assert from "node:assert/strict";
import { type ChildProcess, spawn, spawnSync } from "node:child_process";
import { mkdtempSync, rmSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { after, before, describe, it } from "node:test";
import { freePort } from "../../src/db/embedded.js";
import { createTestDb, type TestDb } from "../helpers/db.js";
import { type CliProcess, cliEnv, startCli, until } from "../helpers/process.js";

/** Fails the test (not skips it) when the binaries are missing: CI installs them (.ci/run). */
function requireBinary(name: string): void {
  const found = spawnSync("sh", ["-c", `command -v ${name}`], { encoding: "utf8" });
  assert.equal(found.status, 0, `${name} is not installed (Debian package prometheus)`);
}

/** `promtool check metrics` on `body`: its exit code and output. */
function promtoolCheckMetrics(body: string): { status: number | null; output: string } {
  const r = spawnSync("promtool", ["check", "metrics"], { input: body, encoding: "utf8", timeout: 20_000 });
  return { status: r.status, output: `${r.stdout}${r.stderr}` };
}

interface PromResult {
  status: string;
  data: { resultType: string; result: { metric: Record<string, string>; value: [number, string] }[] };
}

describe("a real Prometheus scrapes taskqueue", { timeout: 180_000 }, () => {
  let db: TestDb;
  let service: CliProcess;
  let prometheus: ChildProcess | null = null;
  let prometheusExited: Promise<void> = Promise.resolve();
  let prometheusLog = "";
  let dir: string;
  let apiUrl: string;
  let workerMetricsUrl: string;
  let promUrl: string;

  before(async () => {
    requireBinary("prometheus");
    requireBinary("promtool");
    db = await createTestDb();
    dir = mkdtempSync(join(tmpdir(), "taskqueue-prometheus-"));
    service = startCli(
      ["start", "--no-migrate", "--port", "0", "--metrics-port", "0"],
      cliEnv(db, { LOG_FORMAT: "json" }),
    );
    apiUrl = String((await service.waitForLog((l) => l.msg === "API listening", 30_000)).url);
    workerMetricsUrl = String(
      (await service.waitForLog((l) => l.msg === "worker metrics served", 30_000)).url,
    );
    const promPort = await freePort();
    promUrl = `http://127.0.0.1:${promPort}`;
    const api = new URL(apiUrl);
    const worker = new URL(workerMetricsUrl);
    writeFileSync(
      join(dir, "prometheus.yml"),
      [
        "global:",
        "  scrape_interval: 1s",
        "  evaluation_interval: 1s",
        "scrape_configs:",
        "  - job_name: taskqueue",
        "    metrics_path: /metrics/prometheus",
        "    static_configs:",
        `      - targets: ["${api.host}"]`,
        "  - job_name: taskqueue-worker",
        "    metrics_path: /metrics",
        "    static_configs:",
        `      - targets: ["${worker.host}"]`,
        "",
      ].join("\n"),
    );
    prometheus = spawn(
      "prometheus",
      [
        `--config.file=${join(dir, "prometheus.yml")}`,
        `--storage.tsdb.path=${join(dir, "data")}`,
        `--web.listen-address=127.0.0.1:${promPort}`,
      ],
      { stdio: ["ignore", "pipe", "pipe"] },
    );
    const child = prometheus;
    prometheusExited = new Promise((resolve) => child.on("exit", () => resolve()));
    child.stdout?.on("data", (c: Buffer) => {
      prometheusLog = (prometheusLog + c.toString()).slice(-4000);
    });
    child.stderr?.on("data", (c: Buffer) => {
      prometheusLog = (prometheusLog + c.toString()).slice(-4000);
    });
  });

  after(async () => {
    if (prometheus && prometheus.exitCode === null) {
      prometheus.kill("SIGTERM");
      await Promise.race([prometheusExited, new Promise((r) => setTimeout(r, 10_000).unref())]);
      if (prometheus.exitCode === null) prometheus.kill("SIGKILL");
    }
    if (service && service.child.exitCode === null) {
      service.child.kill("SIGTERM");
      await Promise.race([service.exited, new Promise((r) => setTimeout(r, 15_000).unref())]);
    }
    await db?.drop();
    if (dir) rmSync(dir, { recursive: true, force: true });
  });

  /** Runs an instant query; null while Prometheus is not answering yet. */
  async function query(expr: string): Promise<PromResult | null> {
    try {
      const res = await fetch(`${promUrl}/api/v1/query?query=${encodeURIComponent(expr)}`, {
        signal: AbortSignal.timeout(5_000),
      });
      return res.ok ? ((await res.json()) as PromResult) : null;
    } catch {
      return null;
    }
  }

  /** Waits (bounded) until `expr` returns a sample whose value satisfies `accept`; returns it. */
  async function sampleOf(expr: string, accept: (v: number) => boolean, timeoutMs = 60_000): Promise<number> {
    let last: number | undefined;
    await until(
      async () => {
        const r = await query(expr);
        const value = r?.data.result[0]?.value[1];
        last = value === undefined ? undefined : Number(value);
        return last !== undefined && accept(last);
      },
      timeoutMs,
      `${expr} (last: ${last}; prometheus log: ${prometheusLog.slice(-1000)})`,
    );
    return last as number;
  }

  async function enqueue(jobs: { type: string; payload?: unknown; max_retries?: number }[]): Promise<void> {
    const res = await fetch(`${apiUrl}/jobs/batch`, {
      method: "POST",
      headers: { "content-type": "application/json" },
      body: JSON.stringify({ jobs }),
      signal: AbortSignal.timeout(10_000),
    });
    assert.equal(res.status, 201, await res.text());
  }

  it("both bodies pass promtool check metrics", async () => {
    await enqueue([
      { type: "echo", payload: { n: 1 } },
      { type: "always_fail", max_retries: 0 },
    ]);
    await until(
      async () => (await db.sql("SELECT 1 FROM jobs WHERE status NOT IN ('done', 'dead')")).length === 0,
      30_000,
      "both jobs finished",
    );
    // A paused type and a type no live worker claims, so that their gauges have series.
    const pause = await fetch(`${apiUrl}/types/always_fail/pause`, {
      method: "POST",
      signal: AbortSignal.timeout(10_000),
    });
    assert.equal(pause.status, 200, await pause.text());
    // A limited type, so that the limit gauges have series too.
    const limit = await fetch(`${apiUrl}/types/nobody_runs_this/limit`, {
      method: "PUT",
      headers: { "content-type": "application/json" },
      body: JSON.stringify({ max_running: 3, rate_per_second: 1.5 }),
      signal: AbortSignal.timeout(10_000),
    });
    assert.equal(limit.status, 200, await limit.text());
    await enqueue([{ type: "nobody_runs_this" }]);
    try {
      for (const url of [`${apiUrl}/metrics/prometheus`, workerMetricsUrl]) {
        const body = await (await fetch(url, { signal: AbortSignal.timeout(10_000) })).text();
        const check = promtoolCheckMetrics(body);
        assert.equal(check.status, 0, `${url}: ${check.output}`);
        assert.match(body, /^taskqueue_/m);
        if (url === workerMetricsUrl) continue;
        assert.match(body, /^taskqueue_type_paused\{type="always_fail"\} 1$/m);
        assert.match(body, /^taskqueue_unhandled_pending_jobs\{type="nobody_runs_this"\} 1$/m);
        assert.match(body, /^taskqueue_type_limit_max_running\{type="nobody_runs_this"\} 3$/m);
        assert.match(body, /^taskqueue_type_limit_rate_per_second\{type="nobody_runs_this"\} 1\.5$/m);
        assert.match(
          body,
          /^taskqueue_unhandled_oldest_pending_age_seconds\{type="nobody_runs_this"\} [\d.e-]+$/m,
        );
      }
    } finally {
      await fetch(`${apiUrl}/types/always_fail/resume`, {
        method: "POST",
        signal: AbortSignal.timeout(10_000),
      });
      await fetch(`${apiUrl}/types/nobody_runs_this/limit`, {
        method: "DELETE",
        signal: AbortSignal.timeout(10_000),
      });
      await db.sql("DELETE FROM jobs WHERE type = 'nobody_runs_this'");
    }
  });

  it("Prometheus computes rate(taskqueue_jobs_completed_total[1m]) and a p99 from the histogram", async () => {
    // Scraped at least once before the jobs below complete, so that the counter's increase shows.
    await sampleOf('up{job="taskqueue"}', (v) => v === 1);
    await sampleOf('up{job="taskqueue-worker"}', (v) => v === 1);
    await sampleOf('count(taskqueue_jobs_completed_total{type="echo"})', (v) => v >= 1);
    for (let round = 0; round < 3; round++)
      await enqueue(Array.from({ length: 50 }, (_, i) => ({ type: "echo", payload: { round, i } })));
    const rate = await sampleOf('sum(rate(taskqueue_jobs_completed_total{type="echo"}[1m]))', (v) => v > 0);
    assert.ok(rate > 0);
    const p99 = await sampleOf(
      'histogram_quantile(0.99, sum by (le) (rate(taskqueue_job_execution_seconds_bucket{type="echo"}[1m])))',
      (v) => Number.isFinite(v),
    );
    assert.ok(p99 >= 0 && p99 <= 3600, `p99 ${p99}`);
    const wait = await sampleOf(
      'histogram_quantile(0.99, sum by (le) (rate(taskqueue_job_queue_wait_seconds_bucket{type="echo"}[1m])))',
      (v) => Number.isFinite(v),
    );
    assert.ok(wait >= 0, `queue wait p99 ${wait}`);
    // The worker's own counters, from its metrics port.
    await sampleOf(
      'sum(taskqueue_worker_job_events_total{job="taskqueue-worker",event="completed",type="echo"})',
      (v) => v >= 151,
    );
    await sampleOf('max(taskqueue_active_workers{job="taskqueue"})', (v) => v >= 1);
    await sampleOf('sum(taskqueue_jobs_dead_total{type="always_fail"})', (v) => v === 1);
  });
});
