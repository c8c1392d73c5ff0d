/**
 * `npm run bench:load`: noop throughput and latency, like the seed's load.py, in three phases.
 *
 * 1. Enqueue rate, with no worker running: N/2 jobs over HTTP POST /jobs, N/4 with
 *    `TaskQueue.addJob` (50 in flight), N/4 with `TaskQueue.addJobs` in batches of 1,000. Every
 *    job is enqueued with `run_at` an hour ahead, so nothing can be claimed yet.
 * 2. Drain rate: W worker processes start; once all are up, one statement makes the N jobs due and
 *    notifies; drain = N / (last completed_at − first claimed_at), database clock.
 * 3. Pickup latency: with the workers idle, one job every 20 ms; latency = claimed_at − created_at.
 */
import { writeFile } from "node:fs/promises";
import { setTimeout as sleep } from "node:timers/promises";
import type { Job } from "../../src/queue/types.js";
import { runPool } from "../shared/concurrency.js";
import { HttpJsonClient } from "../shared/http.js";
import { startProgress } from "../shared/progress.js";
import { type JobTiming, makeDelayedJobsDue, readJobTimings } from "../shared/reads.js";
import { extent, fixed, type LatencySummaryMs, round, summarizeMs } from "../shared/stats.js";
import { type BenchSystem, type MachineInfo, withBenchSystem } from "../shared/system.js";
import { renderTable } from "../shared/table.js";
import { waitForFinalJobs } from "../shared/wait.js";

/** Options of {@link runLoadBench} (the command's flags). */
export interface LoadBenchOptions {
  /** N: jobs enqueued in phase 1 and drained in phase 2. */
  jobs: number;
  /** Handlers run at once per worker process. */
  concurrency: number;
  /** Worker processes. */
  workers: number;
  /** WORKER_PREFETCH of the workers (default: the worker's own, = concurrency). */
  prefetch?: number;
  /** POST /jobs requests in flight in phase 1. */
  httpInFlight: number;
  /** Jobs of phase 3. */
  pickupSamples: number;
  /** Gap between phase-3 jobs, milliseconds. */
  pickupIntervalMs: number;
  /** Give up waiting for a phase's jobs to finish after this, seconds. */
  timeoutSeconds: number;
  /** Write the figures as JSON to this file. */
  jsonFile?: string;
  /** Draw progress bars on stderr (only when it is a TTY). */
  progress: boolean;
}

/** `TaskQueue.addJob` calls in flight in phase 1. */
export const LIBRARY_IN_FLIGHT = 50;
/** Jobs per `TaskQueue.addJobs` call in phase 1. */
export const LIBRARY_BATCH_SIZE = 1000;
/** Phase-1 jobs are due this far ahead, so that only phase 2 can run them. */
const DELAY_MS = 3_600_000;

/** One enqueue path's figures. */
export interface EnqueueFigures {
  jobs: number;
  seconds: number;
  jobsPerSecond: number;
}

/** Everything the load benchmark measured. */
export interface LoadBenchReport {
  enqueue: { http: EnqueueFigures; addJob: EnqueueFigures; addJobs: EnqueueFigures };
  drain: { jobs: number; done: number; seconds: number; jobsPerSecond: number };
  pickup: { samples: number; claimed: number; latency: LatencySummaryMs };
  workerWarnings: number;
}

async function timed<T>(fn: () => Promise<T[]>): Promise<{ ids: T[]; figures: EnqueueFigures }> {
  const start = performance.now();
  const ids = await fn();
  const seconds = (performance.now() - start) / 1000;
  return { ids, figures: { jobs: ids.length, seconds, jobsPerSecond: ids.length / seconds } };
}

