/** The eight built-in handlers (DESIGN.md §7) on known values, and bad payloads failing the job. */
import assert from "node:assert/strict";
import { createHash } from "node:crypto";
import { after, before, describe, it } from "node:test";
import { builtinHandlers } from "../../src/worker/handlers/index.js";
import { collatz, integerSquareRoot, isPrime, sha256Chain } from "../../src/worker/handlers/math.js";
import type { HandlerJob } from "../../src/worker/registry.js";
import type { Worker } from "../../src/worker/worker.js";
import { createTestDb, type TestDb } from "../helpers/db.js";
import { waitForEvent } from "../helpers/events.js";
import { startWorker } from "../helpers/worker.js";

const signal = new AbortController().signal;
const job = (type: string, payload: HandlerJob["payload"], attempt = 0): HandlerJob => ({
  id: 1,
  type,
  payload,
  attempt,
  maxRetries: 3,
  signal,
  progress: () => Promise.resolve(),
  complete: () => Promise.resolve(),
});

describe("is_prime: trial division over 2, 3, 5, 7, ... up to floor(sqrt(n))", () => {
  it("97 is prime after 5 candidates (2, 3, 5, 7, 9)", () => {
    assert.deepEqual(isPrime({ n: 97 }), { n: 97, is_prime: true, divisors_checked: 5 });
  });
  it("n < 2 is not prime, 0 candidates", () => {
    assert.deepEqual(isPrime({ n: 0 }), { n: 0, is_prime: false, divisors_checked: 0 });
    assert.deepEqual(isPrime({ n: 1 }), { n: 1, is_prime: false, divisors_checked: 0 });
  });
  it("2 and 3 are prime with no candidate to try", () => {
    assert.deepEqual(isPrime({ n: 2 }), { n: 2, is_prime: true, divisors_checked: 0 });
    assert.deepEqual(isPrime({ n: 3 }), { n: 3, is_prime: true, divisors_checked: 0 });
  });
  it("stops at the first divisor: 9 after 2 candidates, 100 after 1", () => {
    assert.deepEqual(isPrime({ n: 9 }), { n: 9, is_prime: false, divisors_checked: 2 });
    assert.deepEqual(isPrime({ n: 100 }), { n: 100, is_prime: false, divisors_checked: 1 });
  });
  it("1,000,000,007 is prime after 15,811 candidates", () => {
    assert.deepEqual(isPrime({ n: 1_000_000_007 }), {
      n: 1_000_000_007,
      is_prime: true,
      divisors_checked: 15_811,
    });
  });
  it("2^53 - 1 = 6361 x 69431 x 20394401 stops at 6361", () => {
    assert.deepEqual(isPrime({ n: 2 ** 53 - 1 }), {
      n: 2 ** 53 - 1,
      is_prime: false,
      divisors_checked: 3181,
    });
  });
  it("integer square roots are exact near 2^53", () => {
    for (const k of [94_906_265, 94_906_264, 67_108_864]) {
      assert.equal(integerSquareRoot(k * k), k);
      assert.equal(integerSquareRoot(k * k - 1), k - 1);
    }
  });
});

describe("collatz", () => {
  it("27 takes 111 steps with checksum 101440", () => {
    assert.deepEqual(collatz({ n: 27 }), { n: 27, steps: 111, checksum: 101440 });
  });
  it("1 takes 0 steps; its checksum is 1", () => {
    assert.deepEqual(collatz({ n: 1 }), { n: 1, steps: 0, checksum: 1 });
  });
  it("6 -> 3 -> 10 -> 5 -> 16 -> 8 -> 4 -> 2 -> 1: 8 steps, sum 55", () => {
    assert.deepEqual(collatz({ n: 6 }), { n: 6, steps: 8, checksum: 55 });
  });
  it("is exact beyond 2^53 intermediate terms (checksum modulo 1,000,000,007)", () => {
    const n = 2 ** 53 - 1;
    let term = BigInt(n);
    let steps = 0;
    let sum = term;
    while (term !== 1n) {
      term = term % 2n === 0n ? term / 2n : 3n * term + 1n;
      steps++;
      sum += term;
    }
    assert.deepEqual(collatz({ n }), { n, steps, checksum: Number(sum % 1_000_000_007n) });
  });
});

