/** /jobs routes: enqueue, get, list, cancel, against a real PostgreSQL schema. */
import assert from "node:assert/strict";
import { describe, it } from "node:test";
import type { JobResponse } from "../../src/api/schemas.js";
import { assertProblem, postRawJob, useApi } from "./support.js";

interface JobList {
  jobs: JobResponse[];
  limit: number;
  offset: number;
}

describe("/jobs", () => {
  const api = useApi();

  async function enqueue(body: Record<string, unknown>): Promise<JobResponse> {
    const res = await api.app.inject({ method: "POST", url: "/jobs", payload: body });
    assert.equal(res.statusCode, 201, res.body);
    return res.json<JobResponse>();
  }

  it("lists nothing when no job exists", async () => {
    const res = await api.app.inject({ method: "GET", url: "/jobs" });
    assert.equal(res.statusCode, 200);
    assert.deepEqual(res.json(), { jobs: [], limit: 50, offset: 0 });
  });

  it("stores multi-byte UTF-8 text as sent, and reads it back the same", async () => {
    const res = await api.app.inject({
      method: "POST",
      url: "/jobs",
      payload: Buffer.from('{"type":"echo","payload":{"text":"żółw 🐢 日本"}}', "utf8"),
      headers: { "content-type": "application/json; charset=utf-8" },
    });
    assert.equal(res.statusCode, 201, res.body);
    const job = res.json<JobResponse>();
    assert.deepEqual(job.payload, { text: "żółw 🐢 日本" });
    const read = await api.app.inject({ method: "GET", url: `/jobs/${job.id}` });
    assert.deepEqual(read.json<JobResponse>().payload, { text: "żółw 🐢 日本" });
  });

  it("ignores a byte order mark before UTF-8 JSON, and takes any charset whose bytes read as UTF-8", async () => {
    const json = Buffer.from('{"type":"echo","payload":1}');
    const withBom = Buffer.concat([Buffer.from([0xef, 0xbb, 0xbf]), json]);
    for (const [contentType, body] of [
      ["application/json", withBom],
      ['application/json; charset="UTF-8"', withBom],
      ["application/json;charset=utf8", withBom],
      ["application/json; charset=", withBom],
      ['application/json; profile="x;charset=latin1"; charset=utf-8', withBom],
      ["application/json; charset=us-ascii", json],
      ["application/json; charset=ISO-8859-1", json], // every byte is ASCII: it reads the same
    ] as const) {
      const res = await postRawJob(api.app, body, contentType);
      assert.equal(res.statusCode, 201, `${contentType}: ${res.body}`);
      assert.equal(res.json<JobResponse>().payload, 1);
    }
  });

  it("enqueues a minimal body with the defaults (priority 5, max_retries 3, pending)", async () => {
    const res = await api.app.inject({ method: "POST", url: "/jobs", payload: { type: "echo" } });
    assert.equal(res.statusCode, 201);
    assert.match(String(res.headers["content-type"]), /^application\/json/);
    const job = res.json<JobResponse>();
    assert.ok(Number.isInteger(job.id) && job.id > 0);
    assert.equal(job.type, "echo");
    assert.deepEqual(job.payload, {});
    assert.equal(job.status, "pending");
    assert.equal(job.priority, 5);
    assert.equal(job.max_retries, 3);
    assert.equal(job.attempt, 0);
    assert.deepEqual(job.errors, []);
    for (const key of [
      "claimed_at",
      "started_at",
      "heartbeat_at",
      "completed_at",
      "result",
      "error",
      "worker_id",
    ]) {
      assert.equal(job[key as keyof JobResponse], null, key);
    }
    assert.ok(!Number.isNaN(Date.parse(job.created_at)));
    assert.ok(Math.abs(Date.parse(job.run_at) - Date.parse(job.created_at)) < 1000, "run_at defaults to now");
    const [row] = await api.db.sql<{ status: string; priority: number }>(
      "SELECT status, priority FROM jobs WHERE id = $1",
      [job.id],
    );
    assert.deepEqual(row, { status: "pending", priority: 5 });
  });

  it("enqueues a full body and returns every field in snake_case", async () => {
    const runAt = "2031-06-01T14:30:00+02:00";
    const job = await enqueue({
      type: "is_prime",
      payload: { n: 97, nested: [1, "two", null, { three: true }] },
      priority: 9,
      max_retries: 0,
      run_at: runAt,
      timeout_seconds: 120,
    });
    assert.equal(job.type, "is_prime");
    assert.equal(job.timeout_seconds, 120);
    assert.deepEqual(job.payload, { n: 97, nested: [1, "two", null, { three: true }] });
    assert.equal(job.priority, 9);
    assert.equal(job.max_retries, 0);
    assert.equal(job.status, "pending");
    assert.equal(job.run_at, "2031-06-01T12:30:00.000Z");
    assert.deepEqual(Object.keys(job).sort(), [
      "attempt",
      "claimed_at",
      "completed_at",
      "created_at",
      "error",
      "errors",
      "heartbeat_at",
      "id",
      "idempotency_key",
      "max_retries",
      "payload",
      "priority",
      "progress",
      "result",
      "run_at",
      "started_at",
      "status",
      "timeout_seconds",
      "type",
      "worker_id",
    ]);
  });

  it("takes a payload nested 1,000 levels deep, and lists and reads it back", async () => {
    const depth = 1000;
    const res = await api.app.inject({
      method: "POST",
      url: "/jobs",
      headers: { "content-type": "application/json" },
      payload: `{"type":"deep","payload":${"[".repeat(depth)}null${"]".repeat(depth)}}`,
    });
    assert.equal(res.statusCode, 201, res.body.slice(0, 300));
    const id = res.json<JobResponse>().id;
    assert.equal((await api.app.inject({ method: "GET", url: `/jobs/${id}` })).statusCode, 200);
    const list = await api.app.inject({ method: "GET", url: "/jobs?type=deep" });
    assert.equal(list.statusCode, 200);
    assert.equal(list.json<{ jobs: JobResponse[] }>().jobs[0]?.id, id);
  });

  it("treats a run_at in the past as now", async () => {
    const job = await enqueue({ type: "echo", run_at: "2001-01-01T00:00:00Z" });
    assert.ok(Date.parse(job.run_at) >= Date.parse(job.created_at));
  });

  it("gets a job that exists", async () => {
    const created = await enqueue({ type: "echo", payload: { hello: "world" } });
    const res = await api.app.inject({ method: "GET", url: `/jobs/${created.id}` });
    assert.equal(res.statusCode, 200);
    assert.deepEqual(res.json(), created);
  });

  it("answers 404 problem for a job that does not exist", async () => {
    const res = await api.app.inject({ method: "GET", url: "/jobs/987654321" });
    const problem = assertProblem(res, 404);
    assert.match(problem.detail ?? "", /987654321/);
  });

  it("shows the attempt history, result and error of a job", async () => {
    const created = await enqueue({ type: "flaky" });
    await api.db.sql(
      `UPDATE jobs SET status = 'done', attempt = 1, error = 'boom', result = '{"ok":true}',
         errors = '[{"attempt":0,"error":"boom","worker_id":"w1","failed_at":"2030-01-01T00:00:00Z"}]',
         started_at = now(), completed_at = now(), worker_id = 'w1' WHERE id = $1`,
      [created.id],
    );
    const job = (await api.app.inject({ method: "GET", url: `/jobs/${created.id}` })).json<JobResponse>();
    assert.equal(job.status, "done");
    assert.equal(job.attempt, 1);
    assert.equal(job.error, "boom");
    assert.deepEqual(job.result, { ok: true });
    assert.deepEqual(job.errors, [
      { attempt: 0, error: "boom", worker_id: "w1", failed_at: "2030-01-01T00:00:00Z" },
    ]);
    assert.equal(job.worker_id, "w1");
    assert.ok(job.completed_at !== null && !Number.isNaN(Date.parse(job.completed_at)));
  });

  it("filters the list by status", async () => {
    const a = await enqueue({ type: "status-filter" });
    const b = await enqueue({ type: "status-filter" });
    await api.db.sql(
      "UPDATE jobs SET status = 'running', worker_id = 'w', heartbeat_at = now() WHERE id = $1",
      [b.id],
    );
    const running = (
      await api.app.inject({ method: "GET", url: "/jobs?status=running&type=status-filter" })
    ).json<JobList>();
    assert.deepEqual(
      running.jobs.map((j) => j.id),
      [b.id],
    );
    const pending = (
      await api.app.inject({ method: "GET", url: "/jobs?status=pending&type=status-filter" })
    ).json<JobList>();
    assert.deepEqual(
      pending.jobs.map((j) => j.id),
      [a.id],
    );
    const all = (await api.app.inject({ method: "GET", url: "/jobs?status=running" })).json<JobList>();
    assert.ok(all.jobs.every((j) => j.status === "running"));
  });

  it("paginates the list with limit and offset, newest first", async () => {
    const ids: number[] = [];
    for (let i = 0; i < 7; i++) ids.push((await enqueue({ type: "page", payload: { i } })).id);
    const newestFirst = [...ids].reverse();
    const page = async (query: string) => {
      const res = await api.app.inject({ method: "GET", url: `/jobs?type=page&${query}` });
      assert.equal(res.statusCode, 200, res.body);
      return res.json<JobList>();
    };
    const first = await page("limit=3");
    assert.deepEqual(
      first.jobs.map((j) => j.id),
      newestFirst.slice(0, 3),
    );
    assert.equal(first.limit, 3);
    assert.equal(first.offset, 0);
    const second = await page("limit=3&offset=3");
    assert.deepEqual(
      second.jobs.map((j) => j.id),
      newestFirst.slice(3, 6),
    );
    assert.equal(second.offset, 3);
    const last = await page("limit=3&offset=6");
    assert.deepEqual(
      last.jobs.map((j) => j.id),
      newestFirst.slice(6),
    );
    assert.deepEqual((await page("offset=7")).jobs, []);
    assert.equal((await page("")).limit, 50);
  });

  it("filters the list by created_after", async () => {
    const old = await enqueue({ type: "created-after" });
    await api.db.sql("UPDATE jobs SET created_at = '2020-01-01T00:00:00Z' WHERE id = $1", [old.id]);
    const recent = await enqueue({ type: "created-after" });
    const res = await api.app.inject({
      method: "GET",
      url: `/jobs?type=created-after&created_after=${encodeURIComponent("2021-01-01T00:00:00+00:00")}`,
    });
    assert.equal(res.statusCode, 200, res.body);
    assert.deepEqual(
      res.json<JobList>().jobs.map((j) => j.id),
      [recent.id],
    );
  });

  it("answers 422 naming status for an unknown status filter", async () => {
    assertProblem(await api.app.inject({ method: "GET", url: "/jobs?status=finished" }), 422, ["status"]);
  });

  it("answers 422 naming each bad list parameter (limit, offset, created_after, unknown)", async () => {
    assertProblem(await api.app.inject({ method: "GET", url: "/jobs?limit=0" }), 422, ["limit"]);
    assertProblem(await api.app.inject({ method: "GET", url: "/jobs?limit=1001" }), 422, ["limit"]);
    assertProblem(await api.app.inject({ method: "GET", url: "/jobs?limit=2.5" }), 422, ["limit"]);
    assertProblem(await api.app.inject({ method: "GET", url: "/jobs?offset=-1" }), 422, ["offset"]);
    assertProblem(
      await api.app.inject({ method: "GET", url: "/jobs?created_after=2030-01-01T00:00:00" }),
      422,
      ["created_after"],
    );
    assertProblem(await api.app.inject({ method: "GET", url: "/jobs?stauts=pending" }), 422, ["stauts"]);
  });

  it("cancels a pending job: 200 with status cancelled", async () => {
    const job = await enqueue({ type: "cancel-me" });
    const res = await api.app.inject({ method: "DELETE", url: `/jobs/${job.id}` });
    assert.equal(res.statusCode, 200, res.body);
    const cancelled = res.json<JobResponse>();
    assert.equal(cancelled.id, job.id);
    assert.equal(cancelled.status, "cancelled");
    const [row] = await api.db.sql<{ status: string }>("SELECT status FROM jobs WHERE id = $1", [job.id]);
    assert.equal(row?.status, "cancelled");
    assertProblem(await api.app.inject({ method: "DELETE", url: `/jobs/${job.id}` }), 409);
  });

  it("refuses to cancel a running job: 409 and the job keeps running", async () => {
    const job = await enqueue({ type: "busy" });
    await api.db.sql("UPDATE jobs SET status='running', worker_id='w', heartbeat_at=now() WHERE id=$1", [
      job.id,
    ]);
    const problem = assertProblem(await api.app.inject({ method: "DELETE", url: `/jobs/${job.id}` }), 409);
    assert.match(problem.detail ?? "", /running/);
    const [row] = await api.db.sql<{ status: string }>("SELECT status FROM jobs WHERE id = $1", [job.id]);
    assert.equal(row?.status, "running");
  });

  it("answers 404 when cancelling a job that does not exist", async () => {
    assertProblem(await api.app.inject({ method: "DELETE", url: "/jobs/987654321" }), 404);
  });

  it("answers 422 naming id for a non-numeric id on GET and DELETE", async () => {
    for (const method of ["GET", "DELETE"] as const) {
      for (const id of ["abc", "1.5", "0", "-3", "1e3", "9007199254740992"]) {
        assertProblem(await api.app.inject({ method, url: `/jobs/${id}` }), 422, ["id"]);
      }
    }
  });
});
