/**
 * Chaos: 50,000 jobs enqueued as fast as 16 concurrent clients can send them (48,000 in batches of
 * 50 through POST /jobs/batch, 2,000 one by one through POST /jobs), against an API with
 * MAX_PENDING_JOBS=2000 (backpressure): past the cap the API answers 429 with Retry-After instead
 * of accepting without limit, pending jobs stay near the cap, nothing it acknowledged is lost, and
 * every acknowledged job ends done.
 */
import assert from "node:assert/strict";
import { after, before, it } from "node:test";
import { auditLedger } from "./helpers/audit.js";
import { type ChaosCluster, startChaosCluster } from "./helpers/cluster.js";
import { type ChaosSystem, SCHEMA, startSystem } from "./helpers/system.js";

const JOBS = 50_000;
const BATCH = 50;
const SINGLES = 2000;
const CLIENTS = 16;
const CAP = 2000;
let cluster: ChaosCluster;
let system: ChaosSystem | undefined;
before(async () => {
  cluster = await startChaosCluster("overload");
});
after(async () => {
  await system?.stop();
  await cluster.destroy();
});

it(`${JOBS} jobs enqueued against MAX_PENDING_JOBS=${CAP}: 429 with Retry-After, nothing acknowledged lost`, async () => {
  system = await startSystem({
    cluster,
    workers: 2,
    apiEnv: { MAX_PENDING_JOBS: String(CAP) },
    workerEnv: { WORKER_COUNT: "8" },
  });
  const sys = system;
  let batched = 0;
  let singles = 0;
  let retryAfter: string | undefined;
  let maxPending = 0;
  const job = () => ({ type: "chaos_work", payload: {} });
  // Six clients send single jobs, the others batches, until 50,000 jobs are sent.
  const client = async (index: number) => {
    if (index < 6)
      while (singles < SINGLES) {
        singles++;
        const answer = await sys.post(job());
        if (answer.status === 429) retryAfter ??= answer.retryAfter;
      }
    else
      while (batched < JOBS - SINGLES) {
        const size = Math.min(BATCH, JOBS - SINGLES - batched);
        batched += size;
        const answer = await sys.postBatch(Array.from({ length: size }, job));
        if (answer.status === 429) retryAfter ??= answer.retryAfter;
      }
  };
  const sampler = setInterval(() => {
    void sys.db
      .query<{ n: number }>(`SELECT count(*)::int AS n FROM "${SCHEMA}".jobs WHERE status = 'pending'`)
      .then((result) => {
        maxPending = Math.max(maxPending, result.rows[0]?.n ?? 0);
      })
      .catch(() => undefined);
  }, 250);
  const started = Date.now();
  try {
    await Promise.all(Array.from({ length: CLIENTS }, (_, index) => client(index)));
  } finally {
    clearInterval(sampler);
  }
  const seconds = (Date.now() - started) / 1000;
  console.log(
    `# overload: ${JOBS} jobs sent in ${seconds.toFixed(1)} s; answers ${JSON.stringify(sys.answers)}; most pending seen ${maxPending}; Retry-After ${retryAfter}`,
  );
  assert.ok((sys.answers["429"] ?? 0) > 0, "the API pushed back with 429");
  assert.ok(retryAfter !== undefined && Number(retryAfter) > 0, "a 429 carries Retry-After (seconds)");
  assert.equal(sys.answers["500"] ?? 0, 0, "no 500");
  // Concurrent enqueues may each pass the check before any commits: at most one batch per client.
  assert.ok(maxPending <= CAP + CLIENTS * BATCH, `pending jobs peaked at ${maxPending}, cap ${CAP}`);
  const report = await auditLedger(sys.db, SCHEMA, {
    title: `overload: ${JOBS} jobs sent, cap ${CAP}`,
    acknowledged: sys.acknowledged,
    boundMs: 120_000,
    allowOverlap: false,
    processEnds: sys.processEnds,
  });
  assert.deepEqual(report.failures, []);
  assert.equal(report.done, sys.acknowledged.length);
});
