/**
 * The job's AbortSignal is made only for a handler that can see it (src/worker/signal-argument.ts):
 * - which handler functions count as certainly not seeing a second argument (a table);
 * - on real PostgreSQL, a handler that cannot see the signal runs its jobs without one being made;
 * - and every way a handler can reach the signal still gets it, aborted when its
 *   job is cancelled while it runs: `job.signal` in a one-parameter handler, the second argument
 *   of a rest-parameter wrapper, `arguments[1]` in a `function`, and the second parameter, which
 *   is the same object as `job.signal`.
 */
import assert from "node:assert/strict";
import { after, before, describe, it } from "node:test";
import { JobCancelledError } from "../../src/errors.js";
import type { HandlerJob } from "../../src/worker/registry.js";
import { seesSignalArgument } from "../../src/worker/signal-argument.js";
import { until } from "../fixtures/sandbox-worker.js";
import { createTestDb, type TestDb } from "../helpers/db.js";
import { startWorker } from "../helpers/worker.js";

type AnyHandler = (...args: never[]) => unknown;

/** A function written as source text (a shape TypeScript would rewrite, or would not accept). */
const fromSource = (text: string): AnyHandler => new Function(`return (${text});`)() as AnyHandler;

describe("why a plain function is never spared: what it calls can read its arguments", () => {
  it("a sloppy helper reads the handler's second argument through .caller", () => {
    const handler = fromSource(
      "function handler(job) { return (function peek() { return peek.caller['argu' + 'ments'][1]; })(); }",
    );
    assert.equal((handler as (job: unknown, signal: unknown) => unknown)({}, "the signal"), "the signal");
    assert.equal(seesSignalArgument(handler), true);
  });
});

describe("seesSignalArgument: only a handler that certainly cannot see a second argument is spared the signal", () => {
  const spared: [string, AnyHandler][] = [
    ["an arrow of one name", (job: unknown) => job],
    ["an arrow without parentheses", fromSource("job => job")],
    ["an async arrow", async (job: unknown) => job],
    ["an async arrow without parentheses", fromSource("async job => job")],
    ["an arrow of no parameter", () => null],
    ["an arrow whose body has escapes", fromSource(String.raw`(job) => "\u0061rguments\n"`)],
    ["an async function", fromSource("async function named(job) { return job; }")],
    ["a method", fromSource("{ run(job) { return job; } }.run")],
    ["an async method", fromSource("{ async run(job) { return job; } }.run")],
    [
      "an arrow that reads its enclosing function's arguments",
      fromSource("(function () { return (job) => arguments.length; })()"),
    ],
  ];
  const given: [string, AnyHandler][] = [
    ["two parameters", (job: unknown, signal: unknown) => [job, signal]],
    ["rest parameters", (...args: unknown[]) => args],
    ["a default second parameter (length 1)", fromSource("(job, signal = null) => signal")],
    ["a destructured parameter", ({ id }: { id: number }) => id],
    // In sloppy code any function it calls can read `handler.arguments` through `.caller`.
    [
      "a plain function, even one that says nothing of its arguments",
      fromSource("function named(job) { return job; }"),
    ],
    ["a function that reads arguments", fromSource("async function (job) { return arguments[1]; }")],
    ["a method that reads arguments", fromSource("{ run(job) { return arguments[1]; } }.run")],
    ["an escaped arguments", fromSource(String.raw`async function (job) { return \u0061rguments[1]; }`)],
    ["an escaped eval", fromSource(String.raw`{ run(job) { return \u0065val("argu" + "ments[1]"); } }.run`)],
    ["a function that calls eval", fromSource("async function (job) { return eval('arguments[1]'); }")],
    ["a bound function", ((job: unknown) => job).bind(null)],
    ["a generator function", fromSource("function* (job) { yield job; }")],
    [
      "a getter",
      fromSource('Object.getOwnPropertyDescriptor({ get run() { return arguments[0]; } }, "run").get'),
    ],
    ["a comment in the parameter list", fromSource("(job /* the job */) => job")],
    ["a proxy", new Proxy((job: unknown) => job, {})],
    [
      "a function whose length throws",
      Object.defineProperty((job: unknown) => job, "length", {
        get() {
          throw new Error("length");
        },
      }),
    ],
  ];
  for (const [name, handler] of spared)
    it(`spared: ${name}`, () => assert.equal(seesSignalArgument(handler), false, String(handler)));
  for (const [name, handler] of given)
    it(`given the signal: ${name}`, () => assert.equal(seesSignalArgument(handler), true, String(handler)));
});

