/**
 * The operator commands of issue 14 against a real schema: `taskqueue dead list|show|replay|
 * discard`, `taskqueue retry` and `taskqueue prune`, run as the CLI process.
 */
import assert from "node:assert/strict";
import { execFile } from "node:child_process";
import { mkdtemp, rm } from "node:fs/promises";
import { tmpdir } from "node:os";
import { join, resolve } from "node:path";
import { after, before, describe, it } from "node:test";
import { promisify } from "node:util";
import { writeEmbeddedState } from "../../src/cli/embedded-state.js";
import { createTestDb, type TestDb, type TestLockSession } from "../helpers/db.js";
import { killJobs } from "../helpers/dead.js";
import { CLI, cliEnv, failingCli, runCli } from "../helpers/process.js";

const run = promisify(execFile);
let db: TestDb;
let session: TestLockSession;
before(async () => {
  db = await createTestDb();
  session = await db.openLockSession("cli-dead");
});
after(async () => {
  await db.drop();
});

/** The CLI on this file's schema (test/helpers/process.ts). */
const cli = (args: string[], env: Record<string, string> = {}) => runCli(db, args, env);
const failing = (args: string[]) => failingCli(db, args);

describe("taskqueue dead", () => {
  it("list shows entries with their state; --json prints them whole; show prints one", async () => {
    const [id] = await killJobs(db, session, [{ type: "cli_list", payload: { n: 1 } }], "it failed here");
    const text = await cli(["dead", "list", "--type", "cli_list"]);
    assert.match(text, new RegExp(`^#${id} +cli_list +attempts 1 +died \\S+ +waiting +it failed here$`, "m"));
    const json = JSON.parse(await cli(["dead", "list", "--type", "cli_list", "--json"])) as {
      jobId: number;
    }[];
    assert.deepEqual(
      json.map((e) => e.jobId),
      [id],
    );
    const shown = JSON.parse(await cli(["dead", "show", String(id)])) as { jobId: number; payload: unknown };
    assert.deepEqual([shown.jobId, shown.payload], [id, { n: 1 }]);
    assert.equal((await failing(["dead", "show", "987654321"])).code, 1);
    assert.match(await cli(["dead", "list", "--type", "nothing_here"]), /^no dead letters$/m);
  });

  it("replay by id is idempotent; replay by filter goes in batches; no ids and no filter is a usage error", async () => {
    const [one] = await killJobs(db, session, [{ type: "cli_replay_one" }]);
    assert.match(
      await cli(["dead", "replay", String(one)]),
      new RegExp(`^replayed job ${one}: pending$`, "m"),
    );
    assert.match(await cli(["dead", "replay", String(one)]), /is not dead \(replayed already\): pending/);
    assert.equal((await db.ledger.getJob(one as number))?.status, "pending");

    const ids = await killJobs(db, session, [
      { type: "cli_bulk" },
      { type: "cli_bulk" },
      { type: "cli_bulk" },
    ]);
    const bulk = await cli(["dead", "replay", "--type", "cli_bulk", "--batch-size", "2"]);
    assert.match(bulk, /^replayed 2 \(2 so far\)/m);
    assert.match(bulk, /^replayed 3 in all$/m);
    for (const id of ids) assert.equal((await db.ledger.getJob(id))?.status, "pending");

    const usage = await failing(["dead", "replay"]);
    assert.equal(usage.code, 2);
    assert.match(usage.stderr, /give job ids, or a filter/);
    assert.equal((await failing(["dead", "replay", "--died-after", "yesterday"])).code, 2);
  });

  it("discard by id and with --all deletes the entries; the jobs stay dead", async () => {
    const [id, other] = await killJobs(db, session, [{ type: "cli_discard" }, { type: "cli_discard" }]);
    assert.match(
      await cli(["dead", "discard", String(id)]),
      new RegExp(`discarded the dead letter of job ${id}`),
    );
    assert.equal(await db.ledger.getDeadLetter(id as number), null);
    assert.match(await cli(["dead", "discard", "--all"]), /^discarded \d+ in all$/m);
    assert.equal(await db.ledger.getDeadLetter(other as number), null);
    assert.equal((await db.ledger.getJob(other as number))?.status, "dead");
  });
});

describe("taskqueue retry and prune", () => {
  it("retry makes a scheduled job due now; a done job exits 1 naming its status", async () => {
    const job = await db.ledger.addJob({ type: "cli_retry", runAt: "2999-01-01T00:00:00Z" });
    assert.match(await cli(["retry", String(job.id)]), new RegExp(`^job ${job.id}: due now$`, "m"));
    assert.ok(((await db.ledger.getJob(job.id))?.runAt.getTime() ?? 0) <= Date.now() + 1000);
    await db.sql("UPDATE jobs SET status = 'done', completed_at = now() WHERE id = $1", [job.id]);
    const refused = await failing(["retry", String(job.id)]);
    assert.equal(refused.code, 1);
    assert.match(refused.stderr, /status is done/);
  });

  it("prune deletes finished jobs past RETAIN_DONE_SECONDS", async () => {
    const fresh = await createTestDb();
    try {
      await fresh.sql(
        `INSERT INTO jobs (type, status, created_at, completed_at)
         SELECT 'cli_prune', 'done', now() - interval '2 hours', now() - interval '1 hour' FROM generate_series(1, 3)`,
      );
      const { stdout } = await run(process.execPath, [CLI, "prune"], {
        env: cliEnv(fresh, { RETAIN_DONE_SECONDS: "60" }),
      });
      assert.match(stdout, /^deleted 3 done jobs and 0 dead-letter entries in [\d.]+ s$/m);
      const [left] = await fresh.sql<{ n: number }>("SELECT count(*)::int AS n FROM jobs");
      assert.equal(left?.n, 0);
    } finally {
      await fresh.drop();
    }
  });
});

describe("operator commands without DATABASE_URL", () => {
  it("use the embedded database of a running start in the checkout, and name it when there is none", async () => {
    const dir = await mkdtemp(join(tmpdir(), "tq-cli-embedded-"));
    const env = cliEnv(db);
    delete env.DATABASE_URL;
    try {
      const none = await run(process.execPath, [resolve(CLI), "dead", "list"], { env, cwd: dir }).then(
        () => null,
        (error: { code: number; stderr: string }) => error,
      );
      assert.equal(none?.code, 2);
      assert.match(none?.stderr ?? "", /DATABASE_URL.*is required for dead.*\.taskqueue\/embedded\.json/);
      // The state file a `taskqueue start` writes, naming this (live) process.
      const remove = writeEmbeddedState({ databaseUrl: String(db.config.databaseUrl), port: 5432 }, dir);
      try {
        const job = await db.ledger.addJob({ type: "cli_embedded", runAt: new Date(Date.now() + 3_600_000) });
        const { stdout } = await run(process.execPath, [resolve(CLI), "retry", String(job.id)], {
          env,
          cwd: dir,
        });
        assert.match(stdout, new RegExp(`${job.id}`));
        const [row] = await db.sql<{ due: boolean }>(
          "SELECT run_at <= now() AS due FROM jobs WHERE id = $1",
          [job.id],
        );
        assert.equal(row?.due, true, "retry ran on the embedded state's database");
      } finally {
        remove();
      }
    } finally {
      await rm(dir, { recursive: true, force: true });
    }
  });
});