/** Phase 1: the three enqueue paths, every job delayed by {@link DELAY_MS}. Returns every id. */
async function enqueuePhase(
  system: BenchSystem,
  options: LoadBenchOptions,
): Promise<{ ids: number[]; figures: LoadBenchReport["enqueue"] }> {
  const httpCount = Math.floor(options.jobs / 2);
  const addJobCount = Math.floor(options.jobs / 4);
  const addJobsCount = options.jobs - httpCount - addJobCount;
  const runAt = new Date(Date.now() + DELAY_MS);
  const body = { type: "noop", run_at: runAt.toISOString() };
  const client = new HttpJsonClient(system.apiUrl, options.httpInFlight);
  const progress = startProgress("enqueueing", options.jobs, options.progress);
  try {
    const http = await timed(() =>
      runPool(httpCount, options.httpInFlight, async () => {
        const response = await client.postJson("/jobs", body);
        const job = response.body as { id?: number };
        if (response.status !== 201 || typeof job.id !== "number")
          throw new Error(`POST /jobs answered ${response.status}: ${JSON.stringify(response.body)}`);
        progress.increment();
        return job.id;
      }),
    );
    const addJob = await timed(() =>
      runPool(addJobCount, LIBRARY_IN_FLIGHT, async () => {
        const job = await system.queue.addJob({ type: "noop", runAt });
        progress.increment();
        return job.id;
      }),
    );
    const addJobs = await timed(async () => {
      const ids: number[] = [];
      for (let done = 0; done < addJobsCount; done += LIBRARY_BATCH_SIZE) {
        const size = Math.min(LIBRARY_BATCH_SIZE, addJobsCount - done);
        const jobs: Job[] = await system.queue.addJobs(
          Array.from({ length: size }, () => ({ type: "noop", runAt })),
        );
        ids.push(...jobs.map((j) => j.id));
        progress.increment(size);
      }
      return ids;
    });
    return {
      ids: [...http.ids, ...addJob.ids, ...addJobs.ids],
      figures: { http: http.figures, addJob: addJob.figures, addJobs: addJobs.figures },
    };
  } finally {
    progress.stop();
    client.close();
  }
}

/** Phase 3: one job every `pickupIntervalMs`; resolves with their ids once all are enqueued. */
async function pickupPhase(system: BenchSystem, options: LoadBenchOptions): Promise<number[]> {
  const progress = startProgress("pickup samples", options.pickupSamples, options.progress);
  const pending: Promise<number>[] = [];
  const start = performance.now();
  try {
    for (let i = 0; i < options.pickupSamples; i++) {
      const wait = start + i * options.pickupIntervalMs - performance.now();
      if (wait > 0) await sleep(wait);
      pending.push(
        system.queue.addJob({ type: "noop" }).then((job) => {
          progress.increment();
          return job.id;
        }),
      );
    }
    return await Promise.all(pending);
  } finally {
    progress.stop();
  }
}

function drainFigures(jobs: JobTiming[], expected: number): LoadBenchReport["drain"] {
  const done = jobs.filter((j) => j.status === "done");
  const firstClaimedUs = extent(done.map((j) => j.claimedUs ?? Number.POSITIVE_INFINITY)).min;
  const lastCompletedUs = extent(done.map((j) => j.completedUs ?? Number.NEGATIVE_INFINITY)).max;
  const seconds = done.length > 0 ? (lastCompletedUs - firstClaimedUs) / 1e6 : Number.NaN;
  return { jobs: expected, done: done.length, seconds, jobsPerSecond: done.length / seconds };
}

/** The load benchmark's table. */
export function formatLoadReport(
  report: LoadBenchReport,
  machine: MachineInfo,
  options: LoadBenchOptions,
): string {
  const rate = (f: EnqueueFigures) =>
    `${fixed(f.jobsPerSecond, 0).padStart(6)} jobs/s   (${f.jobs} jobs in ${fixed(f.seconds, 2)} s)`;
  const p = report.pickup.latency;
  const table = renderTable({
    title: "Load Benchmark — noop jobs",
    sections: [
      [
        ["Jobs", String(options.jobs)],
        [
          "Worker processes",
          `${options.workers} × concurrency ${options.concurrency}${options.prefetch ? `, prefetch ${options.prefetch}` : ""}`,
        ],
      ],
      [
        "Phase 1 — enqueue rate (workers stopped)",
        [`HTTP POST /jobs (${options.httpInFlight} in flight)`, rate(report.enqueue.http)],
        [`TaskQueue.addJob (${LIBRARY_IN_FLIGHT} in flight)`, rate(report.enqueue.addJob)],
        [
          `TaskQueue.addJobs (${report.enqueue.addJobs.jobs > LIBRARY_BATCH_SIZE ? `batches of ${LIBRARY_BATCH_SIZE}` : "one batch"})`,
          rate(report.enqueue.addJobs),
        ],
      ],
      [
        "Phase 2 — drain (first claimed_at → last completed_at)",
        ["Jobs drained", `${report.drain.done}/${report.drain.jobs}`],
        ["Drain rate", `${fixed(report.drain.jobsPerSecond, 0)} jobs/s`],
        ["Drain time", `${fixed(report.drain.seconds, 2)} s`],
      ],
      [
        `Phase 3 — pickup latency (claimed_at − created_at, one job every ${options.pickupIntervalMs} ms)`,
        ["Samples picked up", `${report.pickup.claimed}/${report.pickup.samples}`],
        ["p50 pickup latency", `${fixed(p.p50Ms, 1)} ms`],
        ["p90 pickup latency", `${fixed(p.p90Ms, 1)} ms`],
        ["p99 pickup latency", `${fixed(p.p99Ms, 1)} ms`],
        ["max pickup latency", `${fixed(p.maxMs, 1)} ms`],
      ],
    ],
  });
  return [
    table,
    `Run on ${machine.cpuModel} (${machine.cpuCount} CPUs), Node ${machine.node}, PostgreSQL ${machine.postgresVersion}` +
      `${machine.embeddedPostgres ? " (embedded)" : ""}.`,
  ].join("\n");
}

