/**
 * The dashboard's routes (issue 12): GET /stats/types, GET /stats/throughput and GET /workers
 * answer what the ledger holds, and read only bounded data: with 100,000 finished jobs in the
 * table, their statements scan no table sequentially and reach jobs only through the live jobs'
 * partial indexes. GET /ui serves the built page and its files.
 */
import assert from "node:assert/strict";
import { after, before, it } from "node:test";
import type { FastifyInstance } from "fastify";
import { buildApp } from "../../src/api/app.js";
import { throughputPerMinute, typeDepths } from "../../src/queue/sql/overview.js";
import { createTestDb, type TestDb } from "../helpers/db.js";

interface PlanNode {
  "Node Type": string;
  "Relation Name"?: string;
  "Index Name"?: string;
  Plans?: PlanNode[];
}
const nodes = (plan: PlanNode): PlanNode[] => [plan, ...(plan.Plans ?? []).flatMap(nodes)];

let db: TestDb;
let app: FastifyInstance;
before(async () => {
  db = await createTestDb();
  app = await buildApp({ ledger: db.ledger, config: db.config });
  await db.sql(
    "INSERT INTO jobs (type, status, started_at, completed_at, result) SELECT 'a', 'done', now(), now(), 'null' FROM generate_series(1, 100000)",
  );
  await db.sql(
    `INSERT INTO workers (id, host, pid, types, concurrency) VALUES ('w1', 'host-1', 4242, '{a,b}', 4)`,
  );
  await db.sql(`INSERT INTO jobs (type, run_at) VALUES ('a', now() - interval '30 seconds'), ('a', now() + interval '1 hour'),
                  ('orphan', now() - interval '5 seconds')`);
  await db.sql(`INSERT INTO jobs (type, status, worker_id, heartbeat_at, claimed_at, started_at)
                VALUES ('a', 'running', 'w1', now(), now(), now())`);
  await db.sql(`INSERT INTO job_stats (bucket, slot, done, failed, exec_seconds) VALUES
                  (date_trunc('second', now()), 0, 7, 2, 1.5), (date_trunc('second', now()) - interval '3 minutes', 0, 4, 0, 1),
                  (date_trunc('second', now()) - interval '2 hours', 0, 1000, 0, 1)`);
  await db.sql("ANALYZE jobs");
});
after(async () => {
  await app.close();
  await db.drop();
});

it("GET /stats/types: live jobs per type, oldest due age and the live workers of each type", async () => {
  const res = await app.inject({ method: "GET", url: "/stats/types" });
  assert.equal(res.statusCode, 200, res.body);
  const { types } = res.json<{ types: Record<string, unknown>[] }>();
  const a = types.find((t) => t.type === "a");
  const orphan = types.find((t) => t.type === "orphan");
  assert.ok(a && orphan, res.body);
  assert.deepEqual(
    { pending: a.pending, due: a.due, claimed: a.claimed, running: a.running, live_workers: a.live_workers },
    { pending: 2, due: 1, claimed: 0, running: 1, live_workers: 1 },
  );
  assert.ok((a.oldest_due_seconds as number) >= 29 && (a.oldest_due_seconds as number) < 120, res.body);
  assert.equal(typeof a.next_run_at, "string");
  assert.equal(orphan.live_workers, 0, "pending jobs that no live worker claims are said so");
  assert.equal(types.length, 2, "the done history is not listed");
});

it("GET /stats/throughput: one entry per minute, oldest first, zeros where nothing finished", async () => {
  const res = await app.inject({ method: "GET", url: "/stats/throughput?minutes=5" });
  assert.equal(res.statusCode, 200, res.body);
  const { minutes } = res.json<{ minutes: { minute: string; done: number; failed: number }[] }>();
  assert.equal(minutes.length, 5);
  const times = minutes.map((m) => Date.parse(m.minute));
  for (let i = 1; i < times.length; i++) assert.equal((times[i] ?? 0) - (times[i - 1] ?? 0), 60_000);
  assert.deepEqual(
    { done: minutes[4]?.done, failed: minutes[4]?.failed },
    { done: 7, failed: 2 },
    "the current minute is last",
  );
  assert.equal(minutes[1]?.done, 4, "three minutes ago");
  assert.equal(
    minutes.reduce((s, m) => s + m.done, 0),
    11,
    "buckets older than the window are left out",
  );
  for (const bad of ["0", "61", "x"]) {
    const refused = await app.inject({ method: "GET", url: `/stats/throughput?minutes=${bad}` });
    assert.equal(refused.statusCode, 422, `minutes=${bad}`);
  }
});

