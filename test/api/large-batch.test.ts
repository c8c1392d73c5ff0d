/**
 * Large POST /jobs/batch bodies, handled with fewer copies (docs/benchmarks.md, api-memory): the
 * answer written from the stored payload texts is byte for byte what the built jobs serialise to;
 * a batch with more than INSERT_STATEMENT_MAX_CHARS of payloads, inserted in slices, is stored
 * exactly as sent, in one transaction, and a failure in a later slice writes nothing; the
 * in-flight body budget charges a large body its handling cost and admits it when it is alone.
 */
import assert from "node:assert/strict";
import { connect } from "node:net";
import { after, before, describe, it } from "node:test";
import { buildApp } from "../../src/api/app.js";
import { chargedBytes, FACE_VALUE_BYTES, HANDLING_COST_FACTOR } from "../../src/api/body-admission.js";
import { newJobsAnswer, newJobsAnswerStream, toJobResponse } from "../../src/api/job-response.js";
import { INSERT_STATEMENT_MAX_CHARS, insertedJob } from "../../src/queue/insert.js";
import type { JobSpec, JsonValue } from "../../src/queue/types.js";
import { createTestDb, type TestDb } from "../helpers/db.js";
import { waitForEvent } from "../helpers/events.js";
import { JSON_HEADERS, useApi } from "./support.js";

const BOUND_MS = 15_000;

/** Payloads that stress the answer's splicing and the stored text: escapes, non-ASCII, numbers. */
function trickyPayload(i: number, filler: string): JsonValue {
  return {
    i,
    s: `${filler}é😀\u2028"\\\n,"payload":null,`,
    n: [0.1, 0, 1e21, 5e-324, 12345678901234],
    nested: { a: [null, true, { "": "x" }], 10: "ten", b: i % 3 === 0 ? null : "b" },
  };
}

describe("large POST /jobs/batch", () => {
  const api = useApi();

  it("answers with exactly the bytes of the built jobs, tricky types and payloads included", async () => {
    const specs: JobSpec[] = [
      { type: 'a"b,"payload":null,', payload: trickyPayload(0, "") },
      { type: "é", payload: null },
      { type: "t", payload: "just a string" },
      { type: "t", payload: [1, 2, 3], priority: 9, maxRetries: 0, runAt: "2031-02-03T04:05:06.789Z" },
      { type: "t" },
    ];
    const inserted = await api.db.ledger.addInsertedJobs(specs);
    const expected = JSON.stringify({ jobs: inserted.map((j) => toJobResponse(insertedJob(j.spec, j.row))) });
    assert.equal(newJobsAnswer(inserted).toString("utf8"), expected);
    assert.equal(newJobsAnswer([]).toString("utf8"), JSON.stringify({ jobs: [] }));
    const streamed = newJobsAnswerStream(inserted);
    const chunks: Buffer[] = [];
    for await (const chunk of streamed.stream) chunks.push(chunk as Buffer);
    assert.equal(Buffer.concat(chunks).toString("utf8"), expected);
    assert.equal(streamed.bytes, Buffer.byteLength(expected));
    // Through the route: the same shape, the payloads as sent.
    const wire = specs.map(({ maxRetries, runAt, ...rest }) =>
      maxRetries === undefined ? rest : { ...rest, max_retries: maxRetries, run_at: runAt },
    );
    const res = await api.app.inject({ method: "POST", url: "/jobs/batch", payload: { jobs: wire } });
    assert.equal(res.statusCode, 201, res.body.slice(0, 300));
    assert.equal(res.headers["content-type"], "application/json; charset=utf-8");
    assert.equal(Number(res.headers["content-length"]), Buffer.byteLength(res.body));
    const jobs = res.json<{ jobs: { type: string; payload: unknown }[] }>().jobs;
    assert.deepEqual(
      jobs.map((j) => [j.type, j.payload]),
      specs.map((s) => [s.type, s.payload === undefined ? {} : s.payload]),
    );
  });

  it("stores a batch over the statement size exactly as sent, in one transaction", async () => {
    const filler = "x".repeat(2000);
    const specs = Array.from({ length: 3000 }, (_, i) => ({
      type: `t${i % 7}`,
      payload: trickyPayload(i, filler),
    }));
    const chars = specs.reduce((n, s) => n + JSON.stringify(s.payload).length, 0);
    assert.ok(chars > 1.5 * INSERT_STATEMENT_MAX_CHARS, "the batch takes several statements");
    const res = await api.app.inject({ method: "POST", url: "/jobs/batch", payload: { jobs: specs } });
    assert.equal(res.statusCode, 201, res.body.slice(0, 300));
    const answered = res.json<{ jobs: { id: number; type: string; payload: unknown }[] }>().jobs;
    assert.equal(answered.length, specs.length);
    const ids = answered.map((j) => j.id);
    assert.deepEqual(
      ids,
      [...ids].sort((a, b) => a - b),
      "ids in the order given",
    );
    const rows = await api.db.sql<{ id: number; type: string; payload: string; tx: string }>(
      "SELECT id::int AS id, type, payload::text AS payload, xmin::text AS tx FROM jobs WHERE id = ANY($1::bigint[]) ORDER BY id",
      [ids],
    );
    assert.equal(rows.length, specs.length);
    assert.equal(new Set(rows.map((r) => r.tx)).size, 1, "one transaction");
    rows.forEach((row, i) => {
      assert.equal(row.type, specs[i]?.type);
      assert.deepEqual(JSON.parse(row.payload), specs[i]?.payload, `job ${i} stored as sent`);
      assert.deepEqual(answered[i]?.payload, specs[i]?.payload, `job ${i} answered as sent`);
    });
    // return=minimal takes the same path.
    const minimal = await api.app.inject({
      method: "POST",
      url: "/jobs/batch",
      headers: { prefer: "return=minimal" },
      payload: { jobs: specs },
    });
    assert.equal(minimal.statusCode, 201);
    assert.equal(minimal.json<{ ids: number[] }>().ids.length, specs.length);
  });

  it("writes nothing when a later slice fails", async () => {
    await api.db.sql("TRUNCATE jobs");
    await api.db.sql(`CREATE FUNCTION refuse_boom() RETURNS trigger LANGUAGE plpgsql AS $$
      BEGIN IF NEW.type = 'boom' THEN RAISE EXCEPTION 'boom refused'; END IF; RETURN NEW; END $$`);
    await api.db.sql(
      "CREATE TRIGGER refuse_boom BEFORE INSERT ON jobs FOR EACH ROW EXECUTE FUNCTION refuse_boom()",
    );
    try {
      const filler = "y".repeat(4000);
      const specs = Array.from({ length: 2000 }, (_, i) => ({
        type: i === 1999 ? "boom" : "ok",
        payload: { filler },
      }));
      await assert.rejects(api.db.ledger.addJobIds(specs), /boom refused/);
      await assert.rejects(api.db.ledger.addJobs(specs), /boom refused/);
      const [count] = await api.db.sql<{ n: number }>("SELECT count(*)::int AS n FROM jobs");
      assert.equal(count?.n, 0, "no slice of the failed batch stays");
      // The pool is fine afterwards.
      assert.equal((await api.db.ledger.addJobIds([{ type: "ok" }])).length, 1);
    } finally {
      await api.db.sql("DROP TRIGGER refuse_boom ON jobs");
    }
  });
});

