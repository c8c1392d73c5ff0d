/** Probes, OpenAPI docs, and server faults (500/503 problems that leak nothing). */
import assert from "node:assert/strict";
import { Writable } from "node:stream";
import { describe, it } from "node:test";
import { pino } from "pino";
import { buildApp } from "../../src/api/app.js";
import { createPool } from "../../src/db/pool.js";
import { Ledger } from "../../src/queue/ledger.js";
import { DATABASE_URL } from "../helpers/db.js";
import { assertProblem, useApi } from "./support.js";

interface OpenApiDocument {
  openapi: string;
  paths: Record<
    string,
    Record<
      string,
      { summary?: string; description?: string; responses?: Record<string, { content?: object }> }
    >
  >;
}

describe("health, readiness and docs", () => {
  const api = useApi();

  it("answers GET /health with 200 {status: ok}", async () => {
    const res = await api.app.inject({ method: "GET", url: "/health" });
    assert.equal(res.statusCode, 200);
    assert.deepEqual(res.json(), { status: "ok" });
  });

  it("answers GET /ready with 200 {status: ready} when the database answers", async () => {
    const res = await api.app.inject({ method: "GET", url: "/ready" });
    assert.equal(res.statusCode, 200);
    assert.deepEqual(res.json(), { status: "ready" });
  });

  it("answers GET /ready with a 503 problem when the schema is missing, while /health stays 200", async () => {
    const broken = await buildApp({
      ledger: new Ledger(api.db.pool, "tq_test_not_migrated"),
      config: api.db.config,
    });
    try {
      assertProblem(await broken.inject({ method: "GET", url: "/ready" }), 503);
      assert.equal((await broken.inject({ method: "GET", url: "/health" })).statusCode, 200);
    } finally {
      await broken.close();
    }
  });

  it("serves the Swagger UI at /docs", async () => {
    const res = await api.app.inject({ method: "GET", url: "/docs" });
    assert.equal(res.statusCode, 200);
    assert.match(String(res.headers["content-type"]), /^text\/html/);
    assert.match(res.body, /swagger-ui/i);
  });

  it("serves an OpenAPI document at /docs/json listing every route with a summary and responses", async () => {
    const res = await api.app.inject({ method: "GET", url: "/docs/json" });
    assert.equal(res.statusCode, 200);
    const doc = res.json<OpenApiDocument>();
    assert.match(doc.openapi, /^3\./);
    const routes = Object.entries(doc.paths).flatMap(([path, methods]) =>
      Object.keys(methods).map((method) => `${method.toUpperCase()} ${path}`),
    );
    assert.deepEqual(routes.sort(), [
      "DELETE /dead-letters/{job_id}",
      "DELETE /jobs/{id}",
      "DELETE /schedules/{name}",
      "DELETE /types/{type}/limit",
      "GET /dead-letters",
      "GET /dead-letters/{job_id}",
      "GET /health",
      "GET /jobs",
      "GET /jobs/{id}",
      "GET /metrics",
      "GET /metrics/prometheus",
      "GET /ready",
      "GET /schedules",
      "GET /schedules/{name}",
      "GET /stats/throughput",
      "GET /stats/types",
      "GET /types",
      "GET /workers",
      "POST /dead-letters/discard",
      "POST /dead-letters/replay",
      "POST /dead-letters/{job_id}/replay",
      "POST /jobs",
      "POST /jobs/batch",
      "POST /jobs/{id}/cancel",
      "POST /jobs/{id}/retry",
      "POST /types/{type}/pause",
      "POST /types/{type}/resume",
      "PUT /schedules/{name}",
      "PUT /types/{type}/limit",
    ]);
    for (const [path, methods] of Object.entries(doc.paths)) {
      for (const [method, operation] of Object.entries(methods)) {
        assert.ok(operation.summary, `${method} ${path} has a summary`);
        assert.ok(operation.description, `${method} ${path} has a description`);
        assert.ok(
          operation.responses?.["200"] ?? operation.responses?.["201"],
          `${method} ${path} documents success`,
        );
      }
    }
    const post = doc.paths["/jobs"]?.post as unknown as {
      requestBody: { content: { "application/json": { schema: { properties: Record<string, unknown> } } } };
      responses: Record<string, { content?: Record<string, unknown> }>;
    };
    assert.deepEqual(Object.keys(post.requestBody.content["application/json"].schema.properties).sort(), [
      "idempotency_key",
      "max_retries",
      "payload",
      "priority",
      "run_at",
      "timeout_seconds",
      "type",
    ]);
    assert.ok(
      post.responses["422"]?.content?.["application/problem+json"],
      "422 is documented as problem+json",
    );
  });

  it("answers a server fault with a 500 problem that leaks nothing, and logs it", async () => {
    const lines: string[] = [];
    const sink = new Writable({
      write(chunk: Buffer, _encoding, done) {
        lines.push(chunk.toString());
        done();
      },
    });
    const pool = createPool({ connectionString: DATABASE_URL, max: 1 });
    await pool.end();
    const faulty = await buildApp({
      ledger: new Ledger(pool, api.db.schema),
      config: api.db.config,
      logger: pino(sink),
    });
    try {
      const problem = assertProblem(await faulty.inject({ method: "GET", url: "/jobs/1" }), 500);
      assert.doesNotMatch(JSON.stringify(problem), /pool|stack|at \w+ \(/i);
      assert.ok(
        lines.some((line) => /"level":50/.test(line) && /pool/i.test(line)),
        "the cause is logged at error level",
      );
    } finally {
      await faulty.close();
    }
  });
});
