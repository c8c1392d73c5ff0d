/**
 * Cron schedules (issue 13, item 2) through the library and the ledger: persisted, listed,
 * replaced and removed; refused with the bad field named; every tick one job however many passes
 * race (compare and set, and the tick's unique key on its own); catch-up after a downtime up to
 * the limit, and misfires skipped without it; daylight saving transitions follow the zone
 * (computed for Europe/Berlin's 2026 dates, not waited for).
 */
import assert from "node:assert/strict";
import { after, before, describe, it } from "node:test";
import { JobValidationError, ScheduleNotFoundError } from "../../src/errors.js";
import { dueTicks, nextTick } from "../../src/queue/cron.js";
import { Ledger } from "../../src/queue/ledger.js";
import { createTestDb, type TestDb } from "../helpers/db.js";

let db: TestDb;
before(async () => {
  db = await createTestDb();
});
after(async () => {
  await db.drop();
});

const POLICY = { scheduleCatchUpLimit: 100, scheduleMisfireSeconds: 60 };

/** Jobs of a schedule: their keys' ticks, oldest first. */
async function ticksOf(name: string): Promise<string[]> {
  const rows = await db.sql<{ key: string }>(
    "SELECT idempotency_key AS key FROM jobs WHERE idempotency_key LIKE $1 ORDER BY idempotency_key",
    [`schedule:${name}@%`],
  );
  return rows.map((r) => r.key.slice(`schedule:${name}@`.length));
}

/** Moves a schedule's place back by `seconds` (as if every process had been down that long). */
const rewind = (name: string, seconds: number) =>
  db.sql("UPDATE schedules SET last_tick = last_tick - make_interval(secs => $2) WHERE name = $1", [
    name,
    seconds,
  ]);

/** Asserts that ISO times are consecutive whole seconds. */
function assertConsecutiveSeconds(ticks: string[]): void {
  for (let i = 1; i < ticks.length; i++)
    assert.equal(Date.parse(ticks[i] as string) - Date.parse(ticks[i - 1] as string), 1000, `${ticks[i]}`);
}

describe("persisted, listed, replaced, removed", () => {
  it("schedule → get → list → replace → unschedule", async () => {
    const { schedule, created } = await db.ledger.schedule("nightly-report", "30 2 * * *", {
      type: "report",
      payload: { kind: "nightly" },
      timezone: "Europe/Berlin",
      priority: 7,
    });
    assert.equal(created, true);
    assert.deepEqual(
      [schedule.name, schedule.cron, schedule.timezone, schedule.type, schedule.payload, schedule.priority],
      ["nightly-report", "30 2 * * *", "Europe/Berlin", "report", { kind: "nightly" }, 7],
    );
    assert.deepEqual([schedule.maxRetries, schedule.catchUp], [3, false]);
    assert.ok(schedule.nextTickAt && schedule.nextTickAt > schedule.lastTick);
    // 02:30 in Berlin is 00:30 or 01:30 UTC.
    assert.match(schedule.nextTickAt?.toISOString() ?? "", /T0[01]:30:00\.000Z$/);
    assert.deepEqual(await db.ledger.getSchedule("nightly-report"), schedule);

    const same = await db.ledger.schedule("nightly-report", "30 2 * * *", {
      type: "report",
      timezone: "Europe/Berlin",
      catchUp: true,
    });
    assert.equal(same.created, false);
    assert.equal(same.schedule.lastTick.getTime(), schedule.lastTick.getTime(), "same cron keeps its place");
    assert.deepEqual([same.schedule.payload, same.schedule.catchUp, same.schedule.priority], [{}, true, 5]);
    await rewind("nightly-report", 3600);
    const changed = await db.ledger.schedule("nightly-report", "0 3 * * *", { type: "report" });
    assert.ok(changed.schedule.lastTick > schedule.lastTick, "a new cron starts now");
    assert.equal(changed.schedule.timezone, "UTC");

    await db.ledger.schedule("a-first", "* * * * *", { type: "noop" });
    assert.deepEqual(
      (await db.ledger.listSchedules())
        .map((s) => s.name)
        .filter((n) => n === "a-first" || n === "nightly-report"),
      ["a-first", "nightly-report"],
    );
    assert.deepEqual(
      (await db.ledger.listSchedules({ limit: 1 })).map((s) => s.name),
      [(await db.ledger.listSchedules())[0]?.name],
    );
    const removed = await db.ledger.unschedule("nightly-report");
    assert.equal(removed.cron, "0 3 * * *");
    assert.equal(await db.ledger.getSchedule("nightly-report"), null);
    await assert.rejects(db.ledger.unschedule("nightly-report"), ScheduleNotFoundError);
    await db.ledger.unschedule("a-first");
  });

  it("refuses bad input naming each field, and writes nothing", async () => {
    const fields = async (run: () => Promise<unknown>) => {
      const error = await run().then(
        () => assert.fail("accepted"),
        (e: unknown) => e,
      );
      assert.ok(error instanceof JobValidationError, String(error));
      return error.problems.map((p) => p.field).sort();
    };
    assert.deepEqual(await fields(() => db.ledger.schedule("x", "61 * * * *", { type: "t" })), ["cron"]);
    assert.deepEqual(await fields(() => db.ledger.schedule("x", "* * * * * * *", { type: "t" })), ["cron"]);
    assert.deepEqual(await fields(() => db.ledger.schedule("x", "0 0 30 2 *", { type: "t" })), ["cron"]);
    assert.deepEqual(
      await fields(() => db.ledger.schedule("x", "* * * * *", { type: "t", timezone: "Mars/Olympus" })),
      ["timezone"],
    );
    assert.deepEqual(await fields(() => db.ledger.schedule("bad name", "* * * * *", { type: "t" })), [
      "name",
    ]);
    assert.deepEqual(
      await fields(() =>
        db.ledger.schedule("x", "* * * * *", { type: "", priority: 11, catchUp: "yes" } as never, "snake"),
      ),
      ["catch_up", "priority", "type"],
    );
    assert.deepEqual(
      await fields(() => db.ledger.schedule("x", "* * * * *", { type: "t", prority: 1 } as never)),
      ["prority"],
    );
    const restricted = new Ledger(db.pool, db.schema, {
      maxPendingJobs: 0,
      maxPendingJobsPerType: 0,
      allowedJobTypes: ["noop"],
    });
    assert.deepEqual(await fields(() => restricted.schedule("x", "* * * * *", { type: "echo" })), ["type"]);
    assert.equal(await db.ledger.getSchedule("x"), null);
  });
});