describe("sha256_chain", () => {
  it('"abc", 1 round is the FIPS 180-2 test vector', () => {
    assert.deepEqual(sha256Chain({ seed: "abc", rounds: 1 }), {
      digest: "ba7816bf8f01cfea414140de5dae2223b00361a396177a9cb410ff61f20015ad",
    });
  });
  it("chains over the raw 32-byte digest, not its hex", () => {
    const once = Buffer.from(sha256Chain({ seed: "abc", rounds: 1 }).digest, "hex");
    assert.equal(
      sha256Chain({ seed: "abc", rounds: 2 }).digest,
      createHash("sha256").update(once).digest("hex"),
    );
  });
  it("hashes the UTF-8 bytes of the seed", () => {
    assert.equal(
      sha256Chain({ seed: "héllo ✓", rounds: 1 }).digest,
      createHash("sha256").update("héllo ✓", "utf8").digest("hex"),
    );
  });
});

describe("the simple handlers", () => {
  it("noop returns null", async () => {
    assert.equal(await builtinHandlers.noop?.(job("noop", { any: 1 }), signal), null);
  });
  it("echo returns the payload unchanged", async () => {
    const payload = { a: [1, "two", { three: null }] };
    assert.deepEqual(await builtinHandlers.echo?.(job("echo", payload), signal), payload);
  });
  it("always_fail always throws", async () => {
    await assert.rejects(
      async () => builtinHandlers.always_fail?.(job("always_fail", {}), signal),
      /failed on purpose/,
    );
  });
  it("flaky throws on attempts 0 and 1 and succeeds on attempt 2", async () => {
    for (const attempt of [0, 1])
      await assert.rejects(async () => builtinHandlers.flaky?.(job("flaky", {}, attempt), signal));
    assert.deepEqual(await builtinHandlers.flaky?.(job("flaky", {}, 2), signal), { succeeded_on_attempt: 2 });
  });
  it("slow sleeps and reports it", async () => {
    assert.deepEqual(await builtinHandlers.slow?.(job("slow", { sleep_seconds: 0.01 }), signal), {
      slept_seconds: 0.01,
    });
  });
  it("slow stops early on abort", async () => {
    const controller = new AbortController();
    const started = performance.now();
    const running = builtinHandlers.slow?.(job("slow", { sleep_seconds: 60 }), controller.signal);
    controller.abort();
    await assert.rejects(async () => running, /aborted/);
    assert.ok(performance.now() - started < 1000);
  });
});

