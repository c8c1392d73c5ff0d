/** GET /metrics and GET /metrics/prometheus, read from the database. */
import assert from "node:assert/strict";
import { describe, it } from "node:test";
import { buildApp } from "../../src/api/app.js";
import type { JobResponse, MetricsResponse } from "../../src/api/schemas.js";
import { useApi } from "./support.js";

/** Value of one sample line of a Prometheus text body, e.g. `taskqueue_queue_depth{status="pending"}`. */
function sample(text: string, series: string): number {
  const line = text.split("\n").find((l) => l.startsWith(`${series} `));
  assert.ok(line, `no sample ${series} in:\n${text}`);
  return Number(line.slice(series.length + 1));
}

describe("metrics", () => {
  const api = useApi();

  const metrics = async () => {
    const res = await api.app.inject({ method: "GET", url: "/metrics" });
    assert.equal(res.statusCode, 200, res.body);
    return res.json<MetricsResponse>();
  };
  const prometheus = async () => {
    const res = await api.app.inject({ method: "GET", url: "/metrics/prometheus" });
    assert.equal(res.statusCode, 200, res.body);
    assert.match(String(res.headers["content-type"]), /^text\/plain; version=0\.0\.4/);
    return res.body;
  };

  it("reports every JSON key, all zero on an empty queue", async () => {
    const m = await metrics();
    assert.deepEqual(Object.keys(m).sort(), [
      "active_workers",
      "average_execution_seconds",
      "dead_letter_count",
      "error_rate",
      "execution_seconds",
      "fenced_writes",
      "jobs_per_second",
      "paused_types",
      "queue_depth",
      "type_limits",
      "unhandled_types",
      "window_seconds",
    ]);
    assert.deepEqual(m.queue_depth, { pending: 0, claimed: 0, running: 0, done: 0, dead: 0, cancelled: 0 });
    assert.deepEqual(m.execution_seconds, { p50: null, p90: null, p99: null, samples: 0 });
    assert.equal(m.average_execution_seconds, null);
    assert.equal(m.active_workers, 0);
    assert.equal(m.jobs_per_second, 0);
    assert.equal(m.error_rate, 0);
    assert.deepEqual(m.type_limits, []);
    assert.equal(m.dead_letter_count, 0);
    assert.equal(m.fenced_writes, 0);
    assert.equal(m.window_seconds, 60);
  });

  it("counts queue depth by status after enqueuing", async () => {
    const res = await api.app.inject({
      method: "POST",
      url: "/jobs/batch",
      payload: { jobs: Array.from({ length: 5 }, () => ({ type: "echo" })) },
    });
    assert.equal(res.statusCode, 201);
    const [first, second] = res.json<{ jobs: JobResponse[] }>().jobs as [JobResponse, JobResponse];
    assert.equal((await api.app.inject({ method: "DELETE", url: `/jobs/${first.id}` })).statusCode, 200);
    const worker = await api.db.openLockSession("metrics-worker");
    const [claimed] = await worker.claim(["echo"], 1);
    assert.equal(claimed?.id, second.id);
    await worker.markRunning([{ id: second.id, attempt: 0 }]);
    const m = await metrics();
    assert.deepEqual(m.queue_depth, { pending: 3, claimed: 0, running: 1, done: 0, dead: 0, cancelled: 1 });
  });

  it("reports throughput and execution time of finished jobs", async () => {
    const job = (
      await api.app.inject({ method: "POST", url: "/jobs", payload: { type: "echo" } })
    ).json<JobResponse>();
    const worker = await api.db.openLockSession("metrics-worker-2");
    const claimed = await worker.claim(["echo"], 10);
    assert.ok(claimed.some((c) => c.id === job.id));
    // Completed without a markRunning: the run time reported by the worker sets started_at.
    await worker.complete([{ id: job.id, attempt: 0, resultJson: "null", runMs: 2000 }]);
    await worker.release(claimed.filter((c) => c.id !== job.id));
    const m = await metrics();
    assert.equal(m.queue_depth.done, 1);
    assert.ok(m.jobs_per_second > 0);
    assert.ok(m.average_execution_seconds !== null && Math.abs(m.average_execution_seconds - 2) < 0.01);
    assert.equal(m.execution_seconds.samples, 1);
    assert.ok(m.execution_seconds.p99 !== null && Math.abs(m.execution_seconds.p99 - 2) < 0.01);
  });

  it('exports the same figures in Prometheus text: taskqueue_queue_depth{status="pending"} N', async () => {
    const m = await metrics();
    const text = await prometheus();
    assert.match(
      text,
      new RegExp(`^taskqueue_queue_depth\\{status="pending"\\} ${m.queue_depth.pending}$`, "m"),
    );
    for (const status of ["pending", "claimed", "running", "done", "dead", "cancelled"] as const) {
      assert.equal(sample(text, `taskqueue_queue_depth{status="${status}"}`), m.queue_depth[status]);
    }
    assert.equal(sample(text, "taskqueue_active_workers"), m.active_workers);
    assert.equal(sample(text, "taskqueue_dead_letter_jobs"), m.dead_letter_count);
    assert.match(text, /^# TYPE taskqueue_queue_depth gauge$/m);
    // No precomputed ratios or quantile gauges: Prometheus computes rates and quantiles itself.
    assert.doesNotMatch(text, /^taskqueue_(jobs_per_second|error_rate|execution_seconds|fenced_writes)\b/m);
  });

  it("counts job events by type in the database: counters and histograms with buckets", async () => {
    // So far: 6 echo jobs enqueued, 1 cancelled, 1 completed in 2 s (the tests above).
    const text = await prometheus();
    assert.match(text, /^# TYPE taskqueue_jobs_completed_total counter$/m);
    assert.equal(sample(text, 'taskqueue_jobs_enqueued_total{type="echo"}'), 6);
    assert.equal(sample(text, 'taskqueue_jobs_cancelled_total{type="echo"}'), 1);
    assert.equal(sample(text, 'taskqueue_jobs_completed_total{type="echo"}'), 1);
    for (const event of ["failed", "retried", "dead", "fenced"])
      assert.equal(sample(text, `taskqueue_jobs_${event}_total{type="echo"}`), 0, event);
    assert.match(text, /^# TYPE taskqueue_job_execution_seconds histogram$/m);
    assert.equal(sample(text, 'taskqueue_job_execution_seconds_bucket{type="echo",le="1"}'), 0);
    assert.equal(sample(text, 'taskqueue_job_execution_seconds_bucket{type="echo",le="2.5"}'), 1);
    assert.equal(sample(text, 'taskqueue_job_execution_seconds_bucket{type="echo",le="+Inf"}'), 1);
    assert.equal(sample(text, 'taskqueue_job_execution_seconds_count{type="echo"}'), 1);
    assert.ok(Math.abs(sample(text, 'taskqueue_job_execution_seconds_sum{type="echo"}') - 2) < 0.01);
    assert.equal(sample(text, 'taskqueue_job_queue_wait_seconds_count{type="echo"}'), 1);
    // Live gauges by type: 3 pending (due now), 1 running (the claim of the second test).
    assert.equal(sample(text, 'taskqueue_queue_depth_by_type{status="pending",type="echo"}'), 3);
    assert.equal(sample(text, 'taskqueue_queue_depth_by_type{status="running",type="echo"}'), 1);
    assert.ok(sample(text, 'taskqueue_oldest_pending_age_seconds{type="echo"}') >= 0);
    // This process's own metrics come along (per process).
    assert.match(text, /^process_cpu_seconds_total \d/m);
    assert.match(text, /^nodejs_heap_size_used_bytes \d/m);
  });

  it("reflects new jobs at the next scrape", async () => {
    const before = sample(await prometheus(), 'taskqueue_queue_depth{status="pending"}');
    assert.equal(
      (await api.app.inject({ method: "POST", url: "/jobs", payload: { type: "echo" } })).statusCode,
      201,
    );
    assert.equal(sample(await prometheus(), 'taskqueue_queue_depth{status="pending"}'), before + 1);
  });

  it("keeps each app's registry separate", async () => {
    const other = await buildApp({ ledger: api.db.ledger, config: api.db.config });
    try {
      const [a, b] = await Promise.all([
        prometheus(),
        other.inject({ method: "GET", url: "/metrics/prometheus" }),
      ]);
      assert.equal(b.statusCode, 200);
      assert.equal(
        sample(b.body, 'taskqueue_queue_depth{status="pending"}'),
        sample(a, 'taskqueue_queue_depth{status="pending"}'),
      );
    } finally {
      await other.close();
    }
  });
});
