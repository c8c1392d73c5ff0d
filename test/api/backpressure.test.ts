/**
 * Backpressure. The in-flight body budget (src/api/body-admission.ts), on a listening server over
 * raw sockets: a body that does not fit is answered 503 before it is read (the answer arrives
 * although the client sent only a few bytes of it), a chunked body is cut off when it goes past,
 * and the bytes come back however a request ends. The pending-jobs caps (src/queue/capacity.ts):
 * the typed error from the library, per type and in all, a batch refused whole, 429 with
 * Retry-After from the API.
 */
import assert from "node:assert/strict";
import { connect, type Socket } from "node:net";
import { after, before, describe, it } from "node:test";
import type { FastifyInstance } from "fastify";
import { buildApp } from "../../src/api/app.js";
import { configFromEnv } from "../../src/config.js";
import { QueueFullError, TaskQueue } from "../../src/index.js";
import { Ledger } from "../../src/queue/ledger.js";
import { createTestDb, type TestDb } from "../helpers/db.js";
import { waitForEvent } from "../helpers/events.js";
import { assertProblem, JSON_HEADERS } from "./support.js";

/** An answer read off a raw socket. */
interface RawAnswer {
  status: number;
  headers: Record<string, string>;
  body: string;
}

/** A request written by hand: its socket, its answer, and whether the server closed the connection. */
interface RawRequest {
  socket: Socket;
  answer: Promise<RawAnswer>;
  closed: Promise<void>;
}

const BOUND_MS = 15_000;

/** Sends `head` (request line and headers, without the blank line) and then `body`, as written. */
function rawRequest(port: number, head: string, body: string): RawRequest {
  const socket = connect(port, "127.0.0.1");
  socket.setTimeout(BOUND_MS, () => socket.destroy(new Error("raw request timed out")));
  let received = "";
  const closed = new Promise<void>((resolve) => socket.once("close", () => resolve()));
  const answer = new Promise<RawAnswer>((resolve, reject) => {
    socket.on("error", reject);
    socket.on("data", (chunk: Buffer) => {
      received += chunk.toString("utf8");
      const end = received.indexOf("\r\n\r\n");
      if (end === -1) return;
      const [statusLine = "", ...lines] = received.slice(0, end).split("\r\n");
      const headers = Object.fromEntries(
        lines.map((line) => [
          line.slice(0, line.indexOf(":")).toLowerCase(),
          line.slice(line.indexOf(":") + 1).trim(),
        ]),
      );
      const text = received.slice(end + 4);
      if (Buffer.byteLength(text) < Number(headers["content-length"] ?? 0)) return;
      resolve({ status: Number(statusLine.split(" ")[1]), headers, body: text });
    });
  });
  answer.catch(() => undefined);
  socket.write(`${head}\r\n\r\n${body}`);
  return { socket, answer, closed };
}

const head = (url: string, length: number | "chunked", extra = "") =>
  `POST ${url} HTTP/1.1\r\nHost: localhost\r\nContent-Type: application/json\r\n` +
  (length === "chunked" ? "Transfer-Encoding: chunked" : `Content-Length: ${length}`) +
  extra;

/** A valid batch body of about `bytes` bytes. */
function batchOf(bytes: number): string {
  const filler = "x".repeat(1000);
  const jobs = Array.from({ length: Math.max(1, Math.floor(bytes / 1040)) }, () => ({
    type: "t",
    payload: { filler },
  }));
  return JSON.stringify({ jobs });
}