describe("through a worker", () => {
  let db: TestDb;
  let worker: Worker;
  before(async () => {
    db = await createTestDb();
    worker = await startWorker(db);
  });
  after(async () => {
    await worker.stop();
    await db.drop();
  });

  it("POSTed collatz 27 is done with {n: 27, steps: 111, checksum: 101440}", async () => {
    const done = waitForEvent<[{ id: number }]>(worker, "job:completed", (e) => e.id === queued.id);
    const queued = await db.ledger.addJob({ type: "collatz", payload: { n: 27 } });
    await done;
    const finished = await db.ledger.getJob(queued.id);
    assert.equal(finished?.status, "done");
    assert.deepEqual(finished?.result, { n: 27, steps: 111, checksum: 101440 });
    assert.ok(finished?.startedAt && finished.completedAt && finished.startedAt <= finished.completedAt);
  });

  const badPayloads: [string, unknown, RegExp][] = [
    ["is_prime", { n: -1 }, /is_prime: payload\.n must be an integer from 0/],
    ["is_prime", { n: "97" }, /payload\.n must be an integer/],
    ["is_prime", [97], /payload must be an object/],
    ["collatz", { n: 0 }, /collatz: payload\.n must be an integer from 1/],
    ["collatz", { n: 2 ** 53 }, /payload\.n must be an integer/],
    ["sha256_chain", { seed: 5, rounds: 1 }, /payload\.seed must be a string/],
    ["sha256_chain", { seed: "a", rounds: 0 }, /payload\.rounds must be an integer from 1 to 10000000/],
    ["slow", { sleep_seconds: -1 }, /payload\.sleep_seconds must be a number from 0 to 3600/],
    ["slow", {}, /payload\.sleep_seconds/],
  ];
  for (const [type, payload, message] of badPayloads) {
    it(`${type} with payload ${JSON.stringify(payload)} fails the job with a clear error`, async () => {
      const failed = waitForEvent<[{ id: number; status: string }]>(
        worker,
        "job:failed",
        (e) => e.id === queued.id,
      );
      const queued = await db.ledger.addJob({ type, payload: payload as never, maxRetries: 0 });
      const [event] = await failed;
      assert.equal(event.status, "dead");
      const finished = await db.ledger.getJob(queued.id);
      assert.equal(finished?.status, "dead");
      assert.match(finished?.error ?? "", message);
    });
  }

  it("a handler result that cannot be stored fails that job alone, not its batch", async () => {
    const special = await startWorker(db, {
      builtins: false,
      handlers: { nul_result: (j) => (j.payload === "bad" ? { text: "a\u0000b" } : { text: "fine" }) },
    });
    try {
      const failed = waitForEvent<[{ id: number; status: string }]>(
        special,
        "job:failed",
        (e) => e.id === bad?.id,
      );
      const succeeded = waitForEvent<[{ id: number }]>(special, "job:completed", (e) => e.id === good?.id);
      const [bad, good] = await db.ledger.addJobs([
        { type: "nul_result", payload: "bad", maxRetries: 0 },
        { type: "nul_result", payload: "good", maxRetries: 0 },
      ]);
      if (!bad || !good) throw new Error("enqueue failed");
      await Promise.all([failed, succeeded]);
      assert.match(
        (await db.ledger.getJob(bad.id))?.error ?? "",
        /handler result cannot be stored: result\/text contains a NUL/,
      );
      assert.deepEqual((await db.ledger.getJob(good.id))?.result, { text: "fine" });
    } finally {
      await special.stop();
    }
  });

  it("a result nested thousands of levels deep, or a thrown value with no message, fails its job and nothing else", async () => {
    const nested = (depth: number): unknown => {
      let value: unknown = null;
      for (let i = 0; i < depth; i++) value = [value];
      return value;
    };
    const special = await startWorker(db, {
      builtins: false,
      handlers: {
        deep: () => nested(5000) as never,
        shapeless: () => {
          throw Object.create(null);
        },
        fine: () => ({ ok: true }),
      },
    });
    try {
      const failures = new Map<number, string>();
      const bothFailed = new Promise<void>((resolve) =>
        special.on("job:failed", (e) => {
          failures.set(e.id, e.error);
          if (failures.size === 2) resolve();
        }),
      );
      const [deep, shapeless] = await db.ledger.addJobs([
        { type: "deep", maxRetries: 0 },
        { type: "shapeless", maxRetries: 0 },
      ]);
      if (!deep || !shapeless) throw new Error("enqueue failed");
      await bothFailed;
      assert.match(failures.get(deep.id) ?? "", /result nests arrays and objects deeper than 1000 levels/);
      assert.match(failures.get(shapeless.id) ?? "", /cannot be turned into a message/);
      // The worker lives on.
      const done = waitForEvent<[{ id: number }]>(special, "job:completed", (e) => e.id === after?.id);
      const after = await db.ledger.addJob({ type: "fine" });
      await done;
      assert.deepEqual((await db.ledger.getJob(after.id))?.result, { ok: true });
    } finally {
      await special.stop();
    }
  });
});
