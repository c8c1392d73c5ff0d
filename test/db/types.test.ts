/**
 * No global side effect on import: taskqueue reads int8 as numbers through the per-query `types` of
 * its own statements (src/db/types.ts), never through pg's global type parsers, so a host
 * application's plain `pg` queries keep int8 as strings, and taskqueue's reads stay numeric on the
 * host's own pool and client.
 */
import assert from "node:assert/strict";
import { execFile } from "node:child_process";
import { after, before, it } from "node:test";
import { promisify } from "node:util";
import pg from "pg";
import { TaskQueue } from "../../src/index.js";
import { createTestDb, DATABASE_URL, type TestDb, testOptions } from "../helpers/db.js";

const INDEX_URL = new URL("../../src/index.js", import.meta.url).href;

let db: TestDb;
let hostPool: pg.Pool;

before(async () => {
  db = await createTestDb();
  // The host application's own pool: plain pg, no taskqueue configuration.
  hostPool = new pg.Pool({ connectionString: DATABASE_URL, max: 2 });
});

after(async () => {
  await hostPool.end();
  await db.drop();
});

it("importing taskqueue leaves a host's plain pg queries reading int8 as strings", async () => {
  const script = `
    await import(${JSON.stringify(INDEX_URL)});
    const { default: pg } = await import("pg");
    const client = new pg.Client({ connectionString: process.env.DATABASE_URL });
    await client.connect();
    const { rows } = await client.query("SELECT 9007199254740993::int8 AS big, '{1,2}'::int8[] AS list");
    await client.end();
    console.log(JSON.stringify(rows[0]));`;
  const { stdout } = await promisify(execFile)(process.execPath, ["--input-type=module", "-e", script], {
    env: { ...process.env, DATABASE_URL },
  });
  assert.deepEqual(JSON.parse(stdout), { big: "9007199254740993", list: ["1", "2"] });
  // And in this process too, which has imported all of taskqueue.
  const { rows } = await hostPool.query("SELECT 9007199254740993::int8 AS big");
  assert.equal(rows[0].big, "9007199254740993");
});

it("the ledger reads numbers through a host pool given as `pool` and a host client given as {client}", async () => {
  const queue = new TaskQueue({ ...testOptions(db.schema), pool: hostPool });
  try {
    const migrated = await queue.migrate();
    assert.equal(typeof migrated.version, "number");
    const job = await queue.addJob({ type: "noop" });
    assert.equal(typeof job.id, "number");
    const ids = await queue.addJobIds([{ type: "noop" }, { type: "noop" }]);
    assert.deepEqual(
      ids.map((id) => typeof id),
      ["number", "number"],
    );

    const client = await hostPool.connect();
    let inTransaction: number;
    try {
      await client.query("BEGIN");
      inTransaction = (await queue.addJob({ type: "echo", payload: { a: 1 } }, { client })).id;
      const [batch] = await queue.addJobs([{ type: "noop" }], { client });
      assert.equal(typeof batch?.id, "number");
      await client.query("COMMIT");
      // The host's own queries on the same client still read int8 as strings.
      const { rows } = await client.query("SELECT $1::int8 AS id", [inTransaction]);
      assert.equal(rows[0].id, String(inTransaction));
    } finally {
      client.release();
    }
    assert.equal(typeof inTransaction, "number");

    const read = await queue.getJob(inTransaction);
    assert.equal(read?.id, inTransaction);
    const listed = await queue.listJobs({ limit: 10 });
    assert.equal(listed.length, 5);
    for (const row of listed) assert.equal(typeof row.id, "number");
    const metrics = await queue.metrics();
    assert.equal(metrics.depth.pending, 5);
    assert.equal(typeof metrics.deadLetterCount, "number");
  } finally {
    await queue.close();
  }
});
