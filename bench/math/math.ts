/**
 * `npm run bench:math`: the seed's verified benchmark. Submits is_prime, collatz and sha256_chain
 * jobs over HTTP, waits for every one to finish, re-derives every result with independent code
 * (./verify.ts) and prints throughput, latency and the count of correct, incorrect and missing
 * results. Exit code 1 on any incorrect or missing result.
 */
import { writeFile } from "node:fs/promises";
import { isDeepStrictEqual } from "node:util";
import type { JsonValue } from "../../src/queue/types.js";
import { runPool } from "../shared/concurrency.js";
import { HttpJsonClient } from "../shared/http.js";
import { startProgress } from "../shared/progress.js";
import { type JobTiming, readJobTimings } from "../shared/reads.js";
import { extent, fixed, type LatencySummaryMs, round, summarizeMs } from "../shared/stats.js";
import { type BenchSystem, type MachineInfo, withBenchSystem } from "../shared/system.js";
import { renderTable, type TableRow } from "../shared/table.js";
import { waitForFinalJobs } from "../shared/wait.js";
import { describeMathRanges, MATH_RANGES, type MathJobSpec, mathJobs } from "./payloads.js";
import { expectedResult, MATH_TYPES, type MathType } from "./verify.js";

/** Options of {@link runMathBench} (the command's flags). */
export interface MathBenchOptions {
  /** Jobs to submit, interleaved over the three types. */
  jobs: number;
  /** Worker processes. */
  workers: number;
  /** Handlers run at once per worker process. */
  concurrency: number;
  /** After the last submission, wait this long for every job to finish; later ones count as timed out. */
  timeoutSeconds: number;
  /** POST /jobs requests in flight while submitting. */
  httpInFlight: number;
  /** PRNG seed of the payloads. */
  seed: number;
  /** Write the figures as JSON to this file. */
  jsonFile?: string;
  /** Draw progress bars on stderr (only when it is a TTY). */
  progress: boolean;
}

/** One wrong or missing result. */
export interface MathMismatch {
  id: number;
  type: MathType;
  payload: JsonValue;
  status: string;
  expected: JsonValue;
  actual: JsonValue | null;
  error: string | null;
}

/** Per-type figures. */
export interface MathTypeFigures {
  total: number;
  correct: number;
  p50Ms: number;
  p99Ms: number;
}

/** Everything the math benchmark measured. */
export interface MathBenchReport {
  submitted: number;
  done: number;
  dead: number;
  timedOut: number;
  correct: number;
  incorrect: number;
  missing: number;
  accuracyPercent: number;
  throughputJobsPerSecond: number;
  /** First job created → last job completed, seconds (database clock). */
  spanSeconds: number;
  latency: LatencySummaryMs;
  perType: Record<MathType, MathTypeFigures>;
  mismatches: MathMismatch[];
  workerWarnings: number;
}

const MISMATCHES_KEPT = 20;
const MISMATCHES_PRINTED = 5;

/** Submits the jobs over HTTP, `inFlight` at a time; returns the job id of each spec, in order. */
async function submit(
  system: BenchSystem,
  specs: MathJobSpec[],
  options: MathBenchOptions,
): Promise<number[]> {
  const client = new HttpJsonClient(system.apiUrl, options.httpInFlight);
  const progress = startProgress("submitting (HTTP)", specs.length, options.progress);
  try {
    return await runPool(specs.length, options.httpInFlight, async (i) => {
      const spec = specs[i] as MathJobSpec;
      const response = await client.postJson("/jobs", { type: spec.type, payload: spec.payload });
      const body = response.body as { id?: number };
      if (response.status !== 201 || typeof body.id !== "number")
        throw new Error(`POST /jobs answered ${response.status}: ${JSON.stringify(response.body)}`);
      progress.increment();
      return body.id;
    });
  } finally {
    progress.stop();
    client.close();
  }
}

/**
 * Compares every submitted job (`specs[i]`, stored as job `ids[i]`) with its independently derived
 * result: correct only when the job is done and its result deep-equals the expected one.
 * Keeps the first 20 mismatches (wrong, dead, unfinished or absent jobs), in id order.
 */
