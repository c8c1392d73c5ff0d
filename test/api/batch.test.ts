/** POST /jobs/batch: one statement, all or nothing, order kept. */
import assert from "node:assert/strict";
import { describe, it } from "node:test";
import type { JobResponse } from "../../src/api/schemas.js";
import { assertProblem, useApi } from "./support.js";

describe("POST /jobs/batch", () => {
  const api = useApi();

  const countJobs = async () =>
    (await api.db.sql<{ n: number }>("SELECT count(*)::int AS n FROM jobs"))[0]?.n;
  const batch = (jobs: unknown) => api.app.inject({ method: "POST", url: "/jobs/batch", payload: { jobs } });

  it("rejects a batch with one bad job with 422 naming jobs/1/priority, and inserts nothing", async () => {
    const res = await batch([{ type: "echo" }, { type: "echo", priority: 11 }, { type: "echo" }]);
    assertProblem(res, 422, ["jobs/1/priority"]);
    const list = await api.app.inject({ method: "GET", url: "/jobs" });
    assert.deepEqual(list.json().jobs, []);
    assert.equal(await countJobs(), 0);
  });

  it("names every bad field of every bad job, and inserts nothing", async () => {
    const res = await batch([
      { type: "echo" },
      { type: "" },
      { type: "echo", run_at: "2030-01-01T12:00:00", extra: true },
      { type: "echo", max_retries: 11 },
    ]);
    assertProblem(res, 422, ["jobs/1/type", "jobs/2/run_at", "jobs/2/extra", "jobs/3/max_retries"]);
    assert.equal(await countJobs(), 0);
  });

  it("rejects a batch whose only problem the ledger finds (NUL in a payload), and inserts nothing", async () => {
    const res = await api.app.inject({
      method: "POST",
      url: "/jobs/batch",
      headers: { "content-type": "application/json" },
      payload: '{"jobs":[{"type":"echo"},{"type":"echo"},{"type":"echo","payload":{"k":["ok","a\\u0000"]}}]}',
    });
    assertProblem(res, 422, ["jobs/2/payload/k/1"]);
    assert.equal(await countJobs(), 0);
  });

  it("rejects an empty batch, a batch over 10,000 jobs and a body without jobs with 422", async () => {
    assertProblem(await batch([]), 422, ["jobs"]);
    assertProblem(await batch(Array.from({ length: 10_001 }, () => ({ type: "echo" }))), 422, ["jobs"]);
    assertProblem(await api.app.inject({ method: "POST", url: "/jobs/batch", payload: { job: [] } }), 422, [
      "jobs",
      "job",
    ]);
    assert.equal(await countJobs(), 0);
  });

  it("enqueues 10,000 valid jobs: 201 with all of them, in the order given", async () => {
    const specs = Array.from({ length: 10_000 }, (_, i) => ({
      type: i % 2 === 0 ? "even" : "odd",
      payload: { i },
      priority: (i % 10) + 1,
      max_retries: i % 11,
    }));
    const res = await batch(specs);
    assert.equal(res.statusCode, 201, res.body.slice(0, 500));
    const { jobs } = res.json<{ jobs: JobResponse[] }>();
    assert.equal(jobs.length, 10_000);
    jobs.forEach((job, i) => {
      assert.deepEqual(job.payload, { i });
      assert.equal(job.type, i % 2 === 0 ? "even" : "odd");
      assert.equal(job.priority, (i % 10) + 1);
      assert.equal(job.max_retries, i % 11);
      assert.equal(job.status, "pending");
      if (i > 0) assert.ok(job.id > (jobs[i - 1] as JobResponse).id, "ids ascend in the order given");
    });
    assert.equal(await countJobs(), 10_000);
    const metrics = await api.app.inject({ method: "GET", url: "/metrics" });
    assert.equal(metrics.json().queue_depth.pending, 10_000);
  });
});
