/** Operator tools against a real `taskqueue start`: smoke checks every endpoint; inspect shows the queue. */
import assert from "node:assert/strict";
import { execFile } from "node:child_process";
import { readFileSync } from "node:fs";
import { after, before, it } from "node:test";
import { promisify } from "node:util";
import { freePort } from "../../src/db/embedded.js";
import { createTestDb, type TestDb } from "../helpers/db.js";
import { CLI, type CliProcess, cliEnv, startCli } from "../helpers/process.js";

const run = promisify(execFile);
let db: TestDb;
let service: CliProcess;
let port: number;

before(async () => {
  db = await createTestDb();
  port = await freePort();
  service = startCli(["start"], cliEnv(db, { PORT: String(port) }));
  await service.waitForLog((l) => l.msg === "API listening");
});
after(async () => {
  service.child.kill("SIGTERM");
  await service.exited;
  await db.drop();
});

it("smoke passes every check against a running service", async () => {
  const { stdout } = await run(process.execPath, [CLI, "smoke", "--url", `http://127.0.0.1:${port}`], {
    env: cliEnv(db),
  });
  assert.match(stdout, /^14 passed, 0 failed$/m);
  assert.doesNotMatch(stdout, /^FAIL/m);
});

it("smoke exits 1 when the service is not there", async () => {
  const unused = await freePort();
  await assert.rejects(
    run(process.execPath, [CLI, "smoke", "--url", `http://127.0.0.1:${unused}`, "--timeout", "2"], {
      env: cliEnv(db),
    }),
    (error: { code?: number; stdout?: string }) =>
      error.code === 1 && /FAIL {2}GET \/health/.test(error.stdout ?? ""),
  );
});

it("inspect shows depth by status, live workers and dead letters", async () => {
  await db.ledger.addJob({ type: "noop", runAt: "2999-01-01T00:00:00Z" });
  // PORT belongs to the API: inspect (like migrate and worker) does not read it.
  const { stdout } = await run(process.execPath, [CLI, "inspect"], { env: cliEnv(db, { PORT: "abc" }) });
  assert.match(stdout, /depth {4}pending 1 /);
  assert.match(stdout, /workers {2}1 live/);
  assert.match(stdout, /^dead {5}0 waiting, 0 recent$/m);
  assert.match(stdout, /^tables {3}\w+ [\d.]+ K?i?B/m);
  assert.match(stdout, /^taskqueue inspect · schema tq_test_\w+ v\d+ · /);
});

it("a bad value is named as the user gave it: the flag, or the environment variable", async () => {
  const cases: [string[], Record<string, string>, RegExp][] = [
    [
      ["worker", "--lock-sessions", "17"],
      {},
      /configuration error: --lock-sessions: must be between 1 and 16/,
    ],
    [["api", "--port", "99999"], {}, /configuration error: --port: must be between 0 and 65535/],
    [["api", "--port", "8e3"], {}, /--port must be a whole number/],
    [["worker", "--concurrency", "0x10"], {}, /--concurrency must be a positive integer/],
    [["smoke", "--timeout", "abc"], {}, /--timeout must be a positive number/],
    [["bench", "math", "--jobs", "8e3"], {}, /--jobs must be a positive integer/],
    // Found before the run, not after it.
    [["bench", "math", "--json", "/no-such-folder/figures.json"], {}, /--json .*cannot write there/],
    [["bench", "load", "--concurrency", "100000"], {}, /--concurrency must be at most 10,000/],
    [
      ["worker"],
      { WORKER_LOCK_SESSIONS: "40" },
      /configuration error: WORKER_LOCK_SESSIONS: must be between 1 and 16/,
    ],
  ];
  // The benchmarks left the CLI: `bench <name>` runs the entry point of `npm run bench:<name>`.
  const command = (args: string[]) =>
    args[0] === "bench" ? [`dist/bench/${args[1]}/main.js`, ...args.slice(2)] : [CLI, ...args];
  for (const [args, env, message] of cases)
    await assert.rejects(
      run(process.execPath, command(args), { env: { ...cliEnv(db), ...env } }),
      (error: { code?: number; stderr?: string }) => {
        assert.equal(error.code, 2, args.join(" "));
        assert.match(error.stderr ?? "", message);
        return true;
      },
    );
});

it("a flag replaces its variable, even a bad one; --port 0 listens on a free port like PORT=0", async () => {
  const api = startCli(["api", "--port", "0", "--no-migrate"], cliEnv(db, { PORT: "not-a-port" }));
  try {
    const listening = await api.waitForLog((l) => l.msg === "API listening");
    const url = String(listening.url);
    assert.match(url, /^http:\/\/[^:]+:[1-9][0-9]*$/);
    const response = await fetch(`${url}/health`);
    assert.equal(response.status, 200);
  } finally {
    api.child.kill("SIGTERM");
    assert.equal(await api.exited, 0);
  }
});

it("--version prints the package's version; an unknown command is a usage error (exit 2)", async () => {
  const { version } = JSON.parse(readFileSync("package.json", "utf8")) as { version: string };
  const { stdout } = await run(process.execPath, [CLI, "--version"]);
  assert.equal(stdout.trim(), version);
  await assert.rejects(run(process.execPath, [CLI, "no-such-command"]), (error: { code?: number }) => {
    assert.equal(error.code, 2);
    return true;
  });
});
