/** Shared assertions of the API tests. */
import assert from "node:assert/strict";
import { after, before } from "node:test";
import type { FastifyInstance, LightMyRequestResponse } from "fastify";
import { buildApp } from "../../src/api/app.js";
import { createTestDb, type TestDb } from "../helpers/db.js";

/** An RFC 9457 body as the API sends it. */
export interface ProblemBody {
  type: string;
  title: string;
  status: number;
  detail?: string;
  instance?: string;
  errors?: { field: string; message: string }[];
}

/**
 * Asserts `res` is an RFC 9457 problem with this status (content type, members, status echoed)
 * and, if `fields` is given, that `errors` names exactly those fields. Returns the body.
 */
export function assertProblem(res: LightMyRequestResponse, status: number, fields?: string[]): ProblemBody {
  assert.equal(
    res.statusCode,
    status,
    `expected ${status}, got ${res.statusCode}: ${res.body.slice(0, 500)}`,
  );
  assert.match(String(res.headers["content-type"]), /^application\/problem\+json/);
  const body = res.json<ProblemBody>();
  assert.equal(typeof body.type, "string");
  assert.ok(body.type.length > 0);
  assert.equal(typeof body.title, "string");
  assert.ok(body.title.length > 0);
  assert.equal(body.status, status);
  assert.equal(typeof body.detail, "string");
  assert.ok((body.detail ?? "").length > 0);
  assert.equal(typeof body.instance, "string");
  if (fields) {
    assert.ok(Array.isArray(body.errors), "errors must be an array");
    assert.deepEqual(
      [...new Set((body.errors ?? []).map((e) => e.field))].sort(),
      [...fields].sort(),
      `errors: ${JSON.stringify(body.errors)}`,
    );
    for (const e of body.errors ?? []) assert.ok(e.message.length > 0, `empty message for ${e.field}`);
  }
  return body;
}

/** Headers of a JSON request. */
export const JSON_HEADERS = { "content-type": "application/json" } as const;

/** POST /jobs with a raw body (bytes or text) under `contentType`, as a client would send it. */
export function postRawJob(app: FastifyInstance, body: Buffer | string, contentType = "application/json") {
  return app.inject({
    method: "POST",
    url: "/jobs",
    payload: body,
    headers: { "content-type": contentType },
  });
}

/**
 * Gives the enclosing suite its own schema and app: registers `before`/`after` hooks and returns
 * an object whose `db` and `app` are set once the suite starts (read them inside tests).
 */
export function useApi(): { db: TestDb; app: FastifyInstance } {
  const api = {} as { db: TestDb; app: FastifyInstance };
  before(async () => {
    api.db = await createTestDb();
    api.app = await buildApp({ ledger: api.db.ledger, config: api.db.config });
  });
  after(async () => {
    await api.app.close();
    await api.db.drop();
  });
  return api;
}
