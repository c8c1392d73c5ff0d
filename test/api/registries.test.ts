/**
 * Importing taskqueue leaves TypeBox's process-wide registries (formats and kinds, shared with the
 * host application) as they were, and buildApp adds only taskqueue's own kinds: a host's
 * `date-time` format stays the host's. Checked in a child process, so that nothing this test
 * process imported first can hide a registration.
 */
import assert from "node:assert/strict";
import { execFile } from "node:child_process";
import { resolve } from "node:path";
import { describe, it } from "node:test";
import { pathToFileURL } from "node:url";
import { promisify } from "node:util";
import { DATABASE_URL } from "../helpers/db.js";

const run = promisify(execFile);

/** Runs in the child: pre-registers a host `date-time`, imports taskqueue, builds an app, reports. */
const script = (indexUrl: string) => `
import { FormatRegistry, TypeRegistry } from "@sinclair/typebox";
const hostDateTime = (value) => value === "host";
FormatRegistry.Set("date-time", hostDateTime);
const snapshot = () => ({ formats: FormatRegistry.Entries(), kinds: TypeRegistry.Entries() });
const same = (a, b) => a.size === b.size && [...a].every(([key, fn]) => b.get(key) === fn);
const keys = (map) => [...map.keys()].sort();
const before = snapshot();
const taskqueue = await import(${JSON.stringify(indexUrl)});
const afterImport = snapshot();
const config = taskqueue.resolveConfig({ databaseUrl: ${JSON.stringify(DATABASE_URL)}, logLevel: "silent" });
const pg = (await import("pg")).default;
const pool = new pg.Pool({ connectionString: config.databaseUrl });
const app = await taskqueue.buildApp({ ledger: new taskqueue.Ledger(pool, config.schema), config });
const afterBuild = snapshot();
await app.close();
await pool.end();
console.log(JSON.stringify({
  importKeptFormats: same(before.formats, afterImport.formats),
  importKeptKinds: same(before.kinds, afterImport.kinds),
  buildKeptFormats: same(before.formats, afterBuild.formats),
  dateTimeIsHost: FormatRegistry.Get("date-time") === hostDateTime,
  kindsBefore: keys(before.kinds),
  kindsAfterBuild: keys(afterBuild.kinds),
}));
`;

describe("TypeBox's registries", () => {
  it("importing taskqueue registers nothing; buildApp adds only the TaskQueue:* kinds", async () => {
    const indexUrl = pathToFileURL(resolve("dist/src/index.js")).href;
    const { stdout } = await run(process.execPath, ["--input-type=module", "-e", script(indexUrl)], {
      cwd: resolve("."),
    });
    const report = JSON.parse(stdout.trim().split("\n").at(-1) as string) as Record<string, unknown>;
    assert.deepEqual(report, {
      importKeptFormats: true,
      importKeptKinds: true,
      buildKeptFormats: true,
      dateTimeIsHost: true,
      kindsBefore: [],
      kindsAfterBuild: ["TaskQueue:OffsetDateTime", "TaskQueue:StringEnum"],
    });
  });
});
