/**
 * `taskqueue types list|pause|resume` (issue 14, items 6 and 8) against a real schema, run as the
 * CLI process: pause writes the paused_types row and list shows it with the pending jobs and
 * live workers; resume deletes it; a bad type exits 1 naming the field and writes nothing.
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

  it("inspect shows paused types, and pending jobs no live worker claims", async () => {
    await db.sql("DELETE FROM jobs");
    await db.sql("INSERT INTO jobs (type, run_at) VALUES ('orphan', now() - interval '5 seconds')");
    await cli(["types", "pause", "email"]);
    try {
      const stdout = await cli(["inspect"]);
      assert.match(stdout, /^paused {3}email since \d{4}-\d\d-\d\dT\d\d:\d\d:\d\dZ$/m);
      assert.match(
        stdout,
        /^orphans {2}orphan 1 pending, oldest due \d+\.\d s \(no live worker claims them\)$/m,
      );
    } finally {
      await cli(["types", "resume", "email"]);
    }
    assert.doesNotMatch(await cli(["inspect"]), /^paused/m, "no line without paused types");
  });

  it("--help lists the subcommands", async () => {
    const help = await cli(["types", "--help"]);
    for (const sub of ["list", "pause <type>", "resume <type>"])
      assert.match(help, new RegExp(`^ {2}${sub}`, "m"));
  });
});
