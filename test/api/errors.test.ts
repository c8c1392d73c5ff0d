/**
 * Every 4xx of DESIGN.md §8: an RFC 9457 problem naming the bad field, never a 500, and nothing
 * half-written afterwards.
 */
import assert from "node:assert/strict";
import { describe, it } from "node:test";
import { BODY_LIMIT_BYTES } from "../../src/api/app.js";
import { assertProblem, JSON_HEADERS, postRawJob, useApi } from "./support.js";

describe("bad requests", () => {
  const api = useApi();

  const post = (payload: unknown) =>
    api.app.inject({ method: "POST", url: "/jobs", payload: payload as object });
  const postText = (text: string, contentType?: string) => postRawJob(api.app, text, contentType);

  it('rejects priority 0, 11, 2.5 and "high" with 422 naming priority', async () => {
    for (const priority of [0, 11, 2.5, "high", null, -1, true]) {
      const problem = assertProblem(await post({ type: "echo", priority }), 422, ["priority"]);
      assert.match(problem.errors?.[0]?.message ?? "", /1 to 10/);
    }
  });

  it("rejects a bad max_retries with 422 naming max_retries", async () => {
    for (const maxRetries of [-1, 11, 1.5, "3", null]) {
      assertProblem(await post({ type: "echo", max_retries: maxRetries }), 422, ["max_retries"]);
    }
  });

  it("rejects a run_at without UTC offset with 422 naming run_at", async () => {
    const problem = assertProblem(await post({ type: "echo", run_at: "2030-01-01T12:00:00" }), 422, [
      "run_at",
    ]);
    assert.match(problem.errors?.[0]?.message ?? "", /offset/);
  });

  it("rejects impossible or malformed run_at values with 422 naming run_at", async () => {
    for (const runAt of [
      "2030-02-30T12:00:00Z",
      "2030-01-01T24:00:00Z",
      "tomorrow",
      "",
      1893456000,
      "2030-13-01T00:00:00Z",
    ]) {
      assertProblem(await post({ type: "echo", run_at: runAt }), 422, ["run_at"]);
    }
  });

  it("rejects a NUL character in the payload with 422 naming payload/a", async () => {
    const res = await postText('{"type":"echo","payload":{"a":"x\\u0000y"}}');
    const problem = assertProblem(res, 422, ["payload/a"]);
    assert.match(problem.errors?.[0]?.message ?? "", /NUL/);
  });

  it("rejects a NUL character or unpaired surrogate in type with 422 naming type", async () => {
    assertProblem(await postText('{"type":"ec\\u0000ho"}'), 422, ["type"]);
    assertProblem(await postText('{"type":"ec\\ud800ho"}'), 422, ["type"]);
  });

  it("rejects a non-numeric id with 422 naming id", async () => {
    assertProblem(await api.app.inject({ method: "GET", url: "/jobs/abc" }), 422, ["id"]);
  });

  it("rejects a missing type with 422 naming type", async () => {
    const problem = assertProblem(await post({ payload: { a: 1 } }), 422, ["type"]);
    assert.match(problem.errors?.[0]?.message ?? "", /required/);
  });

  it("rejects an empty or over-long type with 422 naming type", async () => {
    assertProblem(await post({ type: "" }), 422, ["type"]);
    assertProblem(await post({ type: "x".repeat(201) }), 422, ["type"]);
    assertProblem(await post({ type: 42 }), 422, ["type"]);
  });

  it("rejects unknown extra fields with 422 naming each of them", async () => {
    assertProblem(await post({ type: "echo", max_retry: 2 }), 422, ["max_retry"]);
    assertProblem(await post({ type: "echo", colour: "red", size: 3 }), 422, ["colour", "size"]);
  });

  it("names every bad field of one request at once", async () => {
    assertProblem(await post({ priority: 0, max_retries: 99, run_at: "soon", extra: 1 }), 422, [
      "type",
      "priority",
      "max_retries",
      "run_at",
      "extra",
    ]);
  });

  it("rejects a body that is not a JSON object with 422 naming body", async () => {
    for (const text of ["[]", '"echo"', "42", "null"]) {
      assertProblem(await postText(text), 422, ["body"]);
    }
  });

  it("rejects a key that could pollute prototypes with 422 naming it", async () => {
    assertProblem(await postText('{"type":"echo","payload":{"__proto__":{"admin":true}}}'), 422, [
      "payload/__proto__",
    ]);
    assertProblem(await postText('{"type":"echo","payload":{"constructor":{"prototype":{}}}}'), 422, [
      "payload/constructor/prototype",
    ]);
    // Spelled with JSON escapes, in a batch.
    assertProblem(
      await api.app.inject({
        method: "POST",
        url: "/jobs/batch",
        payload: '{"jobs":[{"type":"echo","payload":{"\\u005f\\u005fproto\\u005f\\u005f":{}}}]}',
        headers: JSON_HEADERS,
      }),
      422,
      ["jobs/0/payload/__proto__"],
    );
    assertProblem(await postText('{"type":"echo","payload":{"constructor":{"\\u0070rototype":{}}}}'), 422, [
      "payload/constructor/prototype",
    ]);
  });

  it("refuses a payload nested deeper than 1,000 levels with 422", async () => {
    const nested = (depth: number) => `${"[".repeat(depth)}null${"]".repeat(depth)}`;
    for (const depth of [1001, 3000, 20000])
      assertProblem(await postText(`{"type":"echo","payload":${nested(depth)}}`), 422, ["payload"]);
  });

  it("answers malformed JSON with 400", async () => {
    const problem = assertProblem(await postText('{"type": "echo",'), 400);
    assert.match(problem.detail ?? "", /JSON/);
    assertProblem(await postText(""), 400);
  });

  it("answers a body that is not UTF-8 with 400, storing nothing", async () => {
    const before = await api.db.sql<{ n: number }>("SELECT count(*)::int AS n FROM jobs");
    for (const bytes of [[0xff], [0xc3, 0x28], [0xed, 0xa0, 0x80]]) {
      const body = Buffer.concat([
        Buffer.from('{"type":"echo","payload":"'),
        Buffer.from(bytes),
        Buffer.from('"}'),
      ]);
      const problem = assertProblem(await postRawJob(api.app, body), 400);
      assert.match(problem.detail ?? "", /UTF-8/);
    }
    assert.deepEqual(await api.db.sql("SELECT count(*)::int AS n FROM jobs"), before);
  });

  it("answers a query string that is not percent-encoded UTF-8 with 400, naming the parameter", async () => {
    for (const query of ["type=%FF", "type=%E2%82", "type=%", "status=pending&type=a%ZZb"]) {
      const problem = assertProblem(await api.app.inject({ method: "GET", url: `/jobs?${query}` }), 400, [
        "type",
      ]);
      assert.match(problem.detail ?? "", /UTF-8/);
    }
    assertProblem(await api.app.inject({ method: "GET", url: "/jobs?%FF=1" }), 400, ["%FF"]);
    assertProblem(await api.app.inject({ method: "GET", url: "/jobs/%FF" }), 400, ["path"]);
    // Well-formed encodings still reach the filter: a type with a space, a plus and a euro sign.
    const listed = await api.app.inject({ method: "GET", url: "/jobs?type=a+b%2B%E2%82%AC" });
    assert.equal(listed.statusCode, 200);
  });

  it("answers a body in another charset than UTF-8 with 415, unless its bytes read the same", async () => {
    const latin1 = Buffer.from('{"type":"echo","payload":"caf\u00e9"}', "latin1");
    for (const [contentType, body] of [
      ["application/json; charset=iso-8859-1", latin1],
      ['application/json; charset="UTF-16"', '{"type":"echo"}'],
      ["application/json;charset=utf-32le", '{"type":"echo"}'],
    ] as const) {
      const problem = assertProblem(await postRawJob(api.app, body, contentType), 415);
      assert.match(problem.detail ?? "", /UTF-8/);
    }
  });

  it("answers a body over the limit with 413", async () => {
    const filler = "x".repeat(BODY_LIMIT_BYTES);
    assertProblem(await postText(`{"type":"echo","payload":"${filler}"}`), 413);
  });

  it("answers a body that is not application/json with 415", async () => {
    assertProblem(await postText("type=echo", "application/x-www-form-urlencoded"), 415);
    assertProblem(await postText('{"type":"echo"}', "text/plain"), 415);
    assertProblem(await postText("<job/>", "application/xml"), 415);
  });

  it("answers an unknown route with a 404 problem", async () => {
    assertProblem(await api.app.inject({ method: "GET", url: "/no/such/route" }), 404);
    assertProblem(await api.app.inject({ method: "PUT", url: "/jobs/1" }), 404);
  });

  it("answers a payload nested too deeply to store with 422, not 500", async () => {
    const depth = 200_000;
    assertProblem(await postText(`{"type":"echo","payload":${"[".repeat(depth)}${"]".repeat(depth)}}`), 422, [
      "payload",
    ]);
  });

  it("answers a payload PostgreSQL refuses (unpaired surrogate) with 422, not 500", async () => {
    const problem = assertProblem(await postText('{"type":"echo","payload":{"a":"\\ud800"}}'), 422);
    assert.ok(Array.isArray(problem.errors));
  });

  it("has written nothing after all the bad requests", async () => {
    const [row] = await api.db.sql<{ n: number }>("SELECT count(*)::int AS n FROM jobs");
    assert.equal(row?.n, 0);
    const list = await api.app.inject({ method: "GET", url: "/jobs" });
    assert.deepEqual(list.json().jobs, []);
    const metrics = await api.app.inject({ method: "GET", url: "/metrics" });
    assert.equal(metrics.json().queue_depth.pending, 0);
  });
});
