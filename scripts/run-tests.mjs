// Runs the test suite (compiled to dist/test by `npm run build`, which `npm test` runs first).
// With DATABASE_URL set, the tests use that server; without it, they start an embedded
// PostgreSQL 16 on a free port with throw-away data, and stop it afterwards.
// Each test file creates and drops its own schema, so files run in parallel.
//
// Arguments filter the files: `npm test -- config` runs the test files whose path contains
// "config"; a group's name (scripts/test-groups.mjs: once, dlq, retry, reaper, external) runs that
// group's files. A filter or group that matches no file exits 1 at once, naming it, and runs
// nothing. `--list` prints the groups and the files the arguments select, and runs nothing. An
// argument naming an existing file (say dist/test/fixtures/leaky-file.js) runs that file as it is,
// whatever its name: test/leak-guard.test.ts runs its fixtures so.
//
// The external tests (test/external/: they drive Prometheus, PgBouncer, Chromium and tmux, which a
// fresh machine does not have) are left out of a run without filters too: `npm run test:external`
// runs them (`node scripts/run-tests.mjs external`), and they fail, naming the program, where it is
// missing. CI installs the programs and runs them.
//
// The chaos suite (test/chaos/: faults on real processes, each file on a PostgreSQL cluster of its
// own) is left out unless a filter names it: `npm run test:chaos` runs it (`node scripts/run-tests.mjs
// chaos`), its files one at a time, and starts no shared server for it.
//
// Every file's process loads the leak guard (dist/test/helpers/leak-guard.js, `--import`): a file
// that leaves a socket, timer or child process alive after its tests fails, naming it; and
// `--test-force-exit` ends a file's process once its tests are done, so a leak never hangs the run.
import { spawn } from "node:child_process";
import { existsSync, readdirSync, statSync } from "node:fs";
import { availableParallelism } from "node:os";
import { join, resolve, sep } from "node:path";
import { pathToFileURL } from "node:url";
import { filesOfGroup, TEST_GROUPS } from "./test-groups.mjs";

const argv = process.argv.slice(2);
const listOnly = argv.includes("--list");
const args = argv.filter((arg) => arg !== "--list");
/** A file of the chaos suite (dist/test/chaos/, helpers aside). */
const isChaos = (file) => file.split(/[\\/]/).includes("chaos");
/** A file that drives installed programs (dist/test/external/: Prometheus, PgBouncer, Chromium, tmux). */
const isExternal = (file) => file.split(/[\\/]/).includes("external");
const explicit = args.filter((arg) => existsSync(arg) && statSync(arg).isFile());
const filters = args.filter((arg) => !explicit.includes(arg));
if (!existsSync("dist/test")) {
  console.error("# dist/test is missing: run `npm run build:bench` first (npm test does)");
  process.exit(1);
}
const all = readdirSync("dist/test", { recursive: true })
  .map((f) => String(f).split(sep).join("/"))
  .filter((f) => f.endsWith(".test.js"))
  .sort();
/** The files one filter selects: a group's, or those whose path contains it (chaos ones only if it says chaos). */
const matching = (filter) =>
  Object.hasOwn(TEST_GROUPS, filter)
    ? filesOfGroup(filter, all)
    : all.filter((f) => f.includes(filter) && (!isChaos(f) || filter.includes("chaos")));
const unmatched = filters.filter((filter) => matching(filter).length === 0);
if (unmatched.length > 0) {
  console.error(
    `# no test file matches ${unmatched.map((f) => JSON.stringify(f)).join(", ")}; groups: ${Object.keys(TEST_GROUPS).join(", ")} (--list shows them)`,
  );
  process.exit(1);
}
const selected =
  filters.length > 0
    ? all.filter((f) => filters.some((filter) => matching(filter).includes(f)))
    : explicit.length > 0
      ? []
      : all.filter((f) => !isChaos(f) && !isExternal(f));
const files = [...explicit, ...selected.map((f) => join("dist/test", f))];
if (listOnly) {
  for (const [name, group] of Object.entries(TEST_GROUPS))
    console.log(
      `# ${name.padEnd(9)} ${String(filesOfGroup(name, all).length).padStart(2)} files  ${group.description}`,
    );
  for (const file of files) console.log(file);
  process.exit(0);
}

let embedded;
const env = { ...process.env };
const chaos = files.filter(isChaos);
if (!env.DATABASE_URL && chaos.length < files.length) {
  const { startEmbeddedPostgres } = await import("../dist/src/db/embedded.js");
  embedded = await startEmbeddedPostgres({
    dataDir: `.taskqueue/test-pg-${process.pid}`,
    ephemeral: true,
    log: process.env.TEST_DEBUG ? (line) => console.error(line) : undefined,
  });
  env.DATABASE_URL = embedded.connectionString;
  console.log(`# tests use an embedded PostgreSQL on port ${embedded.port}`);
} else if (chaos.length < files.length) {
  console.log("# tests use the PostgreSQL server in DATABASE_URL");
}

const concurrency = Math.max(2, availableParallelism());
const guard = pathToFileURL(resolve("dist/test/helpers/leak-guard.js")).href;
// --test-force-exit came with Node 20.14 and 22.0 (package.json allows 20.10).
const [major, minor] = process.versions.node.split(".").map(Number);
const forceExit = major > 20 || (major === 20 && minor >= 14) ? ["--test-force-exit"] : [];
// Files named *.serial.test.js load the server enough to slow every test beside them (a 270 MiB
// batch), and chaos files measure recovery times that a loaded machine would stretch: they run
// first, one at a time, then every other file, in parallel.
const serial = files.filter((f) => f.endsWith(".serial.test.js") || isChaos(f));
const parallel = files.filter((f) => !serial.includes(f));
let running = null;
for (const signal of ["SIGINT", "SIGTERM"]) {
  process.on(signal, () => running?.kill(signal));
}
/** Runs `group` under node's test runner, `concurrency` files at a time; resolves with its exit code. */
function runGroup(group, concurrency) {
  const nodeArgs = ["--test", `--test-concurrency=${concurrency}`, ...forceExit, "--import", guard, ...group];
  running = spawn(process.execPath, nodeArgs, { stdio: "inherit", env });
  return new Promise((resolve) => running.on("exit", (c, signal) => resolve(c ?? (signal ? 1 : 0))));
}
let code = 0;
if (serial.length > 0) code = await runGroup(serial, 1);
if (parallel.length > 0) code = Math.max(code, await runGroup(parallel, concurrency));
if (embedded) await embedded.stop();
process.exit(code);
