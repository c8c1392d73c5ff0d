/**
 * GET /types, POST /types/{type}/pause and /resume (issue 14, items 6 and 8), PUT and DELETE
 * /types/{type}/limit (issue 13, item 3), and the paused and unhandled types in GET /metrics and
 * GET /metrics/prometheus.
 */
import assert from "node:assert/strict";
import { describe, it } from "node:test";
import type { MetricsResponse } from "../../src/api/schemas.js";
import { assertProblem, JSON_HEADERS, useApi } from "./support.js";

interface TypeState {
  type: string;
  paused: boolean;
  paused_at: string | null;
  limit: { max_running: number | null; rate_per_second: number | null; burst: number | null } | null;
  pending: number;
  oldest_pending_age_seconds: number | null;
  live_workers: number;
}

/** Value of one sample line of a Prometheus text body, or undefined when the series is absent. */
function sample(text: string, series: string): number | undefined {
  const line = text.split("\n").find((l) => l.startsWith(`${series} `));
  return line === undefined ? undefined : Number(line.slice(series.length + 1));
}

describe("job types", () => {
  const api = useApi();
  const types = async (): Promise<TypeState[]> => {
    const res = await api.app.inject({ method: "GET", url: "/types" });
    assert.equal(res.statusCode, 200, res.body);
    return res.json<{ types: TypeState[] }>().types;
  };
  const post = (type: string, action: "pause" | "resume") =>
    api.app.inject({ method: "POST", url: `/types/${encodeURIComponent(type)}/${action}` });

  it("lists nothing on an empty queue", async () => {
    assert.deepEqual(await types(), []);
  });

  it("pauses and resumes a type, idempotently; the state is a row of paused_types", async () => {
    const paused = await post("send email/é", "pause");
    assert.equal(paused.statusCode, 200, paused.body);
    const body = paused.json<{ type: string; paused: boolean; paused_at: string }>();
    assert.equal(body.type, "send email/é");
    assert.equal(body.paused, true);
    assert.ok(Math.abs(Date.parse(body.paused_at) - Date.now()) < 60_000, body.paused_at);
    const again = await post("send email/é", "pause");
    assert.deepEqual(again.json(), body, "pausing again keeps paused_at");
    const rows = await api.db.sql<{ type: string }>("SELECT type FROM paused_types");
    assert.deepEqual(rows, [{ type: "send email/é" }]);
    assert.deepEqual(await types(), [
      {
        type: "send email/é",
        paused: true,
        paused_at: body.paused_at,
        limit: null,
        pending: 0,
        oldest_pending_age_seconds: null,
        live_workers: 0,
      },
    ]);
    for (let i = 0; i < 2; i++) {
      const resumed = await post("send email/é", "resume");
      assert.equal(resumed.statusCode, 200, resumed.body);
      assert.deepEqual(resumed.json(), { type: "send email/é", paused: false, paused_at: null });
    }
    assert.deepEqual(await api.db.sql("SELECT type FROM paused_types"), []);
    assert.deepEqual(await types(), []);
  });

  const putLimit = (type: string, body: unknown) =>
    api.app.inject({
      method: "PUT",
      url: `/types/${encodeURIComponent(type)}/limit`,
      payload: JSON.stringify(body),
      headers: JSON_HEADERS,
    });
  const deleteLimit = (type: string) =>
    api.app.inject({ method: "DELETE", url: `/types/${encodeURIComponent(type)}/limit` });

  it("sets, replaces, lists and removes a type's limits; the state is a row of type_limits", async () => {
    const set = await putLimit("mail/é", { max_running: 5, rate_per_second: 2.5 });
    assert.equal(set.statusCode, 200, set.body);
    const body = set.json<{ updated_at: string }>();
    assert.deepEqual(body, {
      type: "mail/é",
      max_running: 5,
      rate_per_second: 2.5,
      burst: null,
      updated_at: body.updated_at,
    });
    assert.ok(Math.abs(Date.parse(body.updated_at) - Date.now()) < 60_000, body.updated_at);
    assert.deepEqual(
      await api.db.sql("SELECT type, max_running, rate_per_second, burst, tokens FROM type_limits"),
      [{ type: "mail/é", max_running: 5, rate_per_second: 2.5, burst: null, tokens: 3 }],
    );
    const listed = (await types()).find((t) => t.type === "mail/é");
    assert.deepEqual(listed?.limit, { max_running: 5, rate_per_second: 2.5, burst: null });
    assert.equal(listed?.paused, false);
    const replaced = await putLimit("mail/é", { rate_per_second: 10, burst: 20 });
    assert.equal(replaced.statusCode, 200, replaced.body);
    assert.deepEqual((await types()).find((t) => t.type === "mail/é")?.limit, {
      max_running: null,
      rate_per_second: 10,
      burst: 20,
    });
    const removed = await deleteLimit("mail/é");
    assert.equal(removed.statusCode, 200, removed.body);
    assert.deepEqual(removed.json(), { type: "mail/é", removed: true });
    assert.deepEqual((await deleteLimit("mail/é")).json(), { type: "mail/é", removed: false }, "idempotent");
    assert.deepEqual(await api.db.sql("SELECT type FROM type_limits"), []);
    assert.deepEqual(await types(), []);
  });

  it("shows each limited type's limits in GET /metrics and as Prometheus gauges, until removed", async () => {
    assert.equal((await putLimit("mail", { max_running: 5, rate_per_second: 2.5 })).statusCode, 200);
    assert.equal((await putLimit("sms", { rate_per_second: 10, burst: 20 })).statusCode, 200);
    const metrics = async () =>
      (await api.app.inject({ method: "GET", url: "/metrics" })).json<MetricsResponse>().type_limits;
    assert.deepEqual(await metrics(), [
      { type: "mail", max_running: 5, rate_per_second: 2.5, burst: null },
      { type: "sms", max_running: null, rate_per_second: 10, burst: 20 },
    ]);
    const prometheus = async () => (await api.app.inject({ method: "GET", url: "/metrics/prometheus" })).body;
    const text = await prometheus();
    assert.equal(sample(text, 'taskqueue_type_limit_max_running{type="mail"}'), 5);
    assert.equal(sample(text, 'taskqueue_type_limit_max_running{type="sms"}'), undefined, "no such limit");
    assert.equal(sample(text, 'taskqueue_type_limit_rate_per_second{type="mail"}'), 2.5);
    assert.equal(sample(text, 'taskqueue_type_limit_rate_per_second{type="sms"}'), 10);
    assert.match(text, /^# TYPE taskqueue_type_limit_max_running gauge$/m);
    await deleteLimit("mail");
    await deleteLimit("sms");
    assert.deepEqual(await metrics(), []);
    assert.doesNotMatch(await prometheus(), /^taskqueue_type_limit_/m);
  });

  it("answers 422 naming each bad limit field, and writes nothing", async () => {
    assertProblem(await putLimit("t", {}), 422, ["max_running"]);
    assertProblem(await putLimit("t", { max_running: 0 }), 422, ["max_running"]);
    assertProblem(await putLimit("t", { max_running: 1.5 }), 422, ["max_running"]);
    assertProblem(await putLimit("t", { rate_per_second: 0 }), 422, ["rate_per_second"]);
    assertProblem(await putLimit("t", { rate_per_second: "5" }), 422, ["rate_per_second"]);
    assertProblem(await putLimit("t", { rate_per_second: 2e6 }), 422, ["rate_per_second"]);
    const worded = (await putLimit("t", { rate_per_second: 0 })).json<{ errors: { message: string }[] }>();
    assert.equal(
      worded.errors[0]?.message,
      "must be a number above 0, at most 1,000,000",
      "as the ledger words it",
    );
    assertProblem(await putLimit("t", { max_running: 3, burst: 4 }), 422, ["burst"]);
    assertProblem(await putLimit("t", { max_running: 3, extra: 1 }), 422);
    assertProblem(await putLimit("x".repeat(201), { max_running: 3 }), 422, ["type"]);
    assertProblem(await deleteLimit("x".repeat(201)), 422, ["type"]);
    assert.deepEqual(await api.db.sql("SELECT type FROM type_limits"), []);
  });

  it("documents the limit routes in the OpenAPI document", async () => {
    const doc = (await api.app.inject({ method: "GET", url: "/docs/json" })).json<{
      paths: Record<string, Record<string, { requestBody?: unknown }>>;
    }>();
    const path = doc.paths["/types/{type}/limit"];
    assert.ok(path?.put?.requestBody, "PUT documented with its body");
    assert.ok(path?.delete, "DELETE documented");
  });

  it("answers 422 naming `type` for a type name too long", async () => {
    assertProblem(await post("x".repeat(201), "pause"), 422, ["type"]);
    assertProblem(await post("x".repeat(201), "resume"), 422, ["type"]);
  });

  it("lists pending jobs, the oldest due age and live workers per type; unhandled and paused types show in /metrics", async () => {
    await api.db.sql(
      `INSERT INTO jobs (type, run_at) VALUES
         ('orphan', now() - interval '90 seconds'), ('orphan', now()), ('orphan', now() + interval '1 hour'),
         ('handled', now()), ('later', now() + interval '1 hour')`,
    );
    await api.db.sql(
      "INSERT INTO workers (id, host, pid, types, concurrency) VALUES ('w1', 'h', 1, '{handled,idle}', 1), ('old', 'h', 2, '{later}', 1)",
    );
    await api.db.sql("UPDATE workers SET heartbeat_at = now() - interval '1 hour' WHERE id = 'old'");
    await post("handled", "pause");
    const listed = await types();
    assert.deepEqual(
      listed.map((t) => [t.type, t.paused, t.pending, t.live_workers]),
      [
        ["handled", true, 1, 1],
        ["idle", false, 0, 1],
        ["later", false, 1, 0],
        ["orphan", false, 3, 0],
      ],
    );
    const orphan = listed.find((t) => t.type === "orphan");
    assert.ok(
      (orphan?.oldest_pending_age_seconds ?? 0) >= 89 && (orphan?.oldest_pending_age_seconds ?? 0) < 150,
      `oldest due orphan: ${orphan?.oldest_pending_age_seconds}`,
    );
    assert.equal(listed.find((t) => t.type === "later")?.oldest_pending_age_seconds, null, "none due yet");

    const res = await api.app.inject({ method: "GET", url: "/metrics" });
    const m = res.json<MetricsResponse>();
    assert.deepEqual(
      m.paused_types.map((t) => t.type),
      ["handled"],
    );
    assert.deepEqual(
      m.unhandled_types.map((t) => [t.type, t.pending, t.oldest_pending_age_seconds === null]),
      [
        ["later", 1, true],
        ["orphan", 3, false],
      ],
    );
    const text = (await api.app.inject({ method: "GET", url: "/metrics/prometheus" })).body;
    assert.equal(sample(text, 'taskqueue_type_paused{type="handled"}'), 1);
    assert.equal(sample(text, 'taskqueue_type_paused{type="orphan"}'), 0);
    assert.equal(sample(text, 'taskqueue_unhandled_pending_jobs{type="orphan"}'), 3);
    assert.equal(sample(text, 'taskqueue_unhandled_pending_jobs{type="later"}'), 1);
    assert.equal(sample(text, 'taskqueue_unhandled_pending_jobs{type="handled"}'), undefined);
    const age = sample(text, 'taskqueue_unhandled_oldest_pending_age_seconds{type="orphan"}') ?? 0;
    assert.ok(age >= 89 && age < 150, `age ${age}`);
    assert.equal(sample(text, 'taskqueue_unhandled_oldest_pending_age_seconds{type="later"}'), 0);
  });
});
