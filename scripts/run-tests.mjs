// Runs the test suite (compiled to dist/test by `npm run build`, which `npm test` runs first).
// With DATABASE_URL set, the tests use that server; without it, they start an embedded
// PostgreSQL 16 on a free port with throw-away data, and stop it afterwards.
// Each test file creates and drops its own schema, so files run in parallel.
import { spawn } from "node:child_process";
import { readdirSync } from "node:fs";
import { availableParallelism } from "node:os";
import { join } from "node:path";

const files = readdirSync("dist/test", { recursive: true })
  .map(String)
  .filter((f) => f.endsWith(".test.js"))
  .filter((f) => process.argv.length <= 2 || process.argv.slice(2).some((arg) => f.includes(arg)))
  .sort()
  .map((f) => join("dist/test", f));

let embedded;
const env = { ...process.env };
if (!env.DATABASE_URL) {
  const { startEmbeddedPostgres } = await import("../dist/src/db/embedded.js");
  embedded = await startEmbeddedPostgres({
    dataDir: `.taskqueue/test-pg-${process.pid}`,
    ephemeral: true,
    log: process.env.TEST_DEBUG ? (line) => console.error(line) : undefined,
  });
  env.DATABASE_URL = embedded.connectionString;
  console.log(`# tests use an embedded PostgreSQL on port ${embedded.port}`);
} else {
  console.log("# tests use the PostgreSQL server in DATABASE_URL");
}

const concurrency = Math.max(2, availableParallelism());
const child = spawn(process.execPath, ["--test", `--test-concurrency=${concurrency}`, ...files], {
  stdio: "inherit",
  env,
});
for (const signal of ["SIGINT", "SIGTERM"]) {
  process.on(signal, () => child.kill(signal));
}
const code = await new Promise((resolve) => child.on("exit", (c, signal) => resolve(c ?? (signal ? 1 : 0))));
if (embedded) await embedded.stop();
process.exit(code);
