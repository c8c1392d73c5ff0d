/**
 * API memory under concurrent large bodies (issue: "16 concurrent 32 MiB bodies keep API RSS under
 * 300 MB"): starts `taskqueue api` in its own process, sends `--concurrency` (16) bodies of
 * `--mib` (32) MiB at once, each a valid POST /jobs/batch of 10,000 jobs, and prints the API
 * process's RSS before, its peak (the kernel's high-water mark, VmHWM), and how many requests got
 * 201, 503 (over the in-flight body budget) or something else, and checks that every job of the
 * 201s is stored with the payload it was sent. With `--retry`, a request answered
 * 503 is sent again after its Retry-After, until every one is in (the peak then covers all 16).
 *
 *   npm run bench:api-memory -- [--concurrency 16] [--mib 32] [--budget BYTES] [--minimal] [--retry]
 *
 * `--budget` sets API_MAX_INFLIGHT_BODY_BYTES (default: the API's own, 64 MiB; 0 turns it off);
 * `--minimal` sends `Prefer: return=minimal` (answers of ids instead of 10,000 jobs). Uses
 * DATABASE_URL (default postgres://postgres@127.0.0.1:5432/test) and a throw-away schema. Linux
 * only (reads /proc).
 */
import { type ChildProcess, spawn } from "node:child_process";
import { readFileSync } from "node:fs";
import { request } from "node:http";
import { fileURLToPath } from "node:url";
import { parseArgs } from "node:util";
import { positiveInteger } from "../src/cli/flags.js";
import { freePort } from "../src/db/embedded.js";
import { TaskQueue } from "../src/index.js";

const { values } = parseArgs({
  options: {
    concurrency: { type: "string", default: "16" },
    mib: { type: "string", default: "32" },
    budget: { type: "string" },
    minimal: { type: "boolean", default: false },
    retry: { type: "boolean", default: false },
  },
});
function flag(name: "concurrency" | "mib", value = values[name]): number {
  try {
    return positiveInteger(`--${name}`)(value);
  } catch (error) {
    console.error(`error: ${(error as Error).message}`);
    process.exit(2);
  }
}
const concurrency = flag("concurrency");
const bodyBytes = Math.min(flag("mib") * 1024 * 1024, 32 * 1024 * 1024 - 1024);
const budget = values.budget;
if (budget !== undefined && !/^\d+$/.test(budget)) {
  console.error("error: --budget must be a whole number of bytes");
  process.exit(2);
}

const CLI = fileURLToPath(new URL("../src/cli/main.js", import.meta.url));
const databaseUrl = process.env.DATABASE_URL ?? "postgres://postgres@127.0.0.1:5432/test";
const schema = `bench_apimem_${process.pid}`;
const READY_TIMEOUT_MS = 30_000;
const REQUEST_TIMEOUT_MS = 120_000;
const mb = (bytes: number) => `${(bytes / 1e6).toFixed(0)} MB`;

/** A valid batch of 10,000 jobs whose JSON text is `bytes` long, give or take a few. */
function batchBody(bytes: number): Buffer {
  const jobs = 10_000;
  const skeleton = JSON.stringify({
    jobs: Array.from({ length: jobs }, () => ({ type: "noop", payload: { s: "" } })),
  });
  const filler = Math.max(0, Math.floor((bytes - skeleton.length) / jobs));
  const text = JSON.stringify({
    jobs: Array.from({ length: jobs }, (_, i) => ({
      type: "noop",
      payload: { s: String(i % 10).repeat(filler) },
    })),
  });
  return Buffer.from(text, "utf8");
}

/** A field of /proc/<pid>/status in bytes (VmRSS now, VmHWM the peak), or 0 if unreadable. */
function procBytes(pid: number, field: "VmRSS" | "VmHWM"): number {
  try {
    const match = new RegExp(`^${field}:\\s+(\\d+) kB`, "m").exec(
      readFileSync(`/proc/${pid}/status`, "utf8"),
    );
    return match ? Number(match[1]) * 1024 : 0;
  } catch {
    return 0;
  }
}

/** One POST /jobs/batch on its own connection: the status, and Retry-After when there is one. */
function post(port: number, body: Buffer): Promise<{ status: number | string; retryAfterSeconds: number }> {
  return new Promise((resolve) => {
    const req = request(
      {
        host: "127.0.0.1",
        port,
        method: "POST",
        path: "/jobs/batch",
        agent: false,
        timeout: REQUEST_TIMEOUT_MS,
        headers: {
          "content-type": "application/json",
          "content-length": body.length,
          ...(values.minimal ? { prefer: "return=minimal" } : {}),
        },
      },
      (res) => {
        res.resume();
        res.on("end", () =>
          resolve({
            status: res.statusCode ?? 0,
            retryAfterSeconds: Number(res.headers["retry-after"] ?? 1),
          }),
        );
      },
    );
    // A refused body is answered before it is read and the connection closed: the write may fail
    // after the answer arrived (the answer wins), or before it (counted as the error).
    req.on("error", (error: NodeJS.ErrnoException) =>
      resolve({ status: error.code ?? "error", retryAfterSeconds: 1 }),
    );
    req.on("timeout", () => req.destroy(new Error("timeout")));
    req.end(body);
  });
}