describe("the in-flight body budget's handling charge", () => {
  const BUDGET = 8 * 1024 * 1024;
  let db: TestDb;
  let app: Awaited<ReturnType<typeof buildApp>>;
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
  const held = async (bytes: number) => {
    if (budget().heldBytes === bytes) return;
    await waitForEvent(budget(), "change", (now: number) => now === bytes, BOUND_MS);
  };
  /** Sends the head of a POST /jobs/batch with this length and a few bytes; resolves to the status, if answered. */
  const start = (length: number) => {
    const socket = connect(port, "127.0.0.1");
    socket.setTimeout(BOUND_MS, () => socket.destroy());
    const status = new Promise<number>((resolve) => {
      let text = "";
      socket.on("data", (chunk: Buffer) => {
        text += chunk.toString("latin1");
        const match = /^HTTP\/1\.1 (\d+)/.exec(text);
        if (match) resolve(Number(match[1]));
      });
      socket.on("error", () => resolve(0));
      socket.on("close", () => resolve(0));
    });
    socket.write(
      `POST /jobs/batch HTTP/1.1\r\nHost: localhost\r\nContent-Type: application/json\r\nContent-Length: ${length}\r\n\r\n{"jobs":[`,
    );
    return { socket, status };
  };

  it("charges a body its size up to a MiB and the factor past it", () => {
    assert.equal(chargedBytes(1000), 1000);
    assert.equal(chargedBytes(FACE_VALUE_BYTES), FACE_VALUE_BYTES);
    assert.equal(chargedBytes(FACE_VALUE_BYTES + 10), FACE_VALUE_BYTES + 10 * HANDLING_COST_FACTOR);
  });

  it("refuses a second large body while one is held, takes small ones, and takes a large one alone", async () => {
    const twoMiB = 2 * 1024 * 1024;
    const first = start(twoMiB);
    await held(chargedBytes(twoMiB));
    assert.ok(chargedBytes(twoMiB) * 2 > BUDGET, "two would not fit");
    const second = start(twoMiB);
    assert.equal(await second.status, 503);
    second.socket.destroy();
    const small = await app.inject({
      method: "POST",
      url: "/jobs/batch",
      headers: JSON_HEADERS,
      payload: JSON.stringify({ jobs: [{ type: "t", payload: { s: "z".repeat(100_000) } }] }),
    });
    assert.equal(small.statusCode, 201, "a small body fits next to it");
    first.socket.destroy();
    await held(0);
    // Charged more than the whole budget, but within the body limit: taken when nothing is held.
    const large = 6 * 1024 * 1024;
    assert.ok(chargedBytes(large) > BUDGET);
    const alone = start(large);
    await held(chargedBytes(large));
    alone.socket.destroy();
    await held(0);
  });
});