describe("the in-flight body budget", () => {
  const BUDGET = 1_000_000;
  let db: TestDb;
  let app: FastifyInstance;
  let port: number;

  before(async () => {
    db = await createTestDb({ apiMaxInflightBodyBytes: BUDGET });
    app = await buildApp({ ledger: db.ledger, config: db.config });
    await app.listen({ host: "127.0.0.1", port: 0 });
    port = (app.server.address() as { port: number }).port;
  });
  after(async () => {
    await app.close();
    await db.drop();
  });

  const budget = () => {
    assert.ok(app.bodyBudget);
    return app.bodyBudget;
  };
  /** Resolves once the budget holds `bytes` (now, or at a later take or give). */
  const held = async (bytes: number) => {
    if (budget().heldBytes === bytes) return;
    await waitForEvent(budget(), "change", (now: number) => now === bytes, BOUND_MS);
  };

  it("answers 503 with Retry-After before reading a body that does not fit, and closes the connection", async () => {
    const holder = rawRequest(port, head("/jobs/batch", 700_000), '{"jobs":[');
    await held(700_000);
    const refused = rawRequest(port, head("/jobs/batch", 400_000), '{"jobs":[{"type"');
    const answer = await refused.answer;
    assert.equal(answer.status, 503, answer.body);
    assert.match(answer.headers["content-type"] ?? "", /^application\/problem\+json/);
    assert.match(answer.headers["retry-after"] ?? "", /^\d+$/);
    assert.equal(answer.headers.connection, "close");
    const problem = JSON.parse(answer.body) as { detail: string; status: number };
    assert.equal(problem.status, 503);
    assert.match(problem.detail, /API_MAX_INFLIGHT_BODY_BYTES/);
    await refused.closed;
    assert.equal(budget().heldBytes, 700_000, "the refused request held nothing");
    // The holder's connection is lost mid-body: its bytes come back.
    holder.socket.destroy();
    await held(0);
  });

  it("takes a body that fits once the budget is back, and gives every byte back after success and errors", async () => {
    const body = batchOf(600_000);
    for (let i = 0; i < 3; i++) {
      const ok = await app.inject({
        method: "POST",
        url: "/jobs/batch",
        payload: body,
        headers: JSON_HEADERS,
      });
      assert.equal(ok.statusCode, 201, ok.body.slice(0, 300));
      assert.equal(budget().heldBytes, 0);
    }
    for (const [payload, status] of [
      ['{"jobs":[', 400],
      ['{"jobs":[{"type":""}]}', 422],
      ['{"jobs":[{"type":"t","payload":{"n":1e400}}]}', 422],
    ] as const) {
      const res = await app.inject({ method: "POST", url: "/jobs/batch", payload, headers: JSON_HEADERS });
      assertProblem(res, status);
      assert.equal(budget().heldBytes, 0);
    }
    // Over the budget alone: it could never fit, so 413 (the body limit is the budget), not 503.
    const tooLarge = rawRequest(port, head("/jobs/batch", BUDGET + 1), "{");
    assert.equal((await tooLarge.answer).status, 413);
    tooLarge.socket.destroy();
    assert.equal(budget().heldBytes, 0);
  });

  it("counts a chunked body as it arrives and cuts it off with 503 when it goes past", async () => {
    const holder = rawRequest(port, head("/jobs/batch", 700_000), '{"jobs":[');
    await held(700_000);
    const chunk = "x".repeat(200_000);
    const chunked = rawRequest(port, head("/jobs/batch", "chunked"), "");
    const chunkBytes = (text: string) => `${Buffer.byteLength(text).toString(16)}\r\n${text}\r\n`;
    const first = `{"jobs":[{"type":"t","payload":{"s":"${chunk}`;
    chunked.socket.write(chunkBytes(first));
    await held(700_000 + first.length);
    chunked.socket.write(chunkBytes(chunk));
    const answer = await chunked.answer;
    assert.equal(answer.status, 503, answer.body);
    assert.equal(answer.headers.connection, "close");
    await chunked.closed;
    await held(700_000);
    holder.socket.destroy();
    await held(0);
    // A chunked body within the budget is taken.
    const small = rawRequest(port, head("/jobs", "chunked"), `${chunkBytes('{"type":"t"}')}0\r\n\r\n`);
    assert.equal((await small.answer).status, 201);
    small.socket.destroy();
    await held(0);
  });

  it("answers 415 to a Content-Encoding before reading the body", async () => {
    const holder = rawRequest(port, head("/jobs/batch", 700_000), '{"jobs":[');
    await held(700_000);
    const gzipped = rawRequest(port, head("/jobs", 500_000, "\r\nContent-Encoding: gzip"), "\x1f\x8b\x08");
    const answer = await gzipped.answer;
    assert.equal(answer.status, 415, answer.body);
    assert.match(answer.body, /content-encoding/);
    await gzipped.closed;
    holder.socket.destroy();
    await held(0);
  });
});

