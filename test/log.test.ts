/**
 * The JSON log's batched writes (src/log.ts): lines keep their order, wait at most
 * LOG_FLUSH_INTERVAL_MS, leave at once past the batch size, and none is lost when the process exits
 * (by process.exit or an uncaught exception) right after logging.
 */
import assert from "node:assert/strict";
import { spawn } from "node:child_process";
import { once } from "node:events";
import { dirname, join } from "node:path";
import { describe, it } from "node:test";
import { fileURLToPath, pathToFileURL } from "node:url";
import { pino } from "pino";
import { BatchedLines, LOG_FLUSH_INTERVAL_MS } from "../src/log.js";

const LOG_MODULE = pathToFileURL(join(dirname(fileURLToPath(import.meta.url)), "..", "src", "log.js")).href;

/** A sink that records its writes and tells each one. */
function recordingSink() {
  const writes: string[] = [];
  let wake: (() => void) | null = null;
  return {
    writes,
    write(text: string) {
      writes.push(text);
      wake?.();
      wake = null;
    },
    /** Resolves at the next write. */
    nextWrite: () => new Promise<void>((resolve) => (wake = resolve)),
  };
}

/** stdout of `node --input-type=module -e script`, once it has exited; and its exit code. */
async function runScript(script: string): Promise<{ stdout: string; code: number | null }> {
  const child = spawn(process.execPath, ["--input-type=module", "-e", script], {
    stdio: ["ignore", "pipe", "pipe"],
    env: { ...process.env, FORCE_COLOR: "0" },
  });
  let stdout = "";
  child.stdout.setEncoding("utf8").on("data", (chunk: string) => (stdout += chunk));
  child.stderr.resume();
  const [code] = (await once(child, "close")) as [number | null];
  return { stdout, code };
}

describe("JSON log lines", () => {
  it("go out in order, together, within the flush interval", async () => {
    const sink = recordingSink();
    const logger = pino({ level: "info", base: null }, new BatchedLines(sink));
    const written = sink.nextWrite();
    // The flush timer is unref'd (it must not keep a process alive): this keeps the test's alive.
    const keepAlive = setInterval(() => {}, 60_000);
    const start = performance.now();
    for (let i = 0; i < 5; i++) logger.info({ i }, "line");
    assert.equal(sink.writes.length, 0, "nothing is written while the batch is small and young");
    await written.finally(() => clearInterval(keepAlive));
    const waitedMs = performance.now() - start;
    assert.equal(sink.writes.length, 1, "the five lines leave as one write");
    const lines = (sink.writes[0] as string)
      .trimEnd()
      .split("\n")
      .map((l) => JSON.parse(l) as { i: number });
    assert.deepEqual(
      lines.map((l) => l.i),
      [0, 1, 2, 3, 4],
    );
    // A timer may fire late on a busy machine, never early; the bound is the interval's order.
    assert.ok(waitedMs >= LOG_FLUSH_INTERVAL_MS - 1, `written after ${waitedMs} ms`);
  });

  it("are written at once when a batch's worth waits, and flushSync writes the rest", () => {
    const sink = recordingSink();
    const lines = new BatchedLines(sink);
    const line = `${"x".repeat(1023)}\n`;
    for (let i = 0; i < 64; i++) lines.write(line);
    assert.equal(sink.writes.length, 1, "64 KiB of lines leave without waiting for the timer");
    assert.equal(sink.writes[0], line.repeat(64));
    lines.write("last\n");
    assert.equal(sink.writes.length, 1);
    lines.flushSync();
    assert.deepEqual(sink.writes.slice(1), ["last\n"]);
    lines.flushSync();
    assert.equal(sink.writes.length, 2, "an empty flush writes nothing");
  });

  it("are all written when the process exits right after logging", async () => {
    for (const ending of ["process.exit(3)", "setImmediate(() => { throw new Error('boom'); })"]) {
      const { stdout, code } = await runScript(
        `const { createLogger } = await import(${JSON.stringify(LOG_MODULE)});
         const logger = createLogger("info", "taskqueue", "json");
         for (let i = 0; i < 1000; i++) logger.info({ i }, "line");
         ${ending};`,
      );
      assert.notEqual(code, 0, ending);
      const lines = stdout
        .trimEnd()
        .split("\n")
        .map((l) => JSON.parse(l) as { i: number });
      assert.equal(lines.length, 1000, `${ending}: every line is on stdout`);
      assert.deepEqual(
        lines.map((l) => l.i),
        Array.from({ length: 1000 }, (_, i) => i),
      );
    }
  });
});