async function ready(port: number): Promise<boolean> {
  return new Promise((resolve) => {
    const req = request({ host: "127.0.0.1", port, path: "/ready", agent: false, timeout: 2000 }, (res) => {
      res.resume();
      res.on("end", () => resolve(res.statusCode === 200));
    });
    req.on("error", () => resolve(false));
    req.on("timeout", () => req.destroy(new Error("timeout")));
    req.end();
  });
}

const queue = new TaskQueue({ databaseUrl, schema, notifyChannel: `${schema}_jobs`, logLevel: "warn" });
let server: ChildProcess | null = null;
try {
  await queue.migrate();
  const port = await freePort();
  server = spawn(process.execPath, [CLI, "api", "--no-migrate"], {
    env: {
      ...process.env,
      DATABASE_URL: databaseUrl,
      TASKQUEUE_SCHEMA: schema,
      TASKQUEUE_NOTIFY_CHANNEL: `${schema}_jobs`,
      HOST: "127.0.0.1",
      PORT: String(port),
      LOG_LEVEL: "warn",
      ...(budget === undefined ? {} : { API_MAX_INFLIGHT_BODY_BYTES: budget }),
    },
    stdio: ["ignore", "inherit", "inherit"],
  });
  const deadline = Date.now() + READY_TIMEOUT_MS;
  while (!(await ready(port))) {
    if (server.exitCode !== null || Date.now() > deadline)
      throw new Error(`taskqueue api did not become ready (exit code ${server.exitCode})`);
    await new Promise((resolve) => setTimeout(resolve, 50));
  }
  const pid = server.pid as number;
  const body = batchBody(bodyBytes);
  const before = procBytes(pid, "VmRSS");
  console.log(
    `api-memory: ${concurrency} concurrent POST /jobs/batch of ${(body.length / 1024 / 1024).toFixed(1)} MiB (10,000 jobs each), ` +
      `budget ${budget ?? "default (64 MiB)"}${values.minimal ? ", Prefer: return=minimal" : ""}${values.retry ? ", retrying 503s" : ""}`,
  );
  console.log(`API RSS before: ${mb(before)}`);
  const counts = new Map<string, number>();
  const started = performance.now();
  await Promise.all(
    Array.from({ length: concurrency }, async () => {
      for (;;) {
        const { status, retryAfterSeconds } = await post(port, body);
        counts.set(String(status), (counts.get(String(status)) ?? 0) + 1);
        if (!values.retry || status !== 503) return;
        await new Promise((resolve) => setTimeout(resolve, retryAfterSeconds * 1000 * Math.random()));
      }
    }),
  );
  const seconds = (performance.now() - started) / 1000;
  const peak = procBytes(pid, "VmHWM");
  console.log(`API RSS peak:   ${mb(peak)} (VmHWM)   after: ${mb(procBytes(pid, "VmRSS"))}`);
  console.log(
    `answers: ${[...counts.entries()]
      .sort()
      .map(([status, n]) => `${n} × ${status}`)
      .join(", ")}   in ${seconds.toFixed(1)} s`,
  );
  const { rows } = await queue.pool.query<{ n: string }>(`SELECT count(*) AS n FROM "${schema}".jobs`);
  console.log(`jobs stored: ${rows[0]?.n} (${(counts.get("201") ?? 0) * 10_000} expected from the 201s)`);
  // Stored as sent: each batch holds 1,000 jobs of each of ten payloads (digit i % 10, repeated).
  const sent = JSON.parse(body.toString("utf8")) as { jobs: { payload: { s: string } }[] };
  const expected = new Set(sent.jobs.slice(0, 10).map((job) => JSON.stringify(job.payload)));
  const { rows: groups } = await queue.pool.query<{ payload: string; n: string }>(
    `SELECT payload::text AS payload, count(*) AS n FROM "${schema}".jobs GROUP BY 1`,
  );
  const perPayload = (counts.get("201") ?? 0) * 1000;
  const exact = groups.every(
    (g) => expected.has(JSON.stringify(JSON.parse(g.payload))) && Number(g.n) === perPayload,
  );
  console.log(
    `payloads stored as sent: ${exact && (perPayload === 0 || groups.length === 10) ? "yes" : "NO"}`,
  );
} finally {
  server?.kill("SIGTERM");
  await queue.pool.query(`DROP SCHEMA IF EXISTS "${schema}" CASCADE`).catch(() => undefined);
  await queue.close();
}
