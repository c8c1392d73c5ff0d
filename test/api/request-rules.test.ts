/**
 * The API's own rules on top of Fastify's TypeBox validator and query-string parser: no coercion
 * of bodies, query and path integers only from digit strings, our messages from the limits, one
 * problem per field capped at LIMITS.fieldProblems, a query parser that parses as Fastify's default
 * and refuses bad percent-encoding, and BatchTooLargeError answered 422 naming `jobs`.
 */
import assert from "node:assert/strict";
import { describe, it } from "node:test";
import type { FastifyRequest } from "fastify";
import { problemFor } from "../../src/api/problem.js";
import { parseQueryString } from "../../src/api/query-encoding.js";
import { BatchTooLargeError } from "../../src/errors.js";
import { integerRangeMessage, LIMITS } from "../../src/queue/job-shape.js";
import { assertProblem, JSON_HEADERS, useApi } from "./support.js";

describe("request rules", () => {
  const api = useApi();
  const post = (body: unknown) =>
    api.app.inject({ method: "POST", url: "/jobs", payload: JSON.stringify(body), headers: JSON_HEADERS });

  it("a body is checked as sent: no number from a string, no 0 from null, no string from a number", async () => {
    for (const body of [
      { type: "t", priority: "7" },
      { type: "t", max_retries: null },
      { type: 5 },
      { type: "t", priority: true },
    ]) {
      const field = Object.keys(body).find((k) => k !== "type") ?? "type";
      assertProblem(await post(body), 422, [field]);
    }
  });

  it("messages come from the limits", async () => {
    const body = assertProblem(await post({ type: "t", priority: 11, max_retries: -1 }), 422, [
      "priority",
      "max_retries",
    ]);
    assert.deepEqual(body.errors, [
      { field: "priority", message: integerRangeMessage(LIMITS.priority) },
      { field: "max_retries", message: integerRangeMessage(LIMITS.maxRetries) },
    ]);
  });

  it("query integers come only from a string of digits", async () => {
    for (const limit of ["2.5", "1e3", "%207", "7%20", "0x10", "+7", ""]) {
      assertProblem(await api.app.inject({ method: "GET", url: `/jobs?limit=${limit}` }), 422, ["limit"]);
    }
    const ok = await api.app.inject({ method: "GET", url: "/jobs?limit=7&offset=0" });
    assert.equal(ok.statusCode, 200, ok.body);
    assert.deepEqual({ limit: ok.json().limit, offset: ok.json().offset }, { limit: 7, offset: 0 });
  });

  it("every bad field is listed once, at most LIMITS.fieldProblems of them", async () => {
    const jobs = Array.from({ length: 1500 }, () => ({ type: "", priority: 0 }));
    const res = await api.app.inject({
      method: "POST",
      url: "/jobs/batch",
      payload: JSON.stringify({ jobs }),
      headers: JSON_HEADERS,
    });
    assert.equal(res.statusCode, 422);
    const errors = res.json<{ errors: { field: string }[] }>().errors;
    assert.equal(errors.length, LIMITS.fieldProblems);
    assert.equal(new Set(errors.map((e) => e.field)).size, errors.length);
    assert.deepEqual(
      errors.slice(0, 2).map((e) => e.field),
      ["jobs/0/type", "jobs/0/priority"],
    );
  });

  it("a badly encoded parameter of a route without a query schema is refused too", async () => {
    assertProblem(await api.app.inject({ method: "GET", url: "/metrics?x=%FF" }), 400, ["x"]);
    // No route, no query parsing (Fastify's not-found router has its own parser): 404 first.
    assertProblem(await api.app.inject({ method: "GET", url: "/nope?x=%FF" }), 404);
  });
});

describe("the query-string parser", () => {
  it("parses as Fastify's default: + is a space, a repeated name gives an array, a bare name is empty", () => {
    assert.deepEqual(
      { ...parseQueryString("a=1&b=x+y%2Bz&a=2&c&&d=%E2%82%AC&a=3&e=1=2") },
      { a: ["1", "2", "3"], b: "x y+z", c: "", d: "€", e: "1=2" },
    );
    assert.deepEqual({ ...parseQueryString("") }, {});
    assert.equal(Object.getPrototypeOf(parseQueryString("__proto__=1")), null);
  });

  it("keeps a badly encoded component as sent, and shows no extra key for the finding", () => {
    const parsed = parseQueryString("type=%FF&ok=1");
    assert.deepEqual({ ...parsed }, { type: "%FF", ok: "1" });
    assert.deepEqual(Object.keys(parsed), ["type", "ok"]);
  });
});

describe("batch size", () => {
  it("BatchTooLargeError is 422 naming jobs", () => {
    const problem = problemFor(new BatchTooLargeError(LIMITS.batchJobs + 1, LIMITS.batchJobs), {
      url: "/jobs/batch",
    } as FastifyRequest);
    assert.equal(problem.status, 422);
    assert.deepEqual(
      problem.errors?.map((e) => e.field),
      ["jobs"],
    );
  });
});
