/**
 * `taskqueue schedule add|list|show|remove` (issue 13, item 2) against a real schema, run as the
 * CLI process: a schedule added is stored as given and listed; a bad expression exits 1 naming
 * the field and writes nothing; remove deletes it, and a second remove exits 1.
 */
import assert from "node:assert/strict";
import { after, before, describe, it } from "node:test";
import { createTestDb, type TestDb } from "../helpers/db.js";
import { failingCli, runCli } from "../helpers/process.js";

let db: TestDb;
before(async () => {
  db = await createTestDb();
});
after(async () => {
  await db.drop();
});

/** The CLI on this file's schema (test/helpers/process.ts). */
const cli = (args: string[], env: Record<string, string> = {}) => runCli(db, args, env);
const failing = (args: string[]) => failingCli(db, args);

describe("taskqueue schedule", () => {
  it("add stores the schedule; list and show print it; remove deletes it", async () => {
    const added = await cli([
      "schedule",
      "add",
      "nightly",
      "30 2 * * *",
      "--type",
      "report",
      "--payload",
      '{"kind":"nightly"}',
      "--timezone",
      "Europe/Berlin",
      "--catch-up",
      "--priority",
      "7",
    ]);
    assert.match(added, /^scheduled nightly +30 2 \* \* \* +Europe\/Berlin +report +next \S+Z {2}catch-up$/m);
    const stored = await db.ledger.getSchedule("nightly");
    assert.deepEqual(
      [stored?.cron, stored?.timezone, stored?.type, stored?.payload, stored?.catchUp, stored?.priority],
      ["30 2 * * *", "Europe/Berlin", "report", { kind: "nightly" }, true, 7],
    );
    assert.match(await cli(["schedule", "list"]), /^nightly +30 2 \* \* \* +Europe\/Berlin/m);
    const shown = JSON.parse(await cli(["schedule", "show", "nightly"])) as {
      name: string;
      nextTickAt: string;
    };
    assert.equal(shown.name, "nightly");
    assert.equal(shown.nextTickAt, stored?.nextTickAt?.toISOString());
    assert.match(await cli(["schedule", "remove", "nightly"]), /^removed nightly/m);
    assert.equal(await db.ledger.getSchedule("nightly"), null);
    assert.match(await cli(["schedule", "list"]), /^no schedules$/m);
    const again = await failing(["schedule", "remove", "nightly"]);
    assert.equal(again.code, 1);
    assert.match(again.stderr, /schedule "nightly" does not exist/);
  });

  it("a bad expression or zone exits 1 naming the field; nothing is written", async () => {
    const cron = await failing(["schedule", "add", "bad", "61 * * * *", "--type", "t"]);
    assert.equal(cron.code, 1);
    assert.match(cron.stderr, /cron: is not a cron expression/);
    const zone = await failing([
      "schedule",
      "add",
      "bad",
      "* * * * *",
      "--type",
      "t",
      "--timezone",
      "Mars/Base",
    ]);
    assert.match(zone.stderr, /timezone: must be an IANA time zone/);
    const usage = await failing(["schedule", "add", "bad", "* * * * *"]);
    assert.equal(usage.code, 2, "--type is required");
    assert.equal(await db.ledger.getSchedule("bad"), null);
  });
});
