/**
 * The retry paths' building blocks (shared/cases 02): the reconnect delay grows, is capped and
 * jittered; a repeated error is logged once, then as a count.
 */
import assert from "node:assert/strict";
import { describe, it } from "node:test";
import { pino } from "pino";
import { reconnectDelayMs } from "../../src/db/pool.js";
import { RepeatedLog } from "../../src/worker/repeat-log.js";

describe("reconnectDelayMs", () => {
  it("doubles from 100 ms up to its cap, times a jitter factor in [0.5, 1)", () => {
    assert.equal(
      reconnectDelayMs(0, 5000, () => 1),
      100,
    );
    assert.equal(
      reconnectDelayMs(3, 5000, () => 1),
      800,
    );
    assert.equal(
      reconnectDelayMs(10, 5000, () => 1),
      5000,
    );
    assert.equal(
      reconnectDelayMs(10_000, 5000, () => 1),
      5000,
      "no overflow for a huge attempt count",
    );
    assert.equal(
      reconnectDelayMs(3, 5000, () => 0),
      400,
    );
    const delays = new Set(Array.from({ length: 20 }, () => reconnectDelayMs(5)));
    assert.ok(delays.size > 1, "two workers failing together do not retry together");
    for (const delay of delays) assert.ok(delay >= 1600 && delay < 3200, `${delay}`);
  });
});

describe("RepeatedLog", () => {
  function logged(): { log: RepeatedLog; lines: Record<string, unknown>[] } {
    const lines: Record<string, unknown>[] = [];
    const logger = pino({ level: "info" }, { write: (line: string) => void lines.push(JSON.parse(line)) });
    return { log: new RepeatedLog(logger, 60_000), lines };
  }

  it("logs the first of each distinct error, counts the repeats, and sums them up when settled", () => {
    const { log, lines } = logged();
    const readOnly = Object.assign(new Error("cannot execute UPDATE in a read-only transaction"), {
      code: "25006",
    });
    for (let i = 0; i < 50; i++) log.log("error", { err: readOnly }, "claim failed");
    log.log("error", { err: new Error("connection refused") }, "claim failed");
    log.log("warn", { err: readOnly }, "heartbeat failed");
    assert.deepEqual(
      lines.map((l) => l.msg),
      ["claim failed", "claim failed", "heartbeat failed"],
      "one line per distinct (message, error)",
    );
    log.settle();
    assert.equal(lines.length, 4);
    assert.match(String(lines[3]?.msg), /^claim failed \(repeated 49 times in [\d.]+ s\)$/);
    assert.equal(lines[3]?.repeated, 49);
    log.log("error", { err: readOnly }, "claim failed");
    assert.equal(lines.length, 5, "after settle, the next failure is logged again");
  });

  it("writes a summary at most once per interval while failures go on", () => {
    const lines: Record<string, unknown>[] = [];
    const logger = pino({ level: "info" }, { write: (line: string) => void lines.push(JSON.parse(line)) });
    const log = new RepeatedLog(logger, 0);
    log.log("warn", {}, "lost");
    log.log("warn", {}, "lost");
    assert.equal(lines.length, 2);
    assert.match(String(lines[1]?.msg), /repeated 1 times/);
  });
});
