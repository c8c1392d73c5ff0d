/**
 * `taskqueue inspect --watch` in a real terminal: tmux, 80×24, beside a `taskqueue start` on its
 * embedded PostgreSQL in a checkout of its own (a temp directory), with no DATABASE_URL anywhere:
 * inspect finds the database through the start's state file. Jobs flow while it watches; the pane
 * is read with `capture-pane`. A query that fails (a table renamed away) shows an error line and
 * the watch goes on.
 */
import assert from "node:assert/strict";
import { execFile } from "node:child_process";
import { existsSync, readFileSync, statSync } from "node:fs";
import { mkdtemp, rm, writeFile } from "node:fs/promises";
import { tmpdir } from "node:os";
import { join, resolve } from "node:path";
import { after, before, it } from "node:test";
import { promisify } from "node:util";
import pg from "pg";
import { EMBEDDED_STATE_FILE, type EmbeddedState } from "../../src/cli/embedded-state.js";
import { freePort } from "../../src/db/embedded.js";
import { CLI, type CliProcess, startCli } from "../helpers/process.js";

const run = promisify(execFile);
const SOCKET = `taskqueue-inspect-${process.pid}`;
const tmux = (...args: string[]) => run("tmux", ["-L", SOCKET, ...args]);

let dir: string;
let port: number;
let service: CliProcess;
let flow: NodeJS.Timeout | null = null;

/** The environment of the start and of inspect: no DATABASE_URL, tiny intervals. */
function env(): NodeJS.ProcessEnv {
  const { DATABASE_URL: _, ...rest } = process.env;
  return {
    ...rest,
    PORT: String(port),
    LOG_LEVEL: "info",
    POLL_INTERVAL_SECONDS: "0.2",
    HEARTBEAT_INTERVAL_SECONDS: "0.5",
    WORKER_COUNT: "4",
    SHUTDOWN_GRACE_SECONDS: "1",
  };
}

const post = (body: unknown) =>
  fetch(`http://127.0.0.1:${port}/jobs`, {
    method: "POST",
    headers: { "content-type": "application/json" },
    body: JSON.stringify(body),
  }).then(async (r) => ({ status: r.status, body: (await r.json()) as { id: number } }));

/** The pane's rows as they are now (trailing blank rows included, up to the pane's height). */
async function pane(): Promise<string[]> {
  const { stdout } = await run("tmux", ["-L", SOCKET, "capture-pane", "-p", "-t", "inspect"]);
  return stdout.replace(/\n$/, "").split("\n");
}

/** Reads the pane until `check` holds (the terminal is another process: nothing to await), within `timeoutMs`. */
async function paneUntil(
  check: (rows: string[]) => boolean,
  what: string,
  timeoutMs = 30_000,
): Promise<string[]> {
  const deadline = Date.now() + timeoutMs;
  let rows: string[] = [];
  while (Date.now() < deadline) {
    rows = await pane();
    if (check(rows)) return rows;
    await new Promise((r) => setTimeout(r, 100));
  }
  throw new Error(`the pane never showed ${what}; it shows:\n${rows.join("\n")}`);
}

before(async () => {
  dir = await mkdtemp(join(tmpdir(), "taskqueue-checkout-"));
  port = await freePort();
  service = startCli(["start"], env(), dir);
  await service.waitForLog((l) => l.msg === "API listening", 180_000);
  await writeFile(join(dir, "tmux.conf"), "set-option -g remain-on-exit on\n");
  // env -u: the tmux server inherits this process's environment, DATABASE_URL included.
  await tmux(
    "-f",
    join(dir, "tmux.conf"),
    "new-session",
    "-d",
    "-x",
    "80",
    "-y",
    "24",
    "-s",
    "inspect",
    "-c",
    dir,
    `env -u DATABASE_URL PORT=${port} ${process.execPath} ${resolve(CLI)} inspect --watch 0.3`,
  );
});

after(async () => {
  if (flow) clearInterval(flow);
  await tmux("kill-server").catch(() => undefined);
  if (service) {
    service.child.kill("SIGTERM");
    await service.exited;
    assert.equal(existsSync(join(dir, EMBEDDED_STATE_FILE)), false, "the state file goes with the start");
  }
  await rm(dir, { recursive: true, force: true });
});