export async function verifyResults(
  specs: MathJobSpec[],
  ids: number[],
  jobs: Map<number, JobTiming>,
  showProgress: boolean,
): Promise<{ correct: boolean[]; mismatches: MathMismatch[] }> {
  const progress = startProgress("verifying", specs.length, showProgress);
  const mismatches: MathMismatch[] = [];
  try {
    // WebCrypto digests are asynchronous: many chains at once keep its thread pool busy.
    const correct = await runPool(specs.length, 16, async (i) => {
      const spec = specs[i] as MathJobSpec;
      const id = ids[i] as number;
      const job = jobs.get(id);
      const expected = await expectedResult(spec.type, spec.payload);
      const ok = job?.status === "done" && isDeepStrictEqual(job.result, expected);
      if (!ok && mismatches.length < MISMATCHES_KEPT)
        mismatches.push({
          id,
          type: spec.type,
          payload: spec.payload as JsonValue,
          status: job?.status ?? "absent",
          expected,
          actual: job?.result ?? null,
          error: job?.error ?? null,
        });
      progress.increment();
      return ok;
    });
    return { correct, mismatches: mismatches.sort((a, b) => a.id - b.id) };
  } finally {
    progress.stop();
  }
}

function latencyMs(job: JobTiming | undefined): number | null {
  if (job?.status !== "done" || job.completedUs === null) return null;
  return (job.completedUs - job.createdUs) / 1000;
}

/** Computes the report from what was submitted, read back and verified. */
export function mathFigures(
  specs: MathJobSpec[],
  ids: number[],
  jobs: Map<number, JobTiming>,
  correct: boolean[],
  mismatches: MathMismatch[],
  workerWarnings: number,
): MathBenchReport {
  const all = ids.map((id) => jobs.get(id));
  const done = all.filter((j) => j?.status === "done") as JobTiming[];
  const dead = all.filter((j) => j?.status === "dead").length;
  const latencies = all.map(latencyMs).filter((v): v is number => v !== null);
  const firstCreatedUs = extent(all.map((j) => j?.createdUs ?? Number.POSITIVE_INFINITY)).min;
  const lastCompletedUs = extent(done.map((j) => j.completedUs ?? Number.NEGATIVE_INFINITY)).max;
  const spanSeconds = (lastCompletedUs - firstCreatedUs) / 1e6;
  const correctCount = correct.filter(Boolean).length;
  const perType = {} as Record<MathType, MathTypeFigures>;
  for (const type of MATH_TYPES) {
    const indexes = specs.flatMap((s, i) => (s.type === type ? [i] : []));
    const typeLatency = summarizeMs(
      indexes.map((i) => latencyMs(jobs.get(ids[i] as number))).filter((v): v is number => v !== null),
    );
    perType[type] = {
      total: indexes.length,
      correct: indexes.filter((i) => correct[i]).length,
      p50Ms: typeLatency.p50Ms,
      p99Ms: typeLatency.p99Ms,
    };
  }
  return {
    submitted: specs.length,
    done: done.length,
    dead,
    timedOut: specs.length - done.length - dead,
    correct: correctCount,
    incorrect: ids.filter((id, i) => jobs.get(id)?.status === "done" && !correct[i]).length,
    missing: specs.length - done.length,
    accuracyPercent: specs.length === 0 ? 100 : (correctCount / specs.length) * 100,
    throughputJobsPerSecond: done.length > 0 && spanSeconds > 0 ? done.length / spanSeconds : 0,
    spanSeconds,
    latency: summarizeMs(latencies),
    perType,
    mismatches,
    workerWarnings,
  };
}

/** The seed's table, then the verdict line(s). */
export function formatMathReport(
  report: MathBenchReport,
  machine: MachineInfo,
  options: Pick<MathBenchOptions, "workers" | "concurrency">,
): string {
  const failed = report.submitted - report.done;
  const failedDetail = failed > 0 ? ` (${report.dead} dead, ${report.timedOut} timed out)` : "";
  const ms = (v: number) => `${fixed(v, 1)} ms`;
  const typeRows: TableRow[] = ["sha256_chain", "collatz", "is_prime"].map((type) => {
    const t = report.perType[type as MathType];
    return `${type.padEnd(13)} ${`${t.correct}/${t.total}`.padStart(9)} correct   p50=${fixed(t.p50Ms, 1)}ms   p99=${fixed(t.p99Ms, 1)}ms`;
  });
  const table = renderTable({
    title: "Math Benchmark — Verified Results",
    sections: [
      [
        ["Jobs submitted", String(report.submitted)],
        ["Jobs completed (done)", String(report.done)],
        ["Jobs failed/timed out", `${failed}${failedDetail}`],
      ],
      [
        ["✓ Correct results", `${report.correct}/${report.submitted}`],
        ["✗ Incorrect results", String(report.incorrect)],
        ["✗ Missing results", String(report.missing)],
        ["Accuracy", `${report.accuracyPercent.toFixed(4)}%`],
      ],
      [
        ["End-to-end throughput", `${fixed(report.throughputJobsPerSecond, 0)} jobs/s`],
        ["p50 latency", ms(report.latency.p50Ms)],
        ["p75 latency", ms(report.latency.p75Ms)],
        ["p95 latency", ms(report.latency.p95Ms)],
        ["p99 latency", ms(report.latency.p99Ms)],
        ["max latency", ms(report.latency.maxMs)],
      ],
      ["Per-type breakdown"],
      typeRows,
    ],
  });
  const lines = [table];
  if (report.incorrect === 0 && report.missing === 0) lines.push("✓ ALL RESULTS MATHEMATICALLY CORRECT");
  else {
    lines.push(
      `✗ RESULTS NOT VERIFIED: ${report.incorrect} incorrect, ${report.missing} missing of ${report.submitted}; first mismatches:`,
    );
    for (const m of report.mismatches.slice(0, MISMATCHES_PRINTED))
      lines.push(
        `  job ${m.id} ${m.type} ${JSON.stringify(m.payload)} [${m.status}]: expected ${JSON.stringify(m.expected)}, got ${JSON.stringify(m.actual)}${m.error ? ` (error: ${m.error})` : ""}`,
      );
  }
  lines.push(
    `Run on ${machine.cpuModel} (${machine.cpuCount} CPUs), Node ${machine.node}, PostgreSQL ${machine.postgresVersion}` +
      `${machine.embeddedPostgres ? " (embedded)" : ""}, ${options.workers} worker process${options.workers === 1 ? "" : "es"} × concurrency ${options.concurrency}.`,
  );
  return lines.join("\n");
}

