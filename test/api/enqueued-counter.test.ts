/**
 * `taskqueue_jobs_enqueued_total` (schema version 15): derived at each scrape from the jobs still in
 * the queue and the completed, dead and cancelled counters, not counted by the insert trigger. It
 * must count every enqueue once and never fall as jobs move through their lifecycle.
 */
import assert from "node:assert/strict";
import { describe, it } from "node:test";
import { JobValidationError } from "../../src/errors.js";
import { DatabaseMetrics } from "../../src/metrics/database.js";
import type { OutOfStatementEvent } from "../../src/queue/ledger.js";
import { killJobs } from "../helpers/dead.js";
import { useApi } from "./support.js";

const TYPE = "counted";
const SERIES = `taskqueue_jobs_enqueued_total{type="${TYPE}"}`;

describe("taskqueue_jobs_enqueued_total", () => {
  const api = useApi();
  let metrics: DatabaseMetrics;
  /** Every value scraped so far, in order. */
  const seen: number[] = [];

  const enqueued = async (): Promise<number> => {
    metrics ??= new DatabaseMetrics(api.db.ledger, 30);
    const line = (await metrics.render()).split("\n").find((l) => l.startsWith(`${SERIES} `));
    const value = line === undefined ? 0 : Number(line.slice(SERIES.length + 1));
    seen.push(value);
    return value;
  };

  it("counts each job once through claim, completion, failure, death, cancel and replay", async () => {
    const session = await api.db.openLockSession("enqueued-counter");
    assert.equal(await enqueued(), 0);

    const jobs = await api.db.ledger.addJobs(
      Array.from({ length: 4 }, (_, i) => ({ type: TYPE, payload: { i } })),
    );
    assert.equal(await enqueued(), 4);

    // Claimed, running, completed; another failed and retried: still 4.
    const claimed = await session.claim([TYPE], 2);
    assert.equal(claimed.length, 2);
    assert.equal(await enqueued(), 4);
    const [done, retried] = claimed as [(typeof claimed)[0], (typeof claimed)[0]];
    await session.markRunning([{ id: done.id, attempt: done.attempt }]);
    assert.equal(await enqueued(), 4);
    await session.complete([{ id: done.id, attempt: done.attempt, resultJson: "1", runMs: 1 }]);
    assert.equal(await enqueued(), 4);
    const policy = { backoffBaseSeconds: 60, backoffMaxSeconds: 60, backoffJitter: false };
    await session.fail([{ id: retried.id, attempt: retried.attempt, error: "once", runMs: 1 }], policy);
    assert.equal(await enqueued(), 4);

    // A pending job cancelled, a claimed one cancelled: still 4.
    const pending = jobs.find((j) => j.id !== done.id && j.id !== retried.id) as (typeof jobs)[0];
    await api.db.ledger.cancelPendingJob(pending.id);
    assert.equal(await enqueued(), 4);
    const [held] = await session.claim([TYPE], 1);
    assert.ok(held);
    await api.db.ledger.cancelJob(held.id);
    assert.equal(await enqueued(), 4);

    // A job that dies: 5 enqueued, still 5 once dead; replayed, it counts again.
    const [dead] = await killJobs(api.db, session, [{ type: TYPE }]);
    assert.equal(await enqueued(), 5);
    await api.db.ledger.replayDeadLetter(dead as number);
    assert.equal(await enqueued(), 6);

    // An idempotent enqueue that finds its job creates nothing and counts nothing.
    await api.db.ledger.addJob({ type: TYPE, idempotencyKey: "k" });
    await api.db.ledger.addJob({ type: TYPE, idempotencyKey: "k" });
    assert.equal(await enqueued(), 7);

    for (let i = 1; i < seen.length; i++)
      assert.ok((seen[i] as number) >= (seen[i - 1] as number), `fell from ${seen[i - 1]} to ${seen[i]}`);
  });

  it("is not written by inserts: the insert trigger keeps no enqueued rows", async () => {
    await api.db.ledger.addJobs([{ type: TYPE }, { type: `${TYPE}_other` }]);
    const rows = await api.db.sql("SELECT * FROM job_totals WHERE event = 'enqueued'");
    assert.deepEqual(rows, []);
    const text = await metrics.render();
    assert.match(text, /^taskqueue_jobs_enqueued_total\{type="counted_other"\} 1$/m);
    // Every counter has a series for a type seen only among the live jobs.
    assert.match(text, /^taskqueue_jobs_completed_total\{type="counted_other"\} 0$/m);
  });

  it("cannot be moved through addJobEvents: only fenced and overdue, counts never negative", async () => {
    const totals = () => api.db.sql("SELECT event, shard, count FROM job_totals ORDER BY 1, 2");
    const before = await enqueued();
    const totalsBefore = await totals();
    for (const [event, count, field] of [
      ["dead", 1, "counts/0/event"],
      ["cancelled", 1, "counts/0/event"],
      ["enqueued", 1, "counts/0/event"],
      ["fenced", -1, "counts/0/count"],
      ["overdue", 0.5, "counts/0/count"],
    ] as const)
      await assert.rejects(
        api.db.ledger.addJobEvents([{ type: TYPE, event: event as OutOfStatementEvent, count }]),
        (error: unknown) =>
          error instanceof JobValidationError && error.problems.some((p) => p.field === field),
        `${event} ${count}`,
      );
    assert.deepEqual(await totals(), totalsBefore, "a refused call writes nothing");
    await api.db.ledger.addJobEvents([{ type: TYPE, event: "fenced", count: 2 }]);
    assert.equal(await enqueued(), before);
    assert.match(
      await metrics.render(),
      new RegExp(`^taskqueue_jobs_fenced_total\\{type="${TYPE}"\\} 2$`, "m"),
    );
  });
});