it("finds the embedded database by itself and fits 80×24 while jobs flow, title on top", async () => {
  const state = statSync(join(dir, EMBEDDED_STATE_FILE));
  assert.equal(state.mode & 0o777, 0o600, "the state file is its owner's only");
  const slow = await Promise.all([1, 2].map(() => post({ type: "slow", payload: { sleep_seconds: 120 } })));
  assert.deepEqual(
    slow.map((r) => r.status),
    [201, 201],
  );
  const ids = slow.map((r) => r.body.id);
  // Enough workers and dead letters to overflow the lists: the screen must cut them.
  for (let i = 0; i < 16; i++) await post({ type: "always_fail", max_retries: 0, payload: { i } });
  let n = 0;
  flow = setInterval(() => void post({ type: "echo", payload: { n: n++ } }).catch(() => undefined), 100);

  const rows = await paneUntil(
    (r) =>
      ids.every((id) => r.some((row) => new RegExp(`^ {2}job ${id} slow running `).test(row))) &&
      r.some((row) => /^depth +.*done [1-9]/.test(row)) &&
      r.some((row) => /^dead +1[6-9] waiting/.test(row)),
    "both slow jobs' locks, done jobs and the dead letters",
  );
  if (process.env.TEST_DEBUG) console.error(rows.join("\n"));
  assert.equal(rows.length, 24, rows.join("\n"));
  assert.ok(
    rows.every((row) => row.length <= 80),
    rows.join("\n"),
  );
  assert.match(
    rows[0] as string,
    /^taskqueue inspect · schema taskqueue v\d+ · \d\d:\d\d:\d\d UTC · every 0\.3 s/,
  );
  assert.ok(rows.some((row) => /^size +[\d.]+ [KM]?i?B: \d+ tables .*, \d+ indexes/.test(row)));
  assert.ok(rows.some((row) => /^tables +\w+ [\d.]+ [KM]?i?B/.test(row)));
  assert.ok(rows.some((row) => /^indexes +\w+ [\d.]+ [KM]?i?B/.test(row)));
  assert.ok(rows.some((row) => /^workers +1 live/.test(row)));
  assert.ok(rows.some((row) => /^locks +\d+ job advisory locks held/.test(row)));
  // Each lock names its job and the worker holding it.
  const lock = rows.find((row) => row.startsWith(`  job ${ids[0]} slow running`)) as string;
  assert.match(lock, /· worker \S+ · pid \d+/);
  // Sixteen dead letters do not fit the rows left: the list is cut, and says so.
  assert.ok(
    rows.some((row) => /^ {2}… \d+ more$/.test(row)),
    rows.join("\n"),
  );
  // It redraws: the title's clock moves on.
  const title = rows[0];
  await paneUntil((r) => r[0] !== title && /^taskqueue inspect/.test(r[0] as string), "a later frame");
});

it("a failing query shows an error line and the watch goes on", async () => {
  const { databaseUrl } = JSON.parse(readFileSync(join(dir, EMBEDDED_STATE_FILE), "utf8")) as EmbeddedState;
  const client = new pg.Client({ connectionString: databaseUrl });
  await client.connect();
  try {
    await client.query("ALTER TABLE taskqueue.dead_letter_jobs RENAME TO dead_letter_jobs_away");
    try {
      const rows = await paneUntil(
        (r) =>
          r.some((row) => /^error +dead letters: relation .*dead_letter_jobs.* does not exist/.test(row)),
        "the dead letters' error line",
      );
      assert.match(rows[0] as string, /^taskqueue inspect · schema taskqueue/);
      assert.ok(
        rows.some((row) => /^workers +1 live/.test(row)),
        "the other parts still show",
      );
      const title = rows[0];
      await paneUntil((r) => r[0] !== title, "a frame after the error");
    } finally {
      await client.query("ALTER TABLE taskqueue.dead_letter_jobs_away RENAME TO dead_letter_jobs");
    }
    await paneUntil(
      (r) => !r.some((row) => row.startsWith("error")) && r.some((row) => /^dead +\d+ waiting/.test(row)),
      "the dead letters back, without an error line",
    );
  } finally {
    await client.end();
  }
});
