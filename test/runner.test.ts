/**
 * The test runner (scripts/run-tests.mjs) and its named groups (scripts/test-groups.mjs): a group
 * selects its files, a filter that matches nothing exits 1 before anything runs, `--list` runs
 * nothing. Runs the real script; none of these starts a database.
 */
import assert from "node:assert/strict";
import { execFile } from "node:child_process";
import { existsSync } from "node:fs";
import { it } from "node:test";
import { promisify } from "node:util";

const run = promisify(execFile);
const RUNNER = "scripts/run-tests.mjs";

interface Outcome {
  code: number;
  stdout: string;
  stderr: string;
}

async function runner(...args: string[]): Promise<Outcome> {
  // No DATABASE_URL: if the runner went on to run tests, it would start an embedded server and
  // say so on stdout, which the assertions below would see.
  const env = { ...process.env };
  delete env.DATABASE_URL;
  try {
    const { stdout, stderr } = await run(process.execPath, [RUNNER, ...args], { env, timeout: 20_000 });
    return { code: 0, stdout, stderr };
  } catch (error) {
    const { code, stdout, stderr } = error as Outcome;
    return { code, stdout, stderr };
  }
}

/** The files a `--list` run prints (its other lines are `#` comments). */
const listed = (stdout: string) => stdout.split("\n").filter((line) => line !== "" && !line.startsWith("#"));

it("`--list dlq` selects exactly the dead-letter group's files and runs nothing", async () => {
  const { code, stdout } = await runner("--list", "dlq");
  assert.equal(code, 0);
  assert.deepEqual(listed(stdout), [
    "dist/test/api/dead-letters.test.js",
    "dist/test/cli/dead.test.js",
    "dist/test/queue/dead-letters.test.js",
    "dist/test/worker/permanent.test.js",
  ]);
  assert.match(stdout, /^# once +\d+ files/m);
  assert.doesNotMatch(stdout, /tests use/);
});

it("each of once, retry and reaper selects its files; a group and a filter together select both", async () => {
  for (const [group, file] of [
    ["once", "dist/test/worker/contention.test.js"],
    ["retry", "dist/test/queue/retry.test.js"],
    ["reaper", "dist/test/queue/reaper.test.js"],
  ] as const) {
    const { code, stdout } = await runner("--list", group);
    assert.equal(code, 0, group);
    assert.ok(listed(stdout).includes(file), `${group}: ${stdout}`);
    assert.ok(!listed(stdout).includes("dist/test/config.test.js"), `${group} runs only its own files`);
  }
  const both = listed((await runner("--list", "retry", "config.test")).stdout);
  assert.ok(both.includes("dist/test/queue/retry.test.js") && both.includes("dist/test/config.test.js"));
});

it("a filter that matches no test file exits 1 naming it, and runs nothing", async () => {
  for (const args of [["no-such-test-xyz"], ["dlq", "no-such-test-xyz"], ["--list", "no-such-test-xyz"]]) {
    const { code, stdout, stderr } = await runner(...args);
    assert.equal(code, 1, args.join(" "));
    assert.match(stderr, /no test file matches "no-such-test-xyz"/);
    assert.doesNotMatch(stdout, /tests use|^ok /m, "nothing ran");
  }
});

it("the chaos suite stays out of a plain run and of filters that do not name it", async () => {
  const plain = listed((await runner("--list")).stdout);
  assert.ok(plain.length > 50, `${plain.length} files`);
  assert.ok(plain.every((file) => !file.includes("/chaos/")));
  assert.ok(listed((await runner("--list", "chaos")).stdout).every((file) => file.includes("/chaos/")));
});

it("every file a group names exists in test/", async () => {
  const { TEST_GROUPS } = (await import(new URL("../../scripts/test-groups.mjs", import.meta.url).href)) as {
    TEST_GROUPS: Record<string, { entries: string[] }>;
  };
  for (const [name, group] of Object.entries(TEST_GROUPS))
    for (const entry of group.entries.filter((e) => !e.endsWith("/")))
      assert.ok(existsSync(`test/${entry}.ts`), `${name}: test/${entry}.ts`);
});
