/**
 * CommonJS (issue 13 item 1): the package is ESM only; a CommonJS module loads it with require()
 * on Node ≥ 20.19 and ≥ 22.12 (require(esm), no flag), and with `await import("taskqueue")` on
 * older releases of the supported range (README, "CommonJS"). Runs a CommonJS fixture in a child
 * process and checks what it loaded: on a Node without require(esm), that it fails as the README
 * says (ERR_REQUIRE_ESM).
 */
import assert from "node:assert/strict";
import { execFile } from "node:child_process";
import { describe, it } from "node:test";
import { fileURLToPath } from "node:url";
import { promisify } from "node:util";

const run = promisify(execFile);
const consumer = fileURLToPath(new URL("../../../test/fixtures/commonjs/consumer.cjs", import.meta.url));

/** Whether this Node loads ES modules with require() without a flag (20.19+, 22.12+, 23+). */
function requireEsmByDefault(): boolean {
  const [major = 0, minor = 0] = process.versions.node.split(".").map(Number);
  return major > 22 || (major === 22 && minor >= 12) || (major === 20 && minor >= 19);
}

describe("CommonJS consumers", () => {
  it("require('taskqueue') and its ORM entry points work (or fail as documented on old Node)", async () => {
    const child = run(process.execPath, [consumer], { timeout: 30_000 });
    if (!requireEsmByDefault()) {
      await assert.rejects(child, (error: Error & { stderr?: string }) =>
        /ERR_REQUIRE_ESM/.test(String(error.stderr)),
      );
      return;
    }
    const { stdout } = await child;
    const found = JSON.parse(stdout) as Record<string, string[]>;
    for (const name of [
      "TaskQueue",
      "defineJob",
      "defineJobs",
      "JobCatalog",
      "buildApp",
      "JobValidationError",
    ])
      assert.ok(found.taskqueue?.includes(name), `taskqueue exports ${name}: ${found.taskqueue}`);
    assert.ok(found["taskqueue/kysely"]?.includes("kyselyClient"));
    assert.ok(found["taskqueue/drizzle"]?.includes("drizzleClient"));
    assert.ok(found["taskqueue/knex"]?.includes("knexClient"));
    assert.ok(found["taskqueue/prisma"]?.includes("prismaClient"));
  });
});
