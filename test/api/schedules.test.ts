/**
 * /schedules (issue 13, item 2) through the HTTP API: PUT creates (201) or replaces (200), GET
 * reads and lists, DELETE removes (404 after); bad input answers 422 naming each field, in the
 * API's spelling; the routes are in the OpenAPI document. A tick's job comes from a scheduler
 * pass, as a worker process runs it.
 */
import assert from "node:assert/strict";
import { describe, it } from "node:test";
import { assertProblem, JSON_HEADERS, useApi } from "./support.js";

const api = useApi();

const put = (name: string, body: unknown) =>
  api.app.inject({
    method: "PUT",
    url: `/schedules/${name}`,
    headers: JSON_HEADERS,
    payload: JSON.stringify(body),
  });

describe("/schedules", () => {
  it("PUT creates then replaces, GET reads and lists, DELETE removes", async () => {
    const created = await put("every-second", {
      cron: "* * * * * *",
      type: "tick",
      payload: { from: "api" },
      timezone: "Europe/Berlin",
      max_retries: 0,
      catch_up: true,
    });
    assert.equal(created.statusCode, 201, created.body);
    const body = created.json();
    assert.deepEqual(
      [
        body.name,
        body.cron,
        body.type,
        body.payload,
        body.timezone,
        body.priority,
        body.max_retries,
        body.catch_up,
      ],
      ["every-second", "* * * * * *", "tick", { from: "api" }, "Europe/Berlin", 5, 0, true],
    );
    assert.ok(Date.parse(body.next_tick_at) - Date.parse(body.last_tick) <= 1000);

    const replaced = await put("every-second", { cron: "* * * * * *", type: "tick", priority: 8 });
    assert.equal(replaced.statusCode, 200, replaced.body);
    assert.deepEqual(
      [replaced.json().priority, replaced.json().catch_up, replaced.json().timezone],
      [8, false, "UTC"],
    );
    assert.equal(replaced.json().created_at, body.created_at);

    const read = await api.app.inject({ method: "GET", url: "/schedules/every-second" });
    assert.equal(read.statusCode, 200);
    assert.equal(read.json().priority, 8);
    const list = await api.app.inject({ method: "GET", url: "/schedules" });
    assert.equal(list.statusCode, 200);
    assert.deepEqual(
      list.json().schedules.map((s: { name: string }) => s.name),
      ["every-second"],
    );

    // A pass (what every worker process runs) enqueues the ticks; readable through /jobs.
    await api.db.sql("UPDATE schedules SET last_tick = last_tick - interval '2 seconds'");
    const report = await api.db.ledger.runSchedulePass({
      scheduleCatchUpLimit: 100,
      scheduleMisfireSeconds: 60,
    });
    assert.ok(report.enqueuedJobIds.length >= 2);
    const job = await api.app.inject({ method: "GET", url: `/jobs/${report.enqueuedJobIds[0]}` });
    assert.match(job.json().idempotency_key, /^schedule:every-second@\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d\.000Z$/);

    const removed = await api.app.inject({ method: "DELETE", url: "/schedules/every-second" });
    assert.equal(removed.statusCode, 200);
    assert.equal(removed.json().name, "every-second");
    assertProblem(await api.app.inject({ method: "GET", url: "/schedules/every-second" }), 404);
    assertProblem(await api.app.inject({ method: "DELETE", url: "/schedules/every-second" }), 404);
    const after = await api.db.ledger.getJob(report.enqueuedJobIds[0] as number);
    assert.ok(after, "its jobs stay");
  });

  it("answers 422 naming each bad field, and writes nothing", async () => {
    assertProblem(await put("x", { cron: "61 * * * *", type: "t" }), 422, ["cron"]);
    assertProblem(await put("x", { cron: "* * * * *", type: "t", timezone: "Nowhere/City" }), 422, [
      "timezone",
    ]);
    assertProblem(await put("x", { cron: "* * * * *", type: "t", max_retries: 11, catch_up: "yes" }), 422, [
      "catch_up",
      "max_retries",
    ]);
    assertProblem(await put("x", { cron: "* * * * *" }), 422, ["type"]);
    assertProblem(await put("x", { cron: "* * * * *", type: "t", every: 5 }), 422, ["every"]);
    const badName = assertProblem(await put("bad%20name", { cron: "* * * * *", type: "t" }), 422, ["name"]);
    // The name's own rule, not the NUL-character message of payload strings.
    assert.deepEqual(badName.errors, [
      { field: "name", message: "must match the pattern ^[A-Za-z0-9_.:-]{1,200}$" },
    ]);
    // Past the router's default of 100 characters, a name still reaches its schema: 201 up to 200, 422 past.
    assert.equal((await put("n".repeat(200), { cron: "* * * * *", type: "t" })).statusCode, 201);
    assertProblem(await put("n".repeat(201), { cron: "* * * * *", type: "t" }), 422, ["name"]);
    await api.db.ledger.unschedule("n".repeat(200));
    assertProblem(await api.app.inject({ method: "GET", url: "/schedules?limit=0" }), 422, ["limit"]);
    assert.equal((await api.db.ledger.listSchedules()).length, 0);
  });
});