/** Runs the math benchmark, prints its table and returns the exit code (0 all correct, 1 otherwise). */
export async function runMathBench(options: MathBenchOptions): Promise<number> {
  const specs = mathJobs(options.jobs, options.seed);
  return withBenchSystem("math", async (system) => {
    const workers = await system.startWorkers({ count: options.workers, concurrency: options.concurrency });
    const startedAtIso = new Date().toISOString();
    const startedAt = performance.now();
    const ids = await submit(system, specs, options);
    const submittedAt = performance.now();
    const waiting = startProgress("completed", specs.length, options.progress);
    await waitForFinalJobs(system.queue, specs.length, options.timeoutSeconds * 1000, waiting);
    waiting.stop();
    const finishedAt = performance.now();
    const jobs = new Map((await readJobTimings(system.queue.pool, system.schema, ids)).map((j) => [j.id, j]));
    // Verification is CPU-bound here; the workers have nothing left to do.
    await workers.stop();
    const { correct, mismatches } = await verifyResults(specs, ids, jobs, options.progress);
    const verifiedAt = performance.now();
    const report = mathFigures(specs, ids, jobs, correct, mismatches, workers.warnings.length);
    console.log(formatMathReport(report, system.machine, options));
    if (workers.warnings.length > 0)
      process.stderr.write(
        `workers logged ${workers.warnings.length} warning(s); first:\n${workers.warnings.slice(0, 5).join("\n")}\n`,
      );
    if (options.jsonFile) {
      const record = {
        benchmark: "math",
        startedAt: startedAtIso,
        schema: system.schema,
        options: {
          jobs: options.jobs,
          workers: options.workers,
          concurrency: options.concurrency,
          timeoutSeconds: options.timeoutSeconds,
          httpInFlight: options.httpInFlight,
          seed: options.seed,
        },
        payloadRanges: { ...MATH_RANGES, description: describeMathRanges() },
        machine: system.machine,
        results: {
          submitted: report.submitted,
          done: report.done,
          dead: report.dead,
          timedOut: report.timedOut,
          correct: report.correct,
          incorrect: report.incorrect,
          missing: report.missing,
          accuracyPercent: round(report.accuracyPercent, 4),
          allCorrect: report.incorrect === 0 && report.missing === 0,
        },
        throughputJobsPerSecond: round(report.throughputJobsPerSecond, 1),
        spanSeconds: round(report.spanSeconds, 3),
        latencyMs: Object.fromEntries(Object.entries(report.latency).map(([k, v]) => [k, round(v, 1)])),
        perType: Object.fromEntries(
          Object.entries(report.perType).map(([type, t]) => [
            type,
            { total: t.total, correct: t.correct, p50Ms: round(t.p50Ms, 1), p99Ms: round(t.p99Ms, 1) },
          ]),
        ),
        phasesSeconds: {
          submit: round((submittedAt - startedAt) / 1000),
          waitForCompletion: round((finishedAt - submittedAt) / 1000),
          verify: round((verifiedAt - finishedAt) / 1000),
        },
        mismatches: report.mismatches,
        workerWarnings: report.workerWarnings,
      };
      await writeFile(options.jsonFile, `${JSON.stringify(record, null, 2)}\n`);
    }
    return report.incorrect === 0 && report.missing === 0 ? 0 : 1;
  });
}
