/**
 * Micro-benchmark of toJobResponse, which runs for every job of a POST /jobs/batch answer: 10,000
 * new jobs (one batch: shared creation and run times, as insertedJob builds them) mapped to their
 * wire shape, best and median of 50 rounds after 20 warm-up rounds, plus the same with
 * JSON.stringify of the answer, as the route sends it.
 *
 *   npm run build:bench && node dist/bench/job-response.js
 */
import { toJobResponse } from "../src/api/schemas.js";
import { newJob } from "../src/queue/job-shape.js";
import type { Job } from "../src/queue/types.js";

const JOBS = 10_000;
const now = Date.now();
const jobs: Job[] = Array.from({ length: JOBS }, (_, i) =>
  newJob({
    id: i + 1,
    type: "echo",
    payload: { n: i, text: "hello" },
    priority: 5,
    maxRetries: 3,
    runAt: new Date(now),
    createdAt: new Date(now),
    idempotencyKey: null,
    timeoutSeconds: null,
  }),
);

function measure(label: string, run: () => unknown): void {
  const times: number[] = [];
  for (let round = 0; round < 70; round++) {
    const start = process.hrtime.bigint();
    run();
    if (round >= 20) times.push(Number(process.hrtime.bigint() - start) / 1e6);
  }
  times.sort((a, b) => a - b);
  const median = times[Math.floor(times.length / 2)] as number;
  console.log(`${label}: best ${(times[0] as number).toFixed(2)} ms, median ${median.toFixed(2)} ms`);
}

measure(`toJobResponse × ${JOBS}`, () => jobs.map(toJobResponse));
measure(`JSON.stringify({jobs: jobs.map(toJobResponse)}) × ${JOBS}`, () =>
  JSON.stringify({ jobs: jobs.map(toJobResponse) }),
);
