/**
 * The JSON log's batched writes (src/log.ts): a line after a quiet spell is written at once; lines
 * that follow closely keep their order and leave together within the flush interval, at once past
 * the batch size, or with the first line after the interval even if the timer could not fire (a
 * busy event loop); none is lost when the process exits (by process.exit or an uncaught exception)
 * right after logging; flushLogs puts them ahead of the process's next message on stderr.
 */
import assert from "node:assert/strict";
import { spawn } from "node:child_process";
import { once } from "node:events";
import { closeSync, mkdtempSync, openSync, readFileSync, rmSync } from "node:fs";
import { tmpdir } from "node:os";
import { dirname, join } from "node:path";
import { describe, it } from "node:test";
import { fileURLToPath, pathToFileURL } from "node:url";
import { pino } from "pino";
import { BatchedLines, LOG_FLUSH_INTERVAL_MS } from "../src/log.js";

const LOG_MODULE = pathToFileURL(join(dirname(fileURLToPath(import.meta.url)), "..", "src", "log.js")).href;

/** An interval no test step outlasts: lines wait for it unless the test passes it on purpose. */
const LONG_MS = 600_000;

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

/** The `i` fields of the JSON lines of `text`. */
const indexes = (text: string) =>
  text
    .trimEnd()
    .split("\n")
    .map((l) => (JSON.parse(l) as { i: number }).i);

/** Returns once `ms` milliseconds have passed without yielding: the event loop is held, as a CPU-bound handler holds it. */
function blockFor(ms: number): void {
  const until = performance.now() + ms;
  while (performance.now() < until);
}

/**
 * What `node --input-type=module -e script` wrote, once it has exited, and its exit code: stdout
 * alone, or with `shared`, stdout and stderr into one file (as `> out 2>&1`), in the order written.
 */
async function runScript(script: string, shared = false): Promise<{ stdout: string; code: number | null }> {
  const dir = mkdtempSync(join(tmpdir(), "taskqueue-log-"));
  const file = join(dir, "out");
  const fd = shared ? openSync(file, "w") : null;
  try {
    const child = spawn(process.execPath, ["--input-type=module", "-e", script], {
      stdio: fd === null ? ["ignore", "pipe", "ignore"] : ["ignore", fd, fd],
      env: { ...process.env, FORCE_COLOR: "0" },
    });
    let stdout = "";
    child.stdout?.setEncoding("utf8").on("data", (chunk: string) => (stdout += chunk));
    const [code] = (await once(child, "close")) as [number | null];
    return { stdout: fd === null ? stdout : readFileSync(file, "utf8"), code };
  } finally {
    if (fd !== null) closeSync(fd);
    rmSync(dir, { recursive: true, force: true });
  }
}

describe("JSON log lines", () => {
  it("after a quiet spell go out at once; those that follow closely, together, within the interval", async () => {
    const sink = recordingSink();
    const logger = pino({ level: "info", base: null }, new BatchedLines(sink));
    logger.info({ i: 0 }, "line");
    assert.equal(sink.writes.length, 1, "the first line is written at once");
    const written = sink.nextWrite();
    // The flush timer is unref'd (it must not keep a process alive): this keeps the test's alive.
    const keepAlive = setInterval(() => {}, 60_000);
    const start = performance.now();
    for (let i = 1; i <= 5; i++) logger.info({ i }, "line");
    const waiting = sink.writes.length;
    await written.finally(() => clearInterval(keepAlive));
    const waitedMs = performance.now() - start;
    assert.deepEqual(indexes(sink.writes.join("")), [0, 1, 2, 3, 4, 5], "every line, in order");
    if (waiting === 1) {
      // The usual case: the five came within the interval of the first line's write.
      assert.equal(sink.writes.length, 2, "the five lines leave as one write");
      // A timer may fire late on a busy machine, never early.
      assert.ok(waitedMs >= LOG_FLUSH_INTERVAL_MS - 1, `written after ${waitedMs} ms`);
    } else assert.ok(sink.writes.length <= 3, "a stall of the test itself split them once at most");
  });

  it("waiting leave with the first line logged after the interval, though the timer could not fire", () => {
    const sink = recordingSink();
    const logger = pino({ level: "info", base: null }, new BatchedLines(sink, 50));
    logger.info({ i: 0 }, "line");
    logger.info({ i: 1 }, "line");
    blockFor(60);
    logger.info({ i: 2 }, "line");
    assert.equal(sink.writes.length, 2, "no wait for the timer, which a blocked loop holds up");
    assert.deepEqual(indexes(sink.writes[0] as string), [0]);
    assert.deepEqual(indexes(sink.writes[1] as string), [1, 2]);
  });

  it("are written at once when a batch's worth waits, and flushSync writes the rest", () => {
    const sink = recordingSink();
    const lines = new BatchedLines(sink, LONG_MS);
    lines.write("first\n");
    assert.deepEqual(sink.writes, ["first\n"]);
    const line = `${"x".repeat(1023)}\n`;
    for (let i = 0; i < 64; i++) lines.write(line);
    assert.equal(sink.writes.length, 2, "64 KiB of lines leave without waiting for the timer");
    assert.equal(sink.writes[1], line.repeat(64));
    lines.write("last\n");
    assert.equal(sink.writes.length, 2);
    lines.flushSync();
    assert.deepEqual(sink.writes.slice(2), ["last\n"]);
    lines.flushSync();
    assert.equal(sink.writes.length, 3, "an empty flush writes nothing");
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
      assert.deepEqual(
        indexes(stdout),
        Array.from({ length: 1000 }, (_, i) => i),
        `${ending}: every line is on stdout, in order`,
      );
    }
  });

  it("flushLogs writes the waiting lines ahead of what the process writes next to stderr", async () => {
    // What a failing `taskqueue` command does (src/cli/main.ts) before it prints its error. The
    // second line waits (it follows the first closely); without the flush, the exit would write it
    // after the message.
    const { stdout } = await runScript(
      `const { createLogger, flushLogs } = await import(${JSON.stringify(LOG_MODULE)});
       const logger = createLogger("info", "taskqueue", "json");
       logger.info({ i: 0 }, "line");
       logger.info({ i: 1 }, "line");
       flushLogs();
       console.error("taskqueue: failed");
       process.exit(1);`,
      true,
    );
    const lines = stdout.trimEnd().split("\n");
    const waiting = lines.findIndex((l) => l.includes('"i":1'));
    const message = lines.indexOf("taskqueue: failed");
    assert.ok(waiting >= 0 && message >= 0, stdout);
    assert.ok(waiting < message, `the waiting line first:\n${stdout}`);
  });
});