describe("the pending-jobs caps", () => {
  let db: TestDb;
  before(async () => {
    db = await createTestDb();
  });
  after(() => db.drop());

  const pending = async () =>
    Number((await db.sql<{ n: string }>("SELECT count(*) AS n FROM jobs WHERE status = 'pending'"))[0]?.n);
  const refusal = async (promise: Promise<unknown>): Promise<QueueFullError> => {
    const error = await promise.then(
      () => assert.fail("expected QueueFullError"),
      (e: unknown) => e,
    );
    assert.ok(error instanceof QueueFullError, String(error));
    assert.equal(error.code, "queue_full");
    assert.ok(error.retryAfterSeconds >= 1);
    return error;
  };

  it("the total cap: the library throws QueueFullError, a batch is refused whole", async () => {
    await db.sql("TRUNCATE jobs");
    const ledger = new Ledger(db.pool, db.schema, { maxPendingJobs: 5, maxPendingJobsPerType: 0 });
    await ledger.addJobs([{ type: "a" }, { type: "b" }, { type: "c" }]);
    const whole = await refusal(ledger.addJobs([{ type: "a" }, { type: "a" }, { type: "a" }]));
    assert.deepEqual(
      {
        cap: whole.cap,
        limit: whole.limit,
        type: whole.type,
        pending: whole.pending,
        requested: whole.requested,
      },
      { cap: "maxPendingJobs", limit: 5, type: null, pending: 3, requested: 3 },
    );
    assert.match(whole.message, /maxPendingJobs = 5/);
    await refusal(ledger.addJobIds([{ type: "a" }, { type: "a" }, { type: "a" }]));
    assert.equal(await pending(), 3, "nothing of the refused batches was written");
    await Promise.all([ledger.addJob({ type: "a" }), ledger.addJob({ type: "b" })]);
    await refusal(ledger.addJob({ type: "a" }));
    // Inside the caller's transaction too.
    const client = await db.pool.connect();
    try {
      await refusal(ledger.addJob({ type: "a" }, { client }));
    } finally {
      client.release();
    }
    assert.equal(await pending(), 5);
  });

  it("the per-type cap names the type; other types go on", async () => {
    await db.sql("TRUNCATE jobs");
    const ledger = new Ledger(db.pool, db.schema, { maxPendingJobs: 0, maxPendingJobsPerType: 2 });
    await ledger.addJobs([{ type: "a" }, { type: "a" }, { type: "b" }]);
    const error = await refusal(ledger.addJob({ type: "a" }));
    assert.deepEqual(
      { cap: error.cap, limit: error.limit, type: error.type, pending: error.pending },
      { cap: "maxPendingJobsPerType", limit: 2, type: "a", pending: 2 },
    );
    assert.match(error.message, /type "a"/);
    // b has room for one more, but the batch also holds an a: refused whole.
    await refusal(ledger.addJobs([{ type: "b" }, { type: "a" }]));
    await ledger.addJobs([{ type: "b" }, { type: "c" }, { type: "c" }]);
    assert.equal(await pending(), 6);
  });

  it("counts what other processes enqueued and frees room as jobs leave pending", async () => {
    await db.sql("TRUNCATE jobs");
    const caps = { maxPendingJobs: 0, maxPendingJobsPerType: 3, refreshMs: 0 };
    const first = new Ledger(db.pool, db.schema, caps);
    const other = new Ledger(db.pool, db.schema, caps);
    const jobs = await first.addJobs([{ type: "a" }, { type: "a" }, { type: "a" }]);
    await refusal(other.addJob({ type: "a" }));
    await first.cancelJob(jobs[0]?.id ?? 0);
    await other.addJob({ type: "a" });
    await refusal(first.addJob({ type: "a" }));
  });

  it("the API answers 429 with Retry-After, naming the cap and the type", async () => {
    await db.sql("TRUNCATE jobs");
    const ledger = new Ledger(db.pool, db.schema, { maxPendingJobs: 4, maxPendingJobsPerType: 2 });
    const app = await buildApp({ ledger, config: db.config });
    try {
      const post = (url: string, body: unknown) =>
        app.inject({ method: "POST", url, payload: JSON.stringify(body), headers: JSON_HEADERS });
      assert.equal((await post("/jobs", { type: "a" })).statusCode, 201);
      assert.equal((await post("/jobs/batch", { jobs: [{ type: "a" }, { type: "b" }] })).statusCode, 201);
      const perType = await post("/jobs", { type: "a" });
      const problem = assertProblem(perType, 429);
      assert.match(String(perType.headers["retry-after"]), /^[1-9]\d*$/);
      assert.match(problem.detail ?? "", /maxPendingJobsPerType = 2/);
      assert.match(problem.detail ?? "", /type "a"/);
      const total = await app.inject({
        method: "POST",
        url: "/jobs/batch",
        payload: JSON.stringify({ jobs: [{ type: "b" }, { type: "c" }] }),
        headers: { ...JSON_HEADERS, prefer: "return=minimal" },
      });
      assert.match(assertProblem(total, 429).detail ?? "", /maxPendingJobs = 4/);
      assert.ok(total.headers["retry-after"]);
      assert.equal(await pending(), 3, "the refused batch wrote nothing");
    } finally {
      await app.close();
    }
  });

  it("is configured by MAX_PENDING_JOBS / MAX_PENDING_JOBS_PER_TYPE and reaches TaskQueue's ledger", async () => {
    await db.sql("TRUNCATE jobs");
    const config = configFromEnv({ MAX_PENDING_JOBS: "2", MAX_PENDING_JOBS_PER_TYPE: "1" });
    assert.deepEqual([config.maxPendingJobs, config.maxPendingJobsPerType], [2, 1]);
    assert.equal(configFromEnv({}).maxPendingJobs, 0, "off by default");
    const queue = new TaskQueue({ ...db.config, pool: db.pool, maxPendingJobsPerType: 1 });
    await queue.addJob({ type: "a" });
    assert.equal((await refusal(queue.addJob({ type: "a" }))).type, "a");
    await queue.close();
  });
});
