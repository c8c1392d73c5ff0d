/**
 * GET /jobs/{id}?wait=SECONDS (issue 13, item 4): a long-poll that answers as soon as the job is
 * final, or with the job as it is once the wait ends; `wait` is validated (0–30); progress shows.
 */
import assert from "node:assert/strict";
import { describe, it } from "node:test";
import { LIMITS } from "../../src/queue/job-shape.js";
import { startWorker } from "../helpers/worker.js";
import { assertProblem, useApi } from "./support.js";

describe("GET /jobs/{id}?wait=", () => {
  const api = useApi();

  it("answers as soon as the job reaches a final state, well before the wait ends", async () => {
    const job = await api.db.ledger.addJob({ type: "nobody_handles_this" });
    const started = Date.now();
    const answer = api.app.inject({ method: "GET", url: `/jobs/${job.id}?wait=20` });
    await waitUntilWatched(job.id);
    await api.db.ledger.cancelJob(job.id);
    const res = await answer;
    assert.equal(res.statusCode, 200);
    assert.equal(res.json().status, "cancelled");
    assert.ok(Date.now() - started < 10_000);
  });

  it("answers with a job a worker completes meanwhile, result included", async () => {
    const worker = await startWorker(api.db);
    try {
      const job = await api.db.ledger.addJob({
        type: "echo",
        payload: { hi: 1 },
        runAt: new Date(Date.now() + 500),
      });
      const res = await api.app.inject({ method: "GET", url: `/jobs/${job.id}?wait=20` });
      assert.equal(res.statusCode, 200);
      assert.equal(res.json().status, "done");
      assert.deepEqual(res.json().result, { hi: 1 });
    } finally {
      await worker.stop();
    }
  });

  it("answers with the job as it is when the wait ends", async () => {
    const job = await api.db.ledger.addJob({ type: "nobody_handles_this" });
    const started = Date.now();
    const res = await api.app.inject({ method: "GET", url: `/jobs/${job.id}?wait=1` });
    const elapsed = Date.now() - started;
    assert.equal(res.statusCode, 200);
    assert.equal(res.json().status, "pending");
    assert.ok(elapsed >= 900, `answered after ${elapsed} ms`);
    assert.ok(elapsed < 5000, `answered after ${elapsed} ms`);
  });

  it("answers at once without wait or with wait=0, and 404 for a job that does not exist", async () => {
    const job = await api.db.ledger.addJob({ type: "nobody_handles_this" });
    for (const url of [`/jobs/${job.id}`, `/jobs/${job.id}?wait=0`]) {
      const res = await api.app.inject({ method: "GET", url });
      assert.equal(res.json().status, "pending");
    }
    assertProblem(await api.app.inject({ method: "GET", url: "/jobs/999999999?wait=2" }), 404);
  });

  it(`rejects a wait that is not an integer from 0 to ${LIMITS.waitSeconds}, or an unknown parameter, with 422`, async () => {
    const job = await api.db.ledger.addJob({ type: "nobody_handles_this" });
    for (const query of ["wait=31", "wait=-1", "wait=abc", "wait=1.5"])
      assertProblem(await api.app.inject({ method: "GET", url: `/jobs/${job.id}?${query}` }), 422, ["wait"]);
    assertProblem(await api.app.inject({ method: "GET", url: `/jobs/${job.id}?wiat=3` }), 422);
  });

  it("shows the job's progress", async () => {
    const job = await api.db.ledger.addJob({ type: "nobody_handles_this" });
    assert.equal((await api.app.inject({ method: "GET", url: `/jobs/${job.id}` })).json().progress, null);
    await api.db.sql("UPDATE jobs SET progress = $2 WHERE id = $1", [job.id, JSON.stringify({ step: 3 })]);
    const res = await api.app.inject({ method: "GET", url: `/jobs/${job.id}` });
    assert.deepEqual(res.json().progress, { step: 3 });
  });

  /** Resolves once job `id` is marked watched (its wait has listened and read it). */
  async function waitUntilWatched(id: number): Promise<void> {
    const deadline = Date.now() + 10_000;
    for (;;) {
      const rows = await api.db.sql<{ watched: boolean }>("SELECT watched FROM jobs WHERE id = $1", [id]);
      if (rows[0]?.watched) return;
      if (Date.now() > deadline) assert.fail("the wait did not start within 10 s");
      await new Promise((resolve) => setTimeout(resolve, 20));
    }
  }
});
