/**
 * `taskqueue health` (the Docker image's HEALTHCHECK) against real processes: a running API (asked
 * through its health file and, without one, at HOST:PORT) and a running worker whose heartbeats
 * rewrite its health file: fresh → exit 0; stale (the worker frozen) or missing (stopped) → exit 1.
 */
import assert from "node:assert/strict";
import { execFile } from "node:child_process";
import { existsSync, mkdtempSync, rmSync, statSync, utimesSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { after, before, it } from "node:test";
import { setTimeout as sleep } from "node:timers/promises";
import { freePort } from "../../src/db/embedded.js";
import { createTestDb, type TestDb } from "../helpers/db.js";
import { CLI, cliEnv, startCli, until } from "../helpers/process.js";

let db: TestDb;
let folder: string;

before(async () => {
  db = await createTestDb();
  folder = mkdtempSync(join(tmpdir(), "taskqueue-health-"));
});
after(async () => {
  await db.drop();
  rmSync(folder, { recursive: true, force: true });
});

/** Runs `taskqueue health` with `args`: its exit code and output. */
function health(args: string[], env: NodeJS.ProcessEnv): Promise<{ code: number; output: string }> {
  return new Promise((resolve) => {
    execFile(process.execPath, [CLI, "health", ...args], { env, timeout: 20_000 }, (error, stdout, stderr) =>
      resolve({ code: error ? Number(error.code ?? -1) : 0, output: `${stdout}${stderr}`.trim() }),
    );
  });
}

it("an API is healthy while its /health answers: through its health file, or at HOST:PORT", async () => {
  const port = await freePort();
  const file = join(folder, "api.json");
  const env = cliEnv(db, { PORT: String(port) });
  const api = startCli(["api", "--no-migrate", "--health-file", file], env);
  try {
    await api.waitForLog((l) => l.msg === "API listening");
    await until(async () => existsSync(file), 10_000, "the API's health file");
    const viaFile = await health(["--health-file", file], env);
    assert.equal(viaFile.code, 0, viaFile.output);
    assert.equal(viaFile.output, `healthy: API http://127.0.0.1:${port}/health answered 200`);
    // Without a health file: GET /health at PORT on loopback.
    const viaPort = await health([], { ...env, TASKQUEUE_HEALTH_FILE: "" });
    assert.equal(viaPort.code, 0, viaPort.output);
  } finally {
    // Killed: the file stays behind, and still the API is found not answering.
    api.child.kill("SIGKILL");
    await api.exited;
  }
  const dead = await health(["--health-file", file, "--timeout", "2"], env);
  assert.equal(dead.code, 1);
  assert.match(
    dead.output,
    new RegExp(`^unhealthy: API http://127\\.0\\.0\\.1:${port}/health: .*ECONNREFUSED`),
  );
  const deadPort = await health(["--timeout", "2"], { ...env, TASKQUEUE_HEALTH_FILE: "" });
  assert.equal(deadPort.code, 1);
});

it("a worker is healthy while its heartbeats rewrite the file; frozen it goes stale, stopped the file is gone", async () => {
  const file = join(folder, "worker.json");
  const env = cliEnv(db, { STALE_THRESHOLD_SECONDS: "1", TASKQUEUE_HEALTH_FILE: file });
  const before = await health([], env);
  assert.equal(before.code, 1);
  assert.match(
    before.output,
    /^unhealthy: no health file at .*worker\.json: the process has not started yet/,
  );

  const worker = startCli(["worker", "--no-migrate"], env);
  try {
    await worker.waitForLog((l) => l.msg === "worker started");
    await until(async () => existsSync(file), 10_000, "the worker's health file");
    const fresh = await health([], env);
    assert.equal(fresh.code, 0, fresh.output);
    assert.match(fresh.output, /^healthy: worker heartbeat \d+\.\d s ago \(stale after 1 s\)$/);
    // Heartbeats rewrite it (every 0.2 s here).
    const first = statSync(file).mtimeMs;
    await until(async () => statSync(file).mtimeMs > first, 10_000, "a heartbeat's rewrite");

    // Frozen (as a hung event loop would be): no heartbeat; once the threshold has passed since the
    // last rewrite, the file is stale.
    worker.child.kill("SIGSTOP");
    const last = statSync(file).mtimeMs;
    await sleep(Math.max(0, last + 1200 - Date.now()));
    const stale = await health([], env);
    assert.equal(stale.code, 1, stale.output);
    assert.match(stale.output, /^unhealthy: worker heartbeat \d+\.\d s ago \(stale after 1 s\)$/);
    worker.child.kill("SIGCONT");
    await until(async () => (await health([], env)).code === 0, 10_000, "healthy again after SIGCONT");
  } finally {
    worker.child.kill("SIGCONT");
    worker.child.kill("SIGTERM");
  }
  assert.equal(await worker.exited, 0);
  assert.equal(existsSync(file), false, "a graceful stop removes the health file");
  const stopped = await health([], env);
  assert.equal(stopped.code, 1);
  assert.match(stopped.output, /no health file/);
});

it("an old or unreadable health file is unhealthy; an unwritable one refuses the start", async () => {
  const file = join(folder, "old.json");
  writeFileSync(
    file,
    JSON.stringify({ pid: 1, apiHealthUrl: null, worker: true, staleThresholdSeconds: 30 }),
  );
  const env = cliEnv(db);
  assert.equal((await health(["--health-file", file], env)).code, 0);
  const minuteAgo = new Date(Date.now() - 60_000);
  utimesSync(file, minuteAgo, minuteAgo);
  const old = await health(["--health-file", file], env);
  assert.equal(old.code, 1);
  assert.match(old.output, /worker heartbeat 6\d\.\d s ago \(stale after 30 s\)/);
  writeFileSync(file, "{half");
  const garbled = await health(["--health-file", file], env);
  assert.equal(garbled.code, 1);
  assert.match(garbled.output, /unreadable/);
  assert.equal((await health(["--timeout", "0"], env)).code, 2);

  const worker = startCli(["worker", "--no-migrate"], {
    ...env,
    TASKQUEUE_HEALTH_FILE: join(folder, "no-such-folder", "worker.json"),
  });
  assert.equal(await worker.exited, 2);
});
