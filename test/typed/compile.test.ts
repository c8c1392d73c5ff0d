/**
 * Typed jobs at compile time (issue 13 item 1). This file is part of the build (`tsc -p
 * tsconfig.json`): each `@ts-expect-error` line must fail to compile, or the build fails with
 * "Unused '@ts-expect-error' directive"; the `expectTypeOf` lines pin the inferred types. The
 * `it` blocks only make sure the file ran; nothing here touches a database (every call sits in a
 * function that is never called).
 */
import assert from "node:assert/strict";
import { describe, it } from "node:test";
import { Type } from "@sinclair/typebox";
import { expectTypeOf } from "expect-type";
import { defineJob, defineJobs, type JobType, TaskQueue } from "../../src/index.js";

type Jobs = {
  send_email: { to: string; cc?: string[] };
  resize: JobType<{ url: string; width: number }, { bytes: number }>;
};

/** Never called: only compiled. */
function typedMap(queue: TaskQueue<Jobs>): void {
  queue.register("send_email", async (job) => {
    expectTypeOf(job.payload).toEqualTypeOf<{ to: string; cc?: string[] }>();
    expectTypeOf(job.type).toEqualTypeOf<"send_email">();
    return { delivered: true };
  });
  queue.register("resize", (job) => {
    expectTypeOf(job.payload.width).toBeNumber();
    return { bytes: job.payload.width * 2 };
  });
  // @ts-expect-error: the result of resize is { bytes: number }
  queue.register("resize", () => ({ bytes: "many" }));
  // @ts-expect-error: no such job type
  queue.register("send_emial", async () => undefined);
  // @ts-expect-error: the payload has no field `address`
  queue.register("send_email", async (job) => job.payload.address);
  // Sandboxed handlers stay allowed (their module is not typed).
  queue.register("resize", { sandbox: "process", module: "./resize.js" });

  void queue.addJob({ type: "send_email", payload: { to: "a@example.com" }, priority: 9 });
  void queue.addJobs([
    { type: "send_email", payload: { to: "a@example.com", cc: [] } },
    { type: "resize", payload: { url: "https://x/y.png", width: 100 } },
  ]);
  // @ts-expect-error: wrong type name
  void queue.addJob({ type: "send_emial", payload: { to: "a@example.com" } });
  // @ts-expect-error: wrong payload field type
  void queue.addJob({ type: "send_email", payload: { to: 42 } });
  // @ts-expect-error: the payload of resize, not of send_email
  void queue.addJob({ type: "send_email", payload: { url: "u", width: 1 } });
  // @ts-expect-error: a typed job needs its payload
  void queue.addJob({ type: "resize" });
  void queue.addJobs([
    { type: "send_email", payload: { to: "a" } },
    // @ts-expect-error: one bad element fails the batch (resize needs a width)
    { type: "resize", payload: { url: "u" } },
  ]);
  // @ts-expect-error: likewise the ids-only and reporting forms
  void queue.addJobIds([{ type: "nope", payload: {} }]);
  // @ts-expect-error: likewise
  void queue.addJobReporting({ type: "resize", payload: { url: 1, width: 1 } });
}

const catalog = defineJobs({
  send_email: defineJob(Type.Object({ to: Type.String() })),
  resize: defineJob(
    Type.Object({ url: Type.String(), width: Type.Integer() }),
    Type.Object({ bytes: Type.Integer() }),
  ),
});

/** Never called: only compiled. */
function typedCatalog(): void {
  const queue = new TaskQueue({ databaseUrl: "postgres://unused", jobs: catalog });
  expectTypeOf(queue).toEqualTypeOf<TaskQueue<typeof catalog.jobs>>();
  queue.register("resize", async (job) => {
    expectTypeOf(job.payload).toEqualTypeOf<{ url: string; width: number }>();
    return { bytes: 1 };
  });
  // @ts-expect-error: the result schema says bytes is an integer
  queue.register("resize", async () => ({ bytes: null }));
  void queue.addJob({ type: "send_email", payload: { to: "a@example.com" } });
  // @ts-expect-error: the catalog has no such type
  void queue.addJob({ type: "send_mail", payload: { to: "a@example.com" } });
  // @ts-expect-error: the schema says `to` is a string
  void queue.addJob({ type: "send_email", payload: { to: 1 } });
}

/** Never called: only compiled. */
function untyped(): void {
  // Without a map or catalog, everything that compiled before still compiles.
  const queue = new TaskQueue({ databaseUrl: "postgres://unused" });
  queue.register("anything", async (job, signal) => {
    expectTypeOf(job.payload).toEqualTypeOf<import("../../src/index.js").JsonValue>();
    return signal.aborted;
  });
  void queue.addJob({ type: "anything" });
  void queue.addJobs([{ type: "x", payload: [1, "two"] }]);
  // @ts-expect-error: still JSON only
  void queue.addJob({ type: "x", payload: () => 1 });
}

describe("typed jobs (compile time)", () => {
  it("compiled: the @ts-expect-error lines above are errors, the rest type-checks", () => {
    assert.equal(typeof typedMap, "function");
    assert.equal(typeof typedCatalog, "function");
    assert.equal(typeof untyped, "function");
  });
});
