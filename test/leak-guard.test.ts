/**
 * The leak guard (test/helpers/leak-guard.ts), proved through the suite's own runner and options
 * (scripts/run-tests.mjs: `--import` of the guard, `--test-force-exit`): a file that leaks a pg
 * connection and a timer fails quickly, naming both, instead of hanging the run; a file that
 * cleans up after itself (closed pool and client, unref'd and cleared timers, a finished child
 * process, its own root `after` hook) passes.
 */
import assert from "node:assert/strict";
import { execFile } from "node:child_process";
import { it } from "node:test";
import { promisify } from "node:util";

const run = promisify(execFile);

interface Outcome {
  code: number;
  output: string;
  ms: number;
}

async function runFile(file: string): Promise<Outcome> {
  const started = Date.now();
  try {
    const { stdout, stderr } = await run(process.execPath, ["scripts/run-tests.mjs", file], {
      env: { ...process.env, NODE_TEST_CONTEXT: undefined },
      timeout: 30_000,
    });
    return { code: 0, output: stdout + stderr, ms: Date.now() - started };
  } catch (error) {
    const e = error as { code?: number; stdout?: string; stderr?: string };
    return { code: e.code ?? -1, output: `${e.stdout ?? ""}${e.stderr ?? ""}`, ms: Date.now() - started };
  }
}

it("fails a file that leaks a pg connection and a timer, quickly, naming both", async () => {
  const { code, output, ms } = await runFile("dist/test/fixtures/leaky-file.js");
  assert.equal(code, 1, output);
  assert.match(output, /leak in .*leaky-file\.js/, output);
  assert.match(output, /1 × TCPSocketWrap: TCP socket/, output);
  assert.match(output, /socket to [^ ]+:\d+ from local port \d+/, output);
  assert.match(output, /1 × Timeout: timer/, output);
  // The interval is 60 s and the connection would stay open for ever: the file ended on its own.
  assert.ok(ms < 20_000, `took ${ms} ms`);
});

it("passes a file that closes what it opened, after its own root after hooks ran", async () => {
  const { code, output } = await runFile("dist/test/fixtures/clean-file.js");
  assert.equal(code, 0, output);
  assert.doesNotMatch(output, /leak in/, output);
});
