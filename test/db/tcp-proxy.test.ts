/**
 * The test proxy (test/helpers/tcp-proxy.ts) does what the fault tests rely on: forwards, holds
 * every byte back while the connection stays open (blackhole), and resets links (drop).
 */
import assert from "node:assert/strict";
import { after, before, it } from "node:test";
import pg from "pg";
import { DATABASE_URL } from "../helpers/db.js";
import { TcpProxy } from "../helpers/tcp-proxy.js";

const target = new URL(DATABASE_URL);
const proxy = new TcpProxy(target.hostname, Number(target.port || 5432));
before(() => proxy.start());
after(() => proxy.stop());

async function connect(): Promise<pg.Client> {
  const client = new pg.Client({ connectionString: proxy.url(DATABASE_URL) });
  client.on("error", () => undefined);
  await client.connect();
  return client;
}

/** Resolves with the query's outcome, or "no answer" after `ms`. */
function within(ms: number, query: Promise<unknown>): Promise<string> {
  let timer: NodeJS.Timeout | undefined;
  return Promise.race([
    query.then(
      () => "answered",
      () => "failed",
    ),
    new Promise<string>((resolve) => {
      timer = setTimeout(() => resolve("no answer"), ms);
    }),
  ]).finally(() => clearTimeout(timer));
}

it("forwards, then a blackhole keeps the link open and answers nothing, and drop resets it", async () => {
  proxy.set({ kind: "forward" });
  const client = await connect();
  assert.equal((await client.query<{ one: number }>("SELECT 1 AS one")).rows[0]?.one, 1);
  proxy.set({ kind: "blackhole" });
  assert.equal(await within(500, client.query("SELECT 1")), "no answer");
  assert.equal(proxy.openLinks, 1, "the link stays open while blackholed");
  const closed = new Promise<void>((resolve) => client.once("end", () => resolve()));
  proxy.set({ kind: "drop" });
  await closed;
  assert.equal(proxy.openLinks, 0);
  await assert.rejects(connect(), "new connections are refused while dropping");
  proxy.set({ kind: "forward" });
  const again = await connect();
  assert.equal((await again.query<{ one: number }>("SELECT 1 AS one")).rows[0]?.one, 1);
  await again.end();
});

it("slow delays each chunk, and `match` leaves unmatched connections alone", async () => {
  proxy.set({ kind: "forward" });
  const first = proxy.accepted + 1;
  proxy.match = (n) => n === first;
  const affected = await connect();
  const spared = await connect();
  proxy.set({ kind: "slow", delayMs: 150 });
  const started = Date.now();
  await affected.query("SELECT 1");
  assert.ok(Date.now() - started >= 250, "two legs, each delayed");
  proxy.set({ kind: "blackhole" });
  assert.equal(await within(2000, spared.query("SELECT 1")), "answered");
  assert.equal(await within(300, affected.query("SELECT 1")), "no answer");
  proxy.match = () => true;
  proxy.set({ kind: "forward" });
  await spared.end();
  proxy.set({ kind: "drop" });
  proxy.set({ kind: "forward" });
});