describe("one job per tick", () => {
  it("a tick's job: the schedule's type, payload and options, keyed by schedule and tick, due at once", async () => {
    await db.ledger.schedule("job-shape", "* * * * * *", {
      type: "shape",
      payload: { n: 1 },
      priority: 9,
      maxRetries: 0,
    });
    await rewind("job-shape", 3);
    const report = await db.ledger.runSchedulePass(POLICY);
    const ticks = await ticksOf("job-shape");
    assert.ok(ticks.length >= 3 && ticks.length <= 4, ticks.join());
    assertConsecutiveSeconds(ticks);
    const job = await db.ledger.getJob(report.enqueuedJobIds.at(-1) as number);
    assert.deepEqual(
      [job?.type, job?.payload, job?.priority, job?.maxRetries, job?.status],
      ["shape", { n: 1 }, 9, 0, "pending"],
    );
    assert.equal(job?.idempotencyKey, `schedule:job-shape@${ticks.at(-1)}`);
    assert.ok(report.msUntilNextTick !== null && report.msUntilNextTick <= 1000, `${report.msUntilNextTick}`);
    // An enqueue of the same body under the tick's key, run at the tick, answers the tick's job.
    const again = await db.ledger.addJobReporting({
      type: "shape",
      payload: { n: 1 },
      priority: 9,
      maxRetries: 0,
      runAt: ticks.at(-1) as string,
      idempotencyKey: job?.idempotencyKey as string,
    });
    assert.deepEqual([again.created, again.job.id], [false, job?.id]);
    await db.ledger.unschedule("job-shape");
  });

  it("eight passes racing enqueue each tick once", async () => {
    await db.ledger.schedule("race", "* * * * * *", { type: "race", catchUp: true });
    await rewind("race", 30);
    const reports = await Promise.all(Array.from({ length: 8 }, () => db.ledger.runSchedulePass(POLICY)));
    const ticks = await ticksOf("race");
    assert.ok(ticks.length >= 30 && ticks.length <= 31, `${ticks.length}`);
    assert.equal(new Set(ticks).size, ticks.length);
    assertConsecutiveSeconds(ticks);
    const ids = reports.flatMap((r) => r.enqueuedJobIds);
    assert.equal(new Set(ids).size, ids.length, "no job reported twice");
    await db.ledger.unschedule("race");
  });

  it("the unique key alone refuses a tick's second job when the schedule's place is lost", async () => {
    await db.ledger.schedule("replay", "* * * * * *", { type: "replay", catchUp: true });
    await rewind("replay", 5);
    await db.ledger.runSchedulePass(POLICY);
    const first = await ticksOf("replay");
    // As if the compare and set had been defeated: the place moves back over ticks already enqueued.
    await rewind("replay", 5);
    await db.ledger.runSchedulePass(POLICY);
    const second = await ticksOf("replay");
    assert.equal(new Set(second).size, second.length, "one job per tick");
    assert.deepEqual(second.slice(0, first.length), first);
    assertConsecutiveSeconds(second);
    await db.ledger.unschedule("replay");
  });
});

