/**
 * `taskqueue types list|pause|resume|limit|unlimit` (issue 14, items 6 and 8; issue 13, item 3)
 * against a real schema, run as the CLI process: pause writes the paused_types row and list shows
 * it with the pending jobs and live workers; resume deletes it; limit writes the type_limits row
 * and list shows it, unlimit deletes it; a bad type or limit exits 1 naming it and writes nothing.
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
const cli = (args: string[]) => runCli(db, args);

describe("taskqueue types", () => {
  it("pause, list and resume act on the database; list shows pending jobs and unhandled types", async () => {
    assert.equal(await cli(["types", "list"]), "no types\n");
    await db.sql(
      "INSERT INTO jobs (type, run_at) VALUES ('report', now() - interval '30 seconds'), ('report', now())",
    );
    await db.sql(
      "INSERT INTO workers (id, host, pid, types, concurrency) VALUES ('w', 'h', 1, '{email}', 1)",
    );
    assert.match(await cli(["types", "pause", "email"]), /^paused email \(since \S+Z\)$/m);
    assert.deepEqual(await db.sql("SELECT type FROM paused_types"), [{ type: "email" }]);
    const listed = await cli(["types", "list"]);
    assert.match(listed, /^TYPE +PENDING +OLDEST +WORKERS +STATE$/m);
    assert.match(listed, /^email +0 +- +1 {2}paused since \S+Z$/m);
    assert.match(listed, /^report +2 +\d+\.\ds +0 {2}active {2}no live worker$/m);
    const json = JSON.parse(await cli(["types", "list", "--json"])) as { type: string; paused: boolean }[];
    assert.deepEqual(
      json.map((t) => [t.type, t.paused]),
      [
        ["email", true],
        ["report", false],
      ],
    );
    assert.equal(await cli(["types", "resume", "email"]), "resumed email\n");
    assert.deepEqual(await db.sql("SELECT type FROM paused_types"), []);
  });

  it("a type name too long exits 1 naming the field, and pauses nothing", async () => {
    const { code, stderr } = await failingCli(db, ["types", "pause", "x".repeat(201)]);
    assert.equal(code, 1);
    assert.match(stderr, /type: must be a string of 1–200 characters/);
    assert.deepEqual(await db.sql("SELECT type FROM paused_types"), []);
  });

  it("inspect shows paused types, limited types, and pending jobs no live worker claims", async () => {
    await db.sql("DELETE FROM jobs");
    await db.sql("INSERT INTO jobs (type, run_at) VALUES ('orphan', now() - interval '5 seconds')");
    await cli(["types", "pause", "email"]);
    await cli(["types", "limit", "email", "--max-running", "5", "--rate", "2.5"]);
    await cli(["types", "limit", "sms", "--rate", "10"]);
    try {
      const stdout = await cli(["inspect"]);
      assert.match(stdout, /^paused {3}email since \d{4}-\d\d-\d\dT\d\d:\d\d:\d\dZ$/m);
      assert.match(stdout, /^limits {3}email max 5 running, 2\.5\/s · sms 10\/s$/m);
      assert.match(
        stdout,
        /^orphans {2}orphan 1 pending, oldest due \d+\.\d s \(no live worker claims them\)$/m,
      );
    } finally {
      await cli(["types", "resume", "email"]);
      await cli(["types", "unlimit", "email"]);
      await cli(["types", "unlimit", "sms"]);
    }
    const without = await cli(["inspect"]);
    assert.doesNotMatch(without, /^paused/m, "no line without paused types");
    assert.doesNotMatch(without, /^limits/m, "no line without limited types");
  });

  it("limit writes the type's limits, list shows them, unlimit removes them", async () => {
    assert.equal(
      await cli(["types", "limit", "email", "--max-running", "5", "--rate", "2.5"]),
      "limited email: max 5 running, 2.5/s (burst 3, the default)\n",
    );
    assert.deepEqual(await db.sql("SELECT type, max_running, rate_per_second, burst FROM type_limits"), [
      { type: "email", max_running: 5, rate_per_second: 2.5, burst: null },
    ]);
    assert.equal(
      await cli(["types", "limit", "email", "--rate", "50", "--burst", "10"]),
      "limited email: 50/s (burst 10)\n",
    );
    assert.match(await cli(["types", "list"]), /^email +0 +- +\d+ {2}active {2}limit: 50\/s \(burst 10\)$/m);
    const json = JSON.parse(await cli(["types", "list", "--json"])) as { type: string; limit: unknown }[];
    assert.deepEqual(json.find((t) => t.type === "email")?.limit, {
      maxRunning: null,
      ratePerSecond: 50,
      burst: 10,
    });
    assert.equal(await cli(["types", "unlimit", "email"]), "unlimited email\n");
    assert.equal(await cli(["types", "unlimit", "email"]), "email had no limits\n");
    assert.deepEqual(await db.sql("SELECT type FROM type_limits"), []);
  });

  it("limit without a limit, with a bad value, or a burst without a rate exits 2 (usage) naming it; a bad type exits 1; nothing is written", async () => {
    const cases: [string[], number, RegExp][] = [
      [["types", "limit", "email"], 2, /set --max-running, --rate, or both/],
      [["types", "limit", "email", "--max-running", "0"], 2, /--max-running must be a positive integer/],
      [["types", "limit", "email", "--rate", "-1"], 2, /--rate must be a positive number/],
      [["types", "limit", "email", "--max-running", "2", "--burst", "3"], 2, /--burst needs --rate/],
      [
        ["types", "limit", "x".repeat(201), "--max-running", "2"],
        1,
        /type: must be a string of 1–200 characters/,
      ],
    ];
    for (const [args, exitCode, message] of cases) {
      const { code, stderr } = await failingCli(db, args);
      assert.equal(code, exitCode, args.join(" "));
      assert.match(stderr, message);
    }
    assert.deepEqual(await db.sql("SELECT type FROM type_limits"), []);
  });

  it("--help lists the subcommands", async () => {
    const help = await cli(["types", "--help"]);
    for (const sub of [
      "list",
      "pause <type>",
      "resume <type>",
      "limit \\[options\\] <type>",
      "unlimit <type>",
    ])
      assert.match(help, new RegExp(`^ {2}${sub}`, "m"));
  });
});
