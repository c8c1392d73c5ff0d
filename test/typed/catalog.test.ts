/**
 * Job catalogs at run time (issue 13 item 1): a queue made with `defineJobs` checks payloads at
 * enqueue, in the library (JobValidationError naming the field, nothing written) and through the
 * HTTP API built on its ledger (422 problem+json naming the field); a typed handler runs.
 */
import assert from "node:assert/strict";
import { after, before, describe, it } from "node:test";
import { Type } from "@sinclair/typebox";
import type { FastifyInstance } from "fastify";
import { buildApp, defineJob, defineJobs, JobValidationError, TaskQueue } from "../../src/index.js";
import { assertProblem, JSON_HEADERS } from "../api/support.js";
import { createTestDb, type TestDb, testOptions } from "../helpers/db.js";
import { waitForEvent } from "../helpers/events.js";

const jobs = defineJobs({
  send_email: defineJob(
    Type.Object({ to: Type.String({ minLength: 3 }), cc: Type.Optional(Type.Array(Type.String())) }),
  ),
  resize: defineJob(
    Type.Object({ url: Type.String(), width: Type.Integer({ minimum: 1 }) }),
    Type.Object({ bytes: Type.Integer() }),
  ),
});

let db: TestDb;
let queue: TaskQueue<typeof jobs.jobs>;
let app: FastifyInstance;

before(async () => {
  db = await createTestDb();
  queue = new TaskQueue({ ...testOptions(db.schema), pool: db.pool, jobs });
  app = await buildApp({ ledger: queue.ledger, config: queue.config });
});
after(async () => {
  await app.close();
  await queue.close();
  await db.drop();
});

/** Jobs of this schema. */
async function jobCount(): Promise<number> {
  const [row] = await db.sql<{ n: number }>("SELECT count(*)::int AS n FROM jobs");
  return row?.n ?? -1;
}

/** The problems of a JobValidationError thrown by `promise`, as `field` names. */
async function refusedFields(promise: Promise<unknown>): Promise<string[]> {
  const error = await promise.then(
    () => assert.fail("expected a JobValidationError"),
    (e: unknown) => e,
  );
  assert.ok(error instanceof JobValidationError, String(error));
  return error.problems.map((p) => p.field).sort();
}

describe("job catalog: payloads checked at enqueue", () => {
  it("a valid payload is enqueued as given", async () => {
    const job = await queue.addJob({ type: "send_email", payload: { to: "a@example.com", cc: ["b@x.y"] } });
    assert.deepEqual(job.payload, { to: "a@example.com", cc: ["b@x.y"] });
    assert.deepEqual(await queue.getJob(job.id), job);
  });

  it("the library refuses a bad payload naming each field, and writes nothing", async () => {
    const before = await jobCount();
    // A cast stands for an untyped caller (JavaScript, or JSON from elsewhere): the compiler
    // would refuse these (test/typed/compile.test.ts).
    const untyped = queue as unknown as TaskQueue;
    assert.deepEqual(await refusedFields(untyped.addJob({ type: "send_email", payload: { to: 42 } })), [
      "payload/to",
    ]);
    assert.deepEqual(await refusedFields(untyped.addJob({ type: "send_email" })), ["payload/to"]);
    assert.deepEqual(
      await refusedFields(untyped.addJob({ type: "resize", payload: { url: "u", width: 0, extra: 1 } })),
      ["payload/width"],
    );
    assert.deepEqual(
      await refusedFields(
        untyped.addJobs([
          { type: "send_email", payload: { to: "a@example.com" } },
          { type: "resize", payload: { url: 7, width: 1.5 } },
        ]),
      ),
      ["jobs/1/payload/url", "jobs/1/payload/width"],
    );
    await assert.rejects(
      untyped.addJobIds([{ type: "send_email", payload: { to: "x" } }]),
      JobValidationError,
    );
    await assert.rejects(untyped.addJobReporting({ type: "send_email", payload: {} }), JobValidationError);
    assert.equal(await jobCount(), before);
  });

  it("a type the catalog does not define is not checked", async () => {
    const untyped = queue as unknown as TaskQueue;
    const job = await untyped.addJob({ type: "other", payload: { anything: [1, 2] } });
    assert.equal(job.type, "other");
  });

  it("the HTTP API built on its ledger answers 422 problem+json naming the field", async () => {
    const before = await jobCount();
    const post = (url: string, body: unknown) =>
      app.inject({ method: "POST", url, headers: JSON_HEADERS, payload: JSON.stringify(body) });
    const single = assertProblem(await post("/jobs", { type: "send_email", payload: { to: 42 } }), 422, [
      "payload/to",
    ]);
    assert.match(single.errors?.[0]?.message ?? "", /string/);
    assertProblem(
      await post("/jobs/batch", {
        jobs: [
          { type: "resize", payload: { url: "u", width: 3 } },
          { type: "resize", payload: { width: 3 } },
        ],
      }),
      422,
      ["jobs/1/payload/url"],
    );
    assert.equal(await jobCount(), before);
    const created = await post("/jobs", { type: "resize", payload: { url: "u", width: 3 } });
    assert.equal(created.statusCode, 201, created.body);
  });

  it("a worker hands the typed handler its payload and stores its result", async () => {
    const seen: { url: string; width: number }[] = [];
    queue.register("resize", (job) => {
      seen.push(job.payload);
      return { bytes: job.payload.width * 10 };
    });
    const job = await queue.addJob({ type: "resize", payload: { url: "https://x/y.png", width: 7 } });
    const worker = await queue.startWorker({ types: ["resize"], workerCount: 1 });
    try {
      await waitForEvent<[{ id: number }]>(worker, "job:completed", (event) => event.id === job.id, 15_000);
    } finally {
      await worker.stop();
    }
    assert.ok(seen.some((payload) => payload.url === "https://x/y.png" && payload.width === 7));
    const stored = await queue.getJob(job.id);
    assert.equal(stored?.status, "done");
    assert.deepEqual(stored?.result, { bytes: 70 });
  });
});