/** Runs the load benchmark, prints its table and returns the exit code (1 if some job did not finish). */
export async function runLoadBench(options: LoadBenchOptions): Promise<number> {
  return withBenchSystem("load", async (system) => {
    const startedAtIso = new Date().toISOString();
    const phase1 = await enqueuePhase(system, options);

    const workers = await system.startWorkers({
      count: options.workers,
      concurrency: options.concurrency,
      prefetch: options.prefetch,
    });
    const draining = startProgress("draining", options.jobs, options.progress);
    await makeDelayedJobsDue(system.queue.pool, system.schema, phase1.ids, system.notifyChannel);
    const finalAfterDrain = await waitForFinalJobs(
      system.queue,
      options.jobs,
      options.timeoutSeconds * 1000,
      draining,
    );
    draining.stop();
    const drain = drainFigures(
      await readJobTimings(system.queue.pool, system.schema, phase1.ids),
      options.jobs,
    );

    const pickupIds = await pickupPhase(system, options);
    // Idle workers pick each sample up within milliseconds: no bar for this short wait.
    const pickingUp = startProgress("pickup completed", options.pickupSamples, false);
    await waitForFinalJobs(
      system.queue,
      finalAfterDrain + options.pickupSamples,
      options.timeoutSeconds * 1000,
      pickingUp,
    );
    const pickupJobs = await readJobTimings(system.queue.pool, system.schema, pickupIds);
    const pickupMs = pickupJobs
      .filter((j) => j.claimedUs !== null)
      .map((j) => ((j.claimedUs as number) - j.createdUs) / 1000);
    await workers.stop();

    const report: LoadBenchReport = {
      enqueue: phase1.figures,
      drain,
      pickup: { samples: options.pickupSamples, claimed: pickupMs.length, latency: summarizeMs(pickupMs) },
      workerWarnings: workers.warnings.length,
    };
    console.log(formatLoadReport(report, system.machine, options));
    if (workers.warnings.length > 0)
      process.stderr.write(
        `workers logged ${workers.warnings.length} warning(s); first:\n${workers.warnings.slice(0, 5).join("\n")}\n`,
      );
    if (options.jsonFile) {
      const enqueue = (f: EnqueueFigures) => ({
        jobs: f.jobs,
        seconds: round(f.seconds),
        jobsPerSecond: round(f.jobsPerSecond, 1),
      });
      const record = {
        benchmark: "load",
        startedAt: startedAtIso,
        schema: system.schema,
        options: {
          jobs: options.jobs,
          concurrency: options.concurrency,
          workers: options.workers,
          prefetch: options.prefetch ?? null,
          httpInFlight: options.httpInFlight,
          libraryInFlight: LIBRARY_IN_FLIGHT,
          libraryBatchSize: LIBRARY_BATCH_SIZE,
          pickupSamples: options.pickupSamples,
          pickupIntervalMs: options.pickupIntervalMs,
        },
        machine: system.machine,
        enqueue: {
          http: enqueue(report.enqueue.http),
          addJob: enqueue(report.enqueue.addJob),
          addJobs: enqueue(report.enqueue.addJobs),
        },
        drain: {
          jobs: drain.jobs,
          done: drain.done,
          seconds: round(drain.seconds),
          jobsPerSecond: round(drain.jobsPerSecond, 1),
        },
        pickup: {
          samples: report.pickup.samples,
          claimed: report.pickup.claimed,
          latencyMs: Object.fromEntries(
            Object.entries(report.pickup.latency).map(([k, v]) => [k, round(v, 2)]),
          ),
        },
        workerWarnings: report.workerWarnings,
      };
      await writeFile(options.jsonFile, `${JSON.stringify(record, null, 2)}\n`);
    }
    const complete = drain.done === drain.jobs && report.pickup.claimed === report.pickup.samples;
    return complete ? 0 : 1;
  });
}
