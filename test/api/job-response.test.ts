/**
 * The wire shape of a job (toJobResponse). It reuses the last timestamp conversion, and POST
 * /jobs/batch serializes its answer itself instead of through the response schema: neither may
 * change what a client reads.
 */
import assert from "node:assert/strict";
import { describe, it } from "node:test";
import fc from "fast-check";
import { type JobResponse, prefersMinimalReturn, toJobResponse } from "../../src/api/schemas.js";
import type { Job } from "../../src/queue/types.js";
import { useApi } from "./support.js";

const timestamp = fc.date({ min: new Date(0), max: new Date(4102444800000), noInvalidDate: true });
const maybeTimestamp = fc.option(timestamp, { nil: null });

/** Jobs with only their timestamps varied; consecutive jobs often share one. */
const jobs = fc.array(
  fc.record({
    runAt: fc.oneof(timestamp, fc.constant(new Date(1_800_000_000_000))),
    claimedAt: maybeTimestamp,
    startedAt: maybeTimestamp,
    heartbeatAt: maybeTimestamp,
    completedAt: maybeTimestamp,
    createdAt: fc.oneof(timestamp, fc.constant(new Date(1_800_000_000_000))),
  }),
  { maxLength: 20 },
);

const base: Omit<Job, "runAt" | "claimedAt" | "startedAt" | "heartbeatAt" | "completedAt" | "createdAt"> = {
  id: 1,
  type: "t",
  payload: {},
  status: "pending",
  priority: 5,
  attempt: 0,
  maxRetries: 3,
  result: null,
  error: null,
  errors: [],
  workerId: null,
  idempotencyKey: null,
  timeoutSeconds: null,
  progress: null,
};

const iso = (d: Date | null) => d?.toISOString() ?? null;

describe("a job's wire shape", () => {
  it("every timestamp is the job's own, in any sequence of jobs", () => {
    fc.assert(
      fc.property(jobs, (times) => {
        for (const t of times) {
          const r = toJobResponse({ ...base, ...t });
          assert.deepEqual(
            [r.run_at, r.claimed_at, r.started_at, r.heartbeat_at, r.completed_at, r.created_at],
            [t.runAt, t.claimedAt, t.startedAt, t.heartbeatAt, t.completedAt, t.createdAt].map(iso),
          );
        }
      }),
      { numRuns: 300 },
    );
  });

  const api = useApi();
  it("a POST /jobs/batch answer equals GET /jobs/:id of each job", async () => {
    const res = await api.app.inject({
      method: "POST",
      url: "/jobs/batch",
      payload: {
        jobs: [
          { type: "echo", payload: { text: 'quote " backslash \\ and \u2028' } },
          { type: "echo", priority: 9, max_retries: 0, run_at: "2031-05-06T07:08:09.123Z" },
          { type: "ünïcode ☃", payload: [1, 2.5, null, true, { nested: ["x"] }] },
        ],
      },
    });
    assert.equal(res.statusCode, 201, res.body);
    assert.match(String(res.headers["content-type"]), /^application\/json/);
    const answered = res.json<{ jobs: JobResponse[] }>().jobs;
    assert.equal(answered.length, 3);
    for (const job of answered) {
      const read = await api.app.inject({ method: "GET", url: `/jobs/${job.id}` });
      assert.deepEqual(job, read.json());
    }
  });

  it("with Prefer: return=minimal, a POST /jobs/batch answers with the new ids in the order given", async () => {
    const res = await api.app.inject({
      method: "POST",
      url: "/jobs/batch",
      headers: { prefer: "respond-async, return=minimal" },
      payload: {
        jobs: [
          { type: "echo", payload: { n: 1 } },
          { type: "echo", payload: { n: 2 } },
        ],
      },
    });
    assert.equal(res.statusCode, 201, res.body);
    assert.equal(res.headers["preference-applied"], "return=minimal");
    const { ids } = res.json<{ ids: number[] }>();
    assert.equal(ids.length, 2);
    const stored = await Promise.all(
      ids.map(async (id) =>
        (await api.app.inject({ method: "GET", url: `/jobs/${id}` })).json<JobResponse>(),
      ),
    );
    assert.deepEqual(
      stored.map((job) => job.payload),
      [{ n: 1 }, { n: 2 }],
    );
  });

  it("reads Prefer as RFC 7240 has it", () => {
    for (const prefer of [
      "return=minimal",
      "Return=minimal",
      'return="minimal"',
      "wait=5, return=minimal; x=y",
    ])
      assert.equal(prefersMinimalReturn(prefer), true, prefer);
    for (const prefer of [undefined, "", "return=representation", "return", "minimal", "return=minimalist"])
      assert.equal(prefersMinimalReturn(prefer), false, String(prefer));
  });
});
