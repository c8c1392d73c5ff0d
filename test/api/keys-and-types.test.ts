/**
 * Over HTTP: idempotency keys (issue 14, item 7: 201 then 200 with the same job, also under 50
 * concurrent identical requests; 409 for another body; batches) and the allow-list of job types
 * (item 6: 422 naming `type` for any other type, single and batch, and in the library).
 */
import assert from "node:assert/strict";
import { after, before, describe, it } from "node:test";
import type { FastifyInstance } from "fastify";
import { buildApp } from "../../src/api/app.js";
import { JobValidationError } from "../../src/errors.js";
import { Ledger } from "../../src/queue/ledger.js";
import { createTestDb, type TestDb } from "../helpers/db.js";
import { assertProblem, JSON_HEADERS, useApi } from "./support.js";

interface JobBody {
  id: number;
  idempotency_key: string | null;
  status: string;
}

describe("idempotency keys over HTTP", () => {
  const api = useApi();
  const post = (url: string, body: unknown, headers: Record<string, string> = {}) =>
    api.app.inject({
      method: "POST",
      url,
      headers: { ...JSON_HEADERS, ...headers },
      payload: JSON.stringify(body),
    });

  it("POST /jobs answers 201, then 200 with the same job; another body is 409 naming the field", async () => {
    const body = { type: "http_idem", payload: { order: 1234 }, idempotency_key: "order-1234" };
    const first = await post("/jobs", body);
    assert.equal(first.statusCode, 201);
    const job = first.json<JobBody>();
    assert.equal(job.idempotency_key, "order-1234");
    const second = await post("/jobs", body);
    assert.equal(second.statusCode, 200);
    assert.equal(second.json<JobBody>().id, job.id);
    const conflict = assertProblem(await post("/jobs", { ...body, payload: { order: 9 } }), 409, [
      "idempotency_key",
    ]);
    assert.match(conflict.detail ?? "", new RegExp(`job ${job.id}`));
    assertProblem(await post("/jobs", { type: "http_idem", idempotency_key: "" }), 422, ["idempotency_key"]);
  });

  it("50 concurrent identical POST /jobs create one job: one 201, 49 × 200, one id", async () => {
    const body = { type: "http_idem_race", payload: { n: 1 }, idempotency_key: "race-1" };
    const answers = await Promise.all(Array.from({ length: 50 }, () => post("/jobs", body)));
    const codes = answers.map((a) => a.statusCode);
    assert.equal(codes.filter((code) => code === 201).length, 1);
    assert.equal(codes.filter((code) => code === 200).length, 49);
    assert.equal(new Set(answers.map((a) => a.json<JobBody>().id)).size, 1);
    const [row] = await api.db.sql<{ n: number }>(
      "SELECT count(*)::int AS n FROM jobs WHERE type = 'http_idem_race'",
    );
    assert.equal(row?.n, 1);
  });

  it("POST /jobs/batch: 201 when it creates a job, 200 when every key was held; minimal ids too", async () => {
    const jobs = [
      { type: "http_idem_batch", idempotency_key: "batch-a" },
      { type: "http_idem_batch", idempotency_key: "batch-b" },
    ];
    const first = await post("/jobs/batch", { jobs });
    assert.equal(first.statusCode, 201);
    const created = first.json<{ jobs: JobBody[] }>().jobs;
    assert.deepEqual(
      created.map((j) => j.idempotency_key),
      ["batch-a", "batch-b"],
    );
    const again = await post("/jobs/batch", { jobs });
    assert.equal(again.statusCode, 200);
    assert.deepEqual(
      again.json<{ jobs: JobBody[] }>().jobs.map((j) => j.id),
      created.map((j) => j.id),
    );
    const minimal = await post("/jobs/batch", { jobs }, { prefer: "return=minimal" });
    assert.equal(minimal.statusCode, 200);
    assert.deepEqual(minimal.json(), { ids: created.map((j) => j.id) });
    const mixed = await post("/jobs/batch", { jobs: [...jobs, { type: "http_idem_batch" }] });
    assert.equal(mixed.statusCode, 201);
    assertProblem(
      await post("/jobs/batch", { jobs: [jobs[0], { ...jobs[1], payload: { other: true } }] }),
      409,
      ["jobs/1/idempotency_key"],
    );
    assertProblem(
      await post("/jobs/batch", {
        jobs: [
          { type: "http_idem_batch", idempotency_key: "batch-c", payload: 1 },
          { type: "http_idem_batch", idempotency_key: "batch-c", payload: 2 },
        ],
      }),
      422,
      ["jobs/1/idempotency_key"],
    );
  });
});

describe("the allow-list of job types", () => {
  let db: TestDb;
  let app: FastifyInstance;
  before(async () => {
    db = await createTestDb({ allowedJobTypes: ["echo", "noop"] });
    app = await buildApp({ ledger: new Ledger(db.pool, db.schema, db.config), config: db.config });
  });
  after(async () => {
    await app.close();
    await db.drop();
  });
  const post = (url: string, body: unknown) =>
    app.inject({ method: "POST", url, headers: JSON_HEADERS, payload: JSON.stringify(body) });

  it("POST /jobs answers 422 naming `type` for a type off the list, and 201 for one on it", async () => {
    const refused = assertProblem(await post("/jobs", { type: "nonexistent_type" }), 422, ["type"]);
    assert.match(refused.errors?.[0]?.message ?? "", /not an allowed job type \(allowed: echo, noop\)/);
    assert.equal((await post("/jobs", { type: "echo" })).statusCode, 201);
  });

  it("POST /jobs/batch names each job off the list and writes nothing", async () => {
    assertProblem(
      await post("/jobs/batch", { jobs: [{ type: "noop" }, { type: "typo" }, { type: "other" }] }),
      422,
      ["jobs/1/type", "jobs/2/type"],
    );
    const [row] = await db.sql<{ n: number }>("SELECT count(*)::int AS n FROM jobs WHERE type = 'noop'");
    assert.equal(row?.n, 0);
  });

  it("the library's enqueue refuses the same way; without the option any type goes", async () => {
    const ledger = new Ledger(db.pool, db.schema, db.config);
    await assert.rejects(
      ledger.addJob({ type: "nonexistent_type" }),
      (error: unknown) => error instanceof JobValidationError && error.problems[0]?.field === "type",
    );
    await assert.rejects(ledger.addJobs([{ type: "echo" }, { type: "nope" }]), JobValidationError);
    assert.equal((await db.ledger.addJob({ type: "nonexistent_type" })).type, "nonexistent_type");
  });
});