describe("every way a handler reaches its signal still aborts on cancel", () => {
  let db: TestDb;
  before(async () => {
    db = await createTestDb({ backoffBaseSeconds: 0 });
  });
  after(async () => {
    await db.drop();
  });

  /** How many AbortSignals were made (first reads of a controller's `signal`) while `jobs` jobs of `handler` ran. */
  async function signalsMadeFor(
    type: string,
    jobs: number,
    handler: (ran: () => void) => AnyHandler,
  ): Promise<number> {
    const descriptor = Object.getOwnPropertyDescriptor(
      AbortController.prototype,
      "signal",
    ) as PropertyDescriptor;
    const read = descriptor.get as (this: AbortController) => AbortSignal;
    const seen = new WeakSet<AbortController>();
    let made = 0;
    let ran = 0;
    let allRan: () => void = () => undefined;
    const done = new Promise<void>((resolve) => {
      allRan = resolve;
    });
    const worker = await startWorker(db, {
      builtins: false,
      handlers: {
        [type]: handler(() => {
          if (++ran === jobs) allRan();
        }) as (job: HandlerJob, signal: AbortSignal) => unknown,
      },
    });
    Object.defineProperty(AbortController.prototype, "signal", {
      ...descriptor,
      get(this: AbortController) {
        if (!seen.has(this)) {
          seen.add(this);
          made++;
        }
        return read.call(this);
      },
    });
    try {
      await db.ledger.addJobs(Array.from({ length: jobs }, () => ({ type })));
      await done;
      return made;
    } finally {
      Object.defineProperty(AbortController.prototype, "signal", descriptor);
      await worker.stop();
    }
  }

  it("a handler of one parameter that never reads job.signal runs its jobs without a signal made", async () => {
    const spared = await signalsMadeFor("no_signal", 50, (ran) => (_job: HandlerJob) => {
      ran();
      return null;
    });
    const given = await signalsMadeFor(
      "with_signal",
      50,
      (ran) => (_job: HandlerJob, _signal: AbortSignal) => {
        ran();
        return null;
      },
    );
    assert.ok(given >= 50, `a handler that takes the signal gets one per job: ${given} made`);
    assert.ok(spared < 5, `a handler that cannot see it gets none: ${spared} made for 50 jobs`);
  });

  /** Runs one job of a handler that hands over the signal it found, cancels it, and returns that signal. */
  async function signalOfCancelled(
    type: string,
    handler: (found: (signal: unknown) => Promise<void>) => AnyHandler,
  ): Promise<AbortSignal> {
    let found: (signal: unknown) => void = () => undefined;
    const signalFound = new Promise<unknown>((resolve) => {
      found = resolve;
    });
    const wait = async (signal: unknown): Promise<void> => {
      found(signal);
      if (!(signal instanceof AbortSignal)) return;
      await new Promise<void>((resolve) => signal.addEventListener("abort", () => resolve(), { once: true }));
    };
    const worker = await startWorker(db, {
      builtins: false,
      handlers: { [type]: handler(wait) as (job: HandlerJob, signal: AbortSignal) => unknown },
    });
    try {
      const job = await db.ledger.addJob({ type });
      const signal = await signalFound;
      assert.ok(
        signal instanceof AbortSignal,
        `${type}: the handler found an AbortSignal, not ${String(signal)}`,
      );
      assert.equal(signal.aborted, false);
      await until(async () => (await db.ledger.getJob(job.id))?.status === "running", "the running mark");
      await db.ledger.cancelJob(job.id);
      await until(async () => signal.aborted, `${type}: the signal aborted`);
      assert.ok(signal.reason instanceof JobCancelledError, `${type}: ${String(signal.reason)}`);
      return signal;
    } finally {
      await worker.stop();
    }
  }

  it("job.signal in a handler of one parameter", async () => {
    await signalOfCancelled("one_param", (wait) => (job: HandlerJob) => wait(job.signal));
  });

  it("the second argument of a rest-parameter wrapper", async () => {
    await signalOfCancelled(
      "rest_params",
      (wait) =>
        (...args: unknown[]) =>
          wait(args[1]),
    );
  });

  it("arguments[1] in a function of one parameter", async () => {
    await signalOfCancelled(
      "arguments_read",
      (wait) =>
        function (_job: HandlerJob) {
          // biome-ignore lint/complexity/noArguments: the case under test
          return wait(arguments[1]);
        },
    );
  });

  it("the second parameter is the job's signal", async () => {
    let same: boolean | null = null;
    await signalOfCancelled("two_params", (wait) => (job: HandlerJob, signal: AbortSignal) => {
      same = job.signal === signal;
      return wait(signal);
    });
    assert.equal(same, true);
  });
});
