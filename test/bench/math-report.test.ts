/**
 * The math benchmark's verdict on fabricated read-backs: a wrong result, a dead job and a job that
 * never finished must each be caught, counted and shown; timings come from the µs timestamps.
 */
import assert from "node:assert/strict";
import { test } from "node:test";
import { formatMathReport, mathFigures, verifyResults } from "../../bench/math/math.js";
import { mathJobs } from "../../bench/math/payloads.js";
import { expectedResult } from "../../bench/math/verify.js";
import type { JobTiming } from "../../bench/shared/reads.js";
import type { MachineInfo } from "../../bench/shared/system.js";

const machine: MachineInfo = {
  node: process.version,
  platform: "linux",
  arch: "x64",
  cpuCount: 2,
  cpuModel: "test cpu",
  totalMemoryMiB: 1024,
  postgresVersion: "16.0",
  embeddedPostgres: false,
};

/** Six jobs as a worker would have finished them: created at t = i ms, completed 100 + i ms later. */
async function finishedJobs() {
  const specs = mathJobs(6);
  const ids = specs.map((s) => 1000 + s.index);
  const jobs = new Map<number, JobTiming>();
  for (const spec of specs) {
    const createdUs = 1_700_000_000_000_000 + spec.index * 1000;
    jobs.set(1000 + spec.index, {
      id: 1000 + spec.index,
      type: spec.type,
      status: "done",
      payload: spec.payload,
      result: await expectedResult(spec.type, spec.payload),
      error: null,
      createdUs,
      claimedUs: createdUs + 10_000,
      startedUs: createdUs + 20_000,
      completedUs: createdUs + 100_000 + spec.index * 1000,
    });
  }
  return { specs, ids, jobs };
}

test("all results right: every job correct, figures from the database timestamps", async () => {
  const { specs, ids, jobs } = await finishedJobs();
  const { correct, mismatches } = await verifyResults(specs, ids, jobs, false);
  const report = mathFigures(specs, ids, jobs, correct, mismatches, 0);
  assert.deepEqual(
    [report.correct, report.incorrect, report.missing, report.accuracyPercent],
    [6, 0, 0, 100],
  );
  // Latencies 100, 101, ... 105 ms; span = first created → last completed = 5 ms + 105 ms.
  assert.equal(report.latency.maxMs, 105);
  assert.equal(report.latency.p50Ms, 102.5);
  assert.ok(Math.abs(report.spanSeconds - 0.11) < 1e-9);
  assert.ok(Math.abs(report.throughputJobsPerSecond - 6 / 0.11) < 1e-6);
  const text = formatMathReport(report, machine, { workers: 1, concurrency: 4 });
  assert.match(text, /✓ ALL RESULTS MATHEMATICALLY CORRECT/);
  assert.match(text, /Correct results +6\/6/);
});

test("a wrong result, a dead job and an unfinished one are counted and listed", async () => {
  const { specs, ids, jobs } = await finishedJobs();
  const wrong = jobs.get(1000) as JobTiming; // is_prime
  wrong.result = { ...(wrong.result as Record<string, number>), divisors_checked: 1 };
  const dead = jobs.get(1002) as JobTiming; // sha256_chain
  Object.assign(dead, { status: "dead", result: null, error: "boom" });
  const unfinished = jobs.get(1004) as JobTiming; // collatz
  Object.assign(unfinished, { status: "running", result: null, completedUs: null });
  jobs.delete(1005); // never read back at all

  const { correct, mismatches } = await verifyResults(specs, ids, jobs, false);
  const report = mathFigures(specs, ids, jobs, correct, mismatches, 0);
  assert.deepEqual(
    [report.correct, report.incorrect, report.missing, report.dead, report.timedOut],
    [2, 1, 3, 1, 2],
  );
  assert.deepEqual(
    report.mismatches.map((m) => [m.id, m.status]),
    [
      [1000, "done"],
      [1002, "dead"],
      [1004, "running"],
      [1005, "absent"],
    ],
  );
  assert.equal(report.perType.is_prime.correct, 1);
  const text = formatMathReport(report, machine, { workers: 1, concurrency: 4 });
  assert.doesNotMatch(text, /ALL RESULTS MATHEMATICALLY CORRECT/);
  assert.match(text, /✗ RESULTS NOT VERIFIED: 1 incorrect, 3 missing of 6/);
  assert.match(text, /job 1000 is_prime .*"divisors_checked":1/);
  assert.match(text, /job 1002 sha256_chain .*\[dead\].*error: boom/);
});
