/**
 * POST /jobs/{id}/cancel and `timeout_seconds` over HTTP (issue 14, items 3 and 4): a pending job
 * is cancelled as DELETE does; a claimed or running one too, its worker told by a NOTIFY
 * `cancel:<id>` on the workers' channel, counted once; DELETE stays pending-only (409); finished
 * jobs are 409; `timeout_seconds` is stored, and a bad one is a 422 naming the field.
 */
import assert from "node:assert/strict";
import { before, describe, it } from "node:test";
import pg from "pg";
import { DATABASE_URL, type TestLockSession } from "../helpers/db.js";
import { assertProblem, JSON_HEADERS, useApi } from "./support.js";

describe("cancel and timeouts over HTTP", () => {
  const api = useApi();
  let session: TestLockSession;
  before(async () => {
    session = await api.db.openLockSession("api-cancel");
  });

  const post = (url: string, body?: unknown) =>
    api.app.inject(
      body === undefined
        ? { method: "POST", url }
        : { method: "POST", url, headers: JSON_HEADERS, payload: JSON.stringify(body) },
    );

  /** Enqueues a job over HTTP; its id. */
  async function enqueue(body: Record<string, unknown>): Promise<{ id: number; timeout_seconds: unknown }> {
    const res = await post("/jobs", body);
    assert.equal(res.statusCode, 201, res.body);
    return res.json();
  }

  /** The cancelled count of `type` in job_totals. */
  async function cancelledTotal(type: string): Promise<number> {
    const { totals } = await api.db.ledger.typeFigures();
    return totals.filter((t) => t.type === type && t.event === "cancelled").reduce((n, t) => n + t.count, 0);
  }

  it("cancels a pending job: 200 with status cancelled; again: 409", async () => {
    const job = await enqueue({ type: "http_cancel_pending", run_at: "2100-01-01T00:00:00Z" });
    const res = await post(`/jobs/${job.id}/cancel`);
    assert.equal(res.statusCode, 200, res.body);
    assert.equal(res.json<{ status: string }>().status, "cancelled");
    assertProblem(await post(`/jobs/${job.id}/cancel`), 409);
    assert.equal(await cancelledTotal("http_cancel_pending"), 1);
  });

  it("cancels a running job: its worker is told by NOTIFY cancel:<id>; DELETE is 409; counted once", async () => {
    const job = await enqueue({ type: "http_cancel_running" });
    const [claimed] = await session.claim(["http_cancel_running"], 1);
    assert.equal(claimed?.id, job.id);
    await session.markRunning([{ id: job.id, attempt: 0 }]);
    assertProblem(await api.app.inject({ method: "DELETE", url: `/jobs/${job.id}` }), 409);
    const listener = new pg.Client({ connectionString: DATABASE_URL });
    await listener.connect();
    try {
      const told = new Promise<string>((resolve, reject) => {
        const timer = setTimeout(() => reject(new Error("no NOTIFY within 5 s")), 5000);
        listener.on("notification", (message) => {
          if (!message.payload?.startsWith("cancel:")) return;
          clearTimeout(timer);
          resolve(message.payload);
        });
      });
      await listener.query(`LISTEN ${api.db.config.notifyChannel}`);
      const res = await post(`/jobs/${job.id}/cancel`);
      assert.equal(res.statusCode, 200, res.body);
      assert.equal(res.json<{ status: string }>().status, "cancelled");
      assert.equal(await told, `cancel:${job.id}`);
    } finally {
      await listener.end();
    }
    // The worker's late completion is refused by the fence.
    const refused = await session.complete([{ id: job.id, attempt: 0, resultJson: '"late"', runMs: 1 }]);
    assert.deepEqual(refused, [job.id]);
    const stored = await api.db.ledger.getJob(job.id);
    assert.equal(stored?.status, "cancelled");
    assert.equal(stored?.result, null);
    assert.equal(await cancelledTotal("http_cancel_running"), 1);
    // The counters by status match a full count (a held job left `pending` when claimed).
    const { depth } = await api.db.ledger.metrics(30);
    const counted = await api.db.sql<{ status: string; n: number }>(
      "SELECT status, count(*)::int AS n FROM jobs GROUP BY status",
    );
    for (const status of ["pending", "cancelled"] as const)
      assert.equal(depth[status], counted.find((r) => r.status === status)?.n ?? 0, status);
  });

  it("404 for no such job, 409 for a finished one, 422 for a bad id", async () => {
    assertProblem(await post("/jobs/987654321/cancel"), 404);
    assertProblem(await post("/jobs/0/cancel"), 422, ["id"]);
    const job = await enqueue({ type: "http_cancel_done" });
    const [claimed] = await session.claim(["http_cancel_done"], 1);
    assert.equal(claimed?.id, job.id);
    await session.complete([{ id: job.id, attempt: 0, resultJson: "1", runMs: 1 }]);
    assertProblem(await post(`/jobs/${job.id}/cancel`), 409);
  });

  it("timeout_seconds is stored and answered; out of range or not whole: 422 naming the field", async () => {
    const job = await enqueue({ type: "http_timeout", timeout_seconds: 30 });
    assert.equal(job.timeout_seconds, 30);
    const read = await api.app.inject({ method: "GET", url: `/jobs/${job.id}` });
    assert.equal(read.json<{ timeout_seconds: number }>().timeout_seconds, 30);
    assert.equal((await enqueue({ type: "http_timeout" })).timeout_seconds, null);
    for (const bad of [0, 1.5, 604_801, "30"])
      assertProblem(await post("/jobs", { type: "http_timeout", timeout_seconds: bad }), 422, [
        "timeout_seconds",
      ]);
    const batch = await post("/jobs/batch", {
      jobs: [{ type: "http_timeout", timeout_seconds: 5 }, { type: "http_timeout" }],
    });
    assert.equal(batch.statusCode, 201, batch.body);
    const jobs = batch.json<{ jobs: { timeout_seconds: number | null }[] }>().jobs;
    assert.deepEqual(
      jobs.map((j) => j.timeout_seconds),
      [5, null],
    );
    assertProblem(
      await post("/jobs/batch", { jobs: [{ type: "a" }, { type: "b", timeout_seconds: -1 }] }),
      422,
      ["jobs/1/timeout_seconds"],
    );
  });
});
