/**
 * Property: whatever JSON-ish body arrives at POST /jobs or POST /jobs/batch, the answer is never
 * a 5xx; a 4xx is always problem+json with a non-empty `errors` or `detail`; a 201 is a real job;
 * and the database holds exactly the jobs that were answered 201 (nothing half-written).
 */
import assert from "node:assert/strict";
import { describe, it } from "node:test";
import fc from "fast-check";
import type { JobResponse } from "../../src/api/schemas.js";
import { type ProblemBody, useApi } from "./support.js";

/** Any UTF-16 code unit, NUL and unpaired surrogates included. */
const codeUnit = fc.integer({ min: 0, max: 0xffff }).map((c) => String.fromCharCode(c));
const nastyString = fc.oneof(
  fc.string(),
  fc.string({ unit: codeUnit, maxLength: 12 }),
  fc.string({ unit: "binary" }),
);

const scalar = fc.oneof(
  fc.integer({ min: -20, max: 20 }),
  fc.double(),
  fc.boolean(),
  fc.constant(null),
  nastyString,
  fc.constantFrom(
    "2030-01-01T12:00:00Z",
    "2030-01-01T12:00:00",
    "2030-02-30T00:00:00+01:00",
    "2001-01-01 00:00:00+0000",
    "5",
    "",
  ),
);
const anyValue = fc.oneof(
  scalar,
  fc.jsonValue(),
  fc.array(scalar, { maxLength: 3 }),
  fc.dictionary(nastyString, scalar),
);

/** A valid spec: what a well-behaved client sends. */
const validSpec = fc.record(
  {
    type: fc.oneof(fc.constantFrom("echo", "noop", "is_prime"), fc.string({ minLength: 1, maxLength: 200 })),
    payload: fc.jsonValue({ maxDepth: 3 }),
    priority: fc.integer({ min: 1, max: 10 }),
    max_retries: fc.integer({ min: 0, max: 10 }),
    run_at: fc
      .date({
        min: new Date("2000-01-01T00:00:00Z"),
        max: new Date("2100-01-01T00:00:00Z"),
        noInvalidDate: true,
      })
      .map((d) => d.toISOString()),
  },
  { requiredKeys: ["type"] },
);

/** A valid spec with one field replaced by anything, or one unknown key added. */
const mutatedSpec = fc
  .tuple(
    validSpec,
    fc.constantFrom("type", "payload", "priority", "max_retries", "run_at", "extra"),
    anyValue,
  )
  .map(([spec, key, value]) => ({ ...spec, [key]: value }));

/** Something shaped like a job spec: known fields with good or bad values, sometimes extra keys. */
const chaoticSpec = fc
  .record(
    {
      type: fc.oneof(fc.constantFrom("echo", "noop", "x".repeat(200), "x".repeat(201)), nastyString, scalar),
      payload: fc.oneof(fc.jsonValue(), anyValue, fc.dictionary(nastyString, nastyString)),
      priority: fc.oneof(fc.integer({ min: -2, max: 12 }), scalar),
      max_retries: fc.oneof(fc.integer({ min: -2, max: 12 }), scalar),
      run_at: scalar,
    },
    { requiredKeys: [] },
  )
  .chain((spec) =>
    fc
      .option(fc.dictionary(nastyString, scalar, { maxKeys: 2 }), { nil: undefined })
      .map((extra) => ({ ...extra, ...spec })),
  );

const specLike = fc.oneof(
  { weight: 2, arbitrary: validSpec },
  { weight: 3, arbitrary: mutatedSpec },
  { weight: 3, arbitrary: chaoticSpec },
);

const request = fc.oneof(
  { weight: 4, arbitrary: specLike.map((spec) => ({ url: "/jobs", text: JSON.stringify(spec) })) },
  {
    weight: 2,
    arbitrary: fc
      .array(specLike, { maxLength: 4 })
      .map((jobs) => ({ url: "/jobs/batch", text: JSON.stringify({ jobs }) })),
  },
  {
    weight: 1,
    arbitrary: anyValue.map((value) => ({ url: "/jobs", text: JSON.stringify(value) ?? "null" })),
  },
  { weight: 1, arbitrary: nastyString.map((text) => ({ url: "/jobs", text })) },
  {
    weight: 1,
    arbitrary: specLike.map((spec) => ({ url: "/jobs/batch", text: JSON.stringify(spec).slice(0, -1) })),
  },
);

describe("property: random bodies", () => {
  const api = useApi();

  it("never answers 5xx, always answers 4xx as problem+json, and writes only what it answers 201", async () => {
    const created = new Set<number>();
    const statuses = new Map<number, number>();
    await fc.assert(
      fc.asyncProperty(request, async ({ url, text }) => {
        const res = await api.app.inject({
          method: "POST",
          url,
          payload: text,
          headers: { "content-type": "application/json" },
        });
        statuses.set(res.statusCode, (statuses.get(res.statusCode) ?? 0) + 1);
        assert.ok(res.statusCode < 500, `${res.statusCode} for ${url} ${text}: ${res.body}`);
        if (res.statusCode >= 400) {
          assert.match(String(res.headers["content-type"]), /^application\/problem\+json/);
          const problem = res.json<ProblemBody>();
          assert.equal(problem.status, res.statusCode);
          assert.ok(
            (problem.errors?.length ?? 0) > 0 || (problem.detail ?? "").length > 0,
            `empty problem: ${res.body}`,
          );
          return;
        }
        assert.equal(res.statusCode, 201, res.body);
        const body = res.json<JobResponse | { jobs: JobResponse[] }>();
        const jobs = "jobs" in body ? body.jobs : [body];
        for (const job of jobs) {
          assert.equal(job.status, "pending");
          assert.ok(job.priority >= 1 && job.priority <= 10);
          assert.ok(job.max_retries >= 0 && job.max_retries <= 10);
          created.add(job.id);
        }
      }),
      { numRuns: 400 },
    );
    const rows = await api.db.sql<{ id: number }>("SELECT id FROM jobs ORDER BY id");
    assert.deepEqual(
      rows.map((r) => r.id),
      [...created].sort((a, b) => a - b),
      "the database holds exactly the jobs answered 201",
    );
    assert.ok((statuses.get(422) ?? 0) > 0, `some bodies are invalid: ${JSON.stringify([...statuses])}`);
    assert.ok((statuses.get(201) ?? 0) > 0, `some bodies are valid: ${JSON.stringify([...statuses])}`);
  });
});
