/**
 * The /dead-letters routes and POST /jobs/{id}/retry (issue 14, items 1 and 2) over HTTP: answers
 * in snake_case, filters, bounded batches, idempotent replay, and problem+json naming the field
 * for bad input (404 for a job without an entry, 409 for a job that cannot be retried).
 */
import assert from "node:assert/strict";
import { before, describe, it } from "node:test";
import type { TestLockSession } from "../helpers/db.js";
import { killJobs } from "../helpers/dead.js";
import { assertProblem, JSON_HEADERS, useApi } from "./support.js";

describe("dead letters and retry over HTTP", () => {
  const api = useApi();
  let session: TestLockSession;
  before(async () => {
    session = await api.db.openLockSession("api-dead-letters");
  });

  const get = (url: string) => api.app.inject({ method: "GET", url });
  /** POST with a JSON body, or (as `curl -X POST` sends it) no body and no content type. */
  const post = (url: string, body?: unknown) =>
    api.app.inject(
      body === undefined
        ? { method: "POST", url }
        : { method: "POST", url, headers: JSON_HEADERS, payload: JSON.stringify(body) },
    );

  describe("GET /dead-letters", () => {
    it("lists entries newest death first with every field in snake_case, filtered and paged", async () => {
      const ids = await killJobs(api.db, session, [
        { type: "http_list", payload: { n: 1 } },
        { type: "http_list", payload: { n: 2 } },
      ]);
      const res = await get("/dead-letters?type=http_list&limit=1");
      assert.equal(res.statusCode, 200);
      const body = res.json<{ dead_letters: Record<string, unknown>[]; limit: number; offset: number }>();
      assert.equal(body.limit, 1);
      assert.equal(body.offset, 0);
      assert.equal(body.dead_letters.length, 1);
      const [entry] = body.dead_letters;
      assert.equal(entry?.job_id, ids[1]);
      assert.deepEqual(Object.keys(entry ?? {}).sort(), [
        "attempts",
        "created_at",
        "died_at",
        "error",
        "errors",
        "job_id",
        "max_retries",
        "payload",
        "priority",
        "replayed_at",
        "replays",
        "type",
        "worker_id",
      ]);
      assert.equal(entry?.replayed_at, null);
      const waiting = await get(
        "/dead-letters?type=http_list&replayed=false&died_after=2000-01-01T00:00:00Z",
      );
      assert.equal(waiting.json<{ dead_letters: unknown[] }>().dead_letters.length, 2);
    });

    it("refuses bad filters with 422 naming each field", async () => {
      assertProblem(await get("/dead-letters?died_after=2030-01-01T00:00:00&replayed=maybe&limit=0"), 422, [
        "died_after",
        "replayed",
        "limit",
      ]);
      assertProblem(await get("/dead-letters?status=dead"), 422, ["status"]);
    });
  });

  describe("one dead letter", () => {
    it("GET answers the entry whole; 404 for a job without one; 422 for a bad id", async () => {
      const [id] = await killJobs(api.db, session, [
        { type: "http_one", payload: { big: "x".repeat(70_000) } },
      ]);
      const res = await get(`/dead-letters/${id}`);
      assert.equal(res.statusCode, 200);
      assert.equal(res.json<{ payload: { big: string } }>().payload.big.length, 70_000);
      const listed = await get("/dead-letters?type=http_one");
      const [entry] = listed.json<{ dead_letters: { payload: unknown; payload_omitted?: boolean }[] }>()
        .dead_letters;
      assert.equal(entry?.payload, null);
      assert.equal(entry?.payload_omitted, true);
      const job = await api.db.ledger.addJob({ type: "http_alive" });
      assertProblem(await get(`/dead-letters/${job.id}`), 404);
      assertProblem(await get("/dead-letters/abc"), 422, ["job_id"]);
    });

    it("POST …/replay sends the job back once; a second replay changes nothing", async () => {
      const [id] = await killJobs(api.db, session, [{ type: "http_replay" }]);
      const first = await post(`/dead-letters/${id}/replay`);
      assert.equal(first.statusCode, 200);
      const body = first.json<{ replayed: boolean; job: { id: number; status: string; attempt: number } }>();
      assert.equal(body.replayed, true);
      assert.deepEqual([body.job.id, body.job.status, body.job.attempt], [id, "pending", 0]);
      const second = await post(`/dead-letters/${id}/replay`);
      assert.equal(second.json<{ replayed: boolean }>().replayed, false);
      const entry = await get(`/dead-letters/${id}`);
      assert.equal(entry.json<{ replays: number }>().replays, 1);
      assert.notEqual(entry.json<{ replayed_at: string | null }>().replayed_at, null);
      assertProblem(await post("/dead-letters/987654321/replay"), 404);
    });

    it("DELETE discards the entry (the job stays dead); again is 404", async () => {
      const [id] = await killJobs(api.db, session, [{ type: "http_discard" }]);
      const res = await api.app.inject({ method: "DELETE", url: `/dead-letters/${id}` });
      assert.equal(res.statusCode, 200);
      assert.equal(res.json<{ job_id: number }>().job_id, id);
      assert.equal((await get(`/jobs/${id}`)).json<{ status: string }>().status, "dead");
      assertProblem(await api.app.inject({ method: "DELETE", url: `/dead-letters/${id}` }), 404);
    });
  });

  describe("bulk actions", () => {
    it("POST /dead-letters/replay replays a filter in batches of `limit`", async () => {
      const ids = await killJobs(
        api.db,
        session,
        Array.from({ length: 5 }, () => ({ type: "http_bulk" })),
      );
      const first = await post("/dead-letters/replay", { type: "http_bulk", limit: 3 });
      assert.equal(first.statusCode, 200);
      assert.deepEqual(first.json(), { job_ids: ids.slice(0, 3), more: true });
      const rest = await post("/dead-letters/replay", { type: "http_bulk", limit: 3 });
      assert.deepEqual(rest.json(), { job_ids: ids.slice(3), more: false });
    });

    it("an empty filter is 422 naming `all`; unknown fields and a replay's `replayed` are refused", async () => {
      assertProblem(await post("/dead-letters/replay", {}), 422, ["all"]);
      assertProblem(await post("/dead-letters/discard", { all: false }), 422, ["all"]);
      assertProblem(await post("/dead-letters/replay", { type: "x", replayed: true }), 422, ["replayed"]);
      assertProblem(await post("/dead-letters/replay", { type: "x", limit: 10_001 }), 422, ["limit"]);
      assertProblem(await post("/dead-letters/discard", { died_before: "yesterday" }), 422, ["died_before"]);
    });

    it("POST /dead-letters/discard deletes the entries of a filter", async () => {
      const ids = await killJobs(api.db, session, [
        { type: "http_bulk_discard" },
        { type: "http_bulk_discard" },
      ]);
      const res = await post("/dead-letters/discard", { type: "http_bulk_discard" });
      assert.deepEqual(res.json(), { job_ids: ids, more: false });
      const left = await get("/dead-letters?type=http_bulk_discard");
      assert.deepEqual(left.json<{ dead_letters: unknown[] }>().dead_letters, []);
    });
  });

  describe("POST /jobs/{id}/retry", () => {
    it("makes a waiting job due now, replays a dead one, refuses a done one (409) and an unknown one (404)", async () => {
      const later = await api.db.ledger.addJob({ type: "http_retry", runAt: "2999-01-01T00:00:00Z" });
      const res = await post(`/jobs/${later.id}/retry`);
      assert.equal(res.statusCode, 200);
      const job = res.json<{ status: string; run_at: string }>();
      assert.equal(job.status, "pending");
      assert.ok(Date.parse(job.run_at) <= Date.now() + 1000);

      const [dead] = await killJobs(api.db, session, [{ type: "http_retry_dead" }]);
      const revived = await post(`/jobs/${dead}/retry`);
      assert.deepEqual(
        [revived.json<{ status: string }>().status, revived.json<{ attempt: number }>().attempt],
        ["pending", 0],
      );

      const [claimed] = await session.claim(["http_retry_dead"], 1);
      await session.complete([
        { id: dead as number, attempt: claimed?.attempt ?? 0, resultJson: "null", runMs: 1 },
      ]);
      const conflict = assertProblem(await post(`/jobs/${dead}/retry`), 409);
      assert.match(conflict.detail ?? "", /status is done/);
      assertProblem(await post("/jobs/987654321/retry"), 404);
      assertProblem(await post("/jobs/0/retry"), 422, ["id"]);
    });
  });
});