it("GET /workers: host, pid, types, in-flight jobs and last heartbeat of each live worker", async () => {
  const res = await app.inject({ method: "GET", url: "/workers" });
  assert.equal(res.statusCode, 200, res.body);
  const { workers } = res.json<{ workers: Record<string, unknown>[] }>();
  assert.equal(workers.length, 1);
  assert.deepEqual(
    {
      host: workers[0]?.host,
      pid: workers[0]?.pid,
      types: workers[0]?.types,
      in_flight: workers[0]?.in_flight,
    },
    { host: "host-1", pid: 4242, types: ["a", "b"], in_flight: 1 },
  );
  assert.equal(typeof workers[0]?.heartbeat_at, "string");
});

it("the overview statements read jobs only through the live jobs' partial indexes", async () => {
  const explain = async (text: string, values: unknown[]) => {
    const [row] = await db.sql(`EXPLAIN (ANALYZE, FORMAT JSON) ${text}`, values);
    const [explained] = (row?.["QUERY PLAN"] ?? []) as { Plan: PlanNode }[];
    assert.ok(explained);
    return nodes(explained.Plan);
  };
  const depth = await explain(typeDepths(db.schema).text, [5, 500]);
  const jobsReads = depth.filter((n) => n["Relation Name"] === "jobs");
  assert.ok(jobsReads.length > 0);
  assert.deepEqual(
    jobsReads.filter((n) => !["Index Scan", "Index Only Scan", "Bitmap Heap Scan"].includes(n["Node Type"])),
    [],
    "jobs is read through indexes only",
  );
  const indexes = depth.map((n) => n["Index Name"]).filter((name) => name?.startsWith("jobs"));
  assert.ok(indexes.length > 0);
  for (const index of indexes)
    assert.ok(
      ["jobs_claim_idx", "jobs_alone_idx", "jobs_stale_idx"].includes(String(index)),
      `jobs read through ${String(index)}`,
    );
  const throughput = await explain(throughputPerMinute(db.schema).text, [60]);
  assert.ok(
    throughput.some((n) => n["Index Name"] === "job_stats_pkey" || n["Relation Name"] === "job_stats"),
    "throughput reads job_stats (kept an hour), not jobs",
  );
  assert.ok(!throughput.some((n) => n["Relation Name"] === "jobs"));
});

it("GET /ui serves the page and its files from the package, with a strict content policy", async () => {
  const page = await app.inject({ method: "GET", url: "/ui" });
  assert.equal(page.statusCode, 200);
  assert.match(String(page.headers["content-type"]), /^text\/html/);
  assert.match(page.body, /<script type="module" src="ui\/app\.js"><\/script>/);
  assert.match(String(page.headers["content-security-policy"]), /script-src 'self'/);
  const script = await app.inject({ method: "GET", url: "/ui/app.js" });
  assert.equal(script.statusCode, 200);
  assert.match(String(script.headers["content-type"]), /^text\/javascript/);
  assert.ok(script.body.length > 1000);
  const style = await app.inject({ method: "GET", url: "/ui/app.css" });
  assert.equal(style.statusCode, 200);
  assert.match(String(style.headers["content-type"]), /^text\/css/);
  const slash = await app.inject({ method: "GET", url: "/ui/" });
  assert.equal(slash.statusCode, 308);
  assert.equal(slash.headers.location, "/ui");
  assert.equal((await app.inject({ method: "GET", url: "/ui/other.js" })).statusCode, 404);
  const docs = await app.inject({ method: "GET", url: "/docs/json" });
  const paths = Object.keys(docs.json<{ paths: Record<string, unknown> }>().paths);
  assert.ok(paths.includes("/stats/types") && paths.includes("/workers"), "the reads are documented");
  assert.ok(!paths.some((p) => p.startsWith("/ui")), "the page's files are not API routes");
});