describe("downtime: catch-up and misfires", () => {
  it("with catch-up, a pass after a downtime enqueues the latest SCHEDULE_CATCH_UP_LIMIT missed ticks", async () => {
    await db.ledger.schedule("catch", "* * * * * *", { type: "catch", catchUp: true });
    await rewind("catch", 600);
    const report = await db.ledger.runSchedulePass({ scheduleCatchUpLimit: 25, scheduleMisfireSeconds: 1 });
    const ticks = await ticksOf("catch");
    assert.equal(ticks.length, 25);
    assertConsecutiveSeconds(ticks);
    assert.ok((report.skippedTicks.catch ?? 0) >= 1, "the older ticks are skipped");
    const schedule = await db.ledger.getSchedule("catch");
    assert.equal(schedule?.lastTick.toISOString(), ticks.at(-1), "the place moved to the latest tick");
    await db.ledger.runSchedulePass({ scheduleCatchUpLimit: 25, scheduleMisfireSeconds: 1 });
    assert.ok((await ticksOf("catch")).length <= 27, "the skipped ticks do not come back");
    await db.ledger.unschedule("catch");
  });

  it("without catch-up, only ticks within SCHEDULE_MISFIRE_SECONDS fire", async () => {
    await db.ledger.schedule("misfire", "* * * * * *", { type: "misfire" });
    await rewind("misfire", 600);
    const report = await db.ledger.runSchedulePass({ scheduleCatchUpLimit: 100, scheduleMisfireSeconds: 5 });
    const ticks = await ticksOf("misfire");
    assert.ok(ticks.length >= 5 && ticks.length <= 6, ticks.join());
    assertConsecutiveSeconds(ticks);
    assert.ok((report.skippedTicks.misfire ?? 0) >= 90);
    await db.ledger.unschedule("misfire");
  });

  it("the catch-up limit bounds the work however long the downtime (a year of seconds)", () => {
    const started = performance.now();
    const due = dueTicks("* * * * * *", "UTC", {
      lastTick: new Date("2025-01-01T00:00:00Z"),
      now: new Date("2026-01-01T00:00:00.500Z"),
      catchUp: true,
      limit: 100,
      misfireSeconds: 60,
    });
    assert.equal(due.ticks.length, 100);
    assert.equal(due.ticks.at(-1)?.toISOString(), "2026-01-01T00:00:00.000Z");
    assert.equal(due.latest?.toISOString(), "2026-01-01T00:00:00.000Z");
    assert.ok(performance.now() - started < 1000);
  });
});

describe("daylight saving transitions follow the zone (Europe/Berlin, 2026)", () => {
  /** Every tick after `from` up to `to` (catch-up, no limit to speak of). */
  const ticks = (cron: string, from: string, to: string) =>
    dueTicks(cron, "Europe/Berlin", {
      lastTick: new Date(from),
      now: new Date(to),
      catchUp: true,
      limit: 1000,
      misfireSeconds: 0,
    }).ticks.map((t) => t.toISOString());

  it("spring forward (29 March, 02:00 → 03:00): a daily 02:30 fires at 03:00 local, the same day", () => {
    assert.deepEqual(ticks("30 2 * * *", "2026-03-27T12:00:00Z", "2026-03-30T12:00:00Z"), [
      "2026-03-28T01:30:00.000Z", // 02:30 CET
      "2026-03-29T01:00:00.000Z", // 02:30 does not exist: 03:00 CEST
      "2026-03-30T00:30:00.000Z", // 02:30 CEST
    ]);
    // A daily 09:00 stays at 09:00 local: 08:00 UTC before, 07:00 UTC after.
    assert.deepEqual(ticks("0 9 * * *", "2026-03-28T00:00:00Z", "2026-03-30T00:00:00Z"), [
      "2026-03-28T08:00:00.000Z",
      "2026-03-29T07:00:00.000Z",
    ]);
  });

  it("spring forward: an hourly schedule fires 23 times on the short day", () => {
    const day = ticks("0 * * * *", "2026-03-28T22:59:59Z", "2026-03-29T21:59:59Z");
    assert.equal(day.length, 23);
    assert.ok(day.includes("2026-03-29T00:00:00.000Z") && day.includes("2026-03-29T01:00:00.000Z"));
  });

  it("fall back (25 October, 03:00 → 02:00): a daily 02:30 fires once; an hourly one 25 times", () => {
    assert.deepEqual(ticks("30 2 * * *", "2026-10-24T12:00:00Z", "2026-10-26T12:00:00Z"), [
      "2026-10-25T00:30:00.000Z", // the first 02:30 (CEST); the repeated one (CET) does not fire
      "2026-10-26T01:30:00.000Z", // 02:30 CET
    ]);
    const day = ticks("0 * * * *", "2026-10-24T21:59:59Z", "2026-10-25T22:59:59Z");
    assert.equal(day.length, 25);
    // Both 02:00s: 00:00 UTC (CEST) and 01:00 UTC (CET).
    assert.ok(day.includes("2026-10-25T00:00:00.000Z") && day.includes("2026-10-25T01:00:00.000Z"));
  });

  it("the same expression in UTC does not move", () => {
    assert.equal(
      nextTick("30 2 * * *", "UTC", new Date("2026-03-29T00:00:00Z"))?.toISOString(),
      "2026-03-29T02:30:00.000Z",
    );
  });
});
