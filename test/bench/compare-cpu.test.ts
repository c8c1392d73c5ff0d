/**
 * bench:compare's CPU figures (cpu.ts): which connections count (the system's own, by client port;
 * not the runner's admin connection, not anyone else's), read against the test server, which runs
 * on this machine.
 */
import assert from "node:assert/strict";
import { after, before, describe, it } from "node:test";
import pg from "pg";
import { CpuMeter, connectionPorts, localServerPort, processCpuNs } from "../../bench/compare/cpu.js";
import { Admin } from "../../bench/compare/harness.js";
import { DATABASE_URL } from "../helpers/db.js";

describe("finding a system's PostgreSQL backends", () => {
  it("takes the local ports of the sockets of the process whose remote port is the server's", () => {
    const table = [
      "  sl  local_address rem_address   st tx_queue rx_queue tr tm->when retrnsmt   uid  timeout inode",
      "   0: 0100007F:D431 0100007F:1538 01 00000000:00000000 00:00000000 00000000     0        0 111 1 0",
      "   1: 0100007F:D432 0100007F:1538 01 00000000:00000000 00:00000000 00000000     0        0 222 1 0",
      "   2: 0100007F:D433 0100007F:18EB 01 00000000:00000000 00:00000000 00000000     0        0 333 1 0",
      "   3: 0100007F:1538 0100007F:D431 01 00000000:00000000 00:00000000 00000000   106        0 444 1 0",
    ].join("\n");
    // Ours: inodes 111 (to 5432), 333 (to 6379). 222 is another process's; 444 is the server's end.
    assert.deepEqual(connectionPorts(new Set(["111", "333"]), [table], 5432), [0xd431]);
    assert.deepEqual(connectionPorts(new Set(["111", "333"]), [table], 6379), [0xd433]);
  });

  it("counts only PostgreSQL reached over TCP on this machine", () => {
    assert.equal(localServerPort("postgres://postgres@127.0.0.1:5433/test"), 5433);
    assert.equal(localServerPort("postgres://postgres@localhost/test"), 5432);
    assert.equal(localServerPort("postgres://postgres@[::1]:6000/test"), 6000);
    assert.equal(localServerPort("postgres://postgres@db.example.com:5432/test"), null);
    assert.equal(localServerPort("postgres://postgres@localhost/test?host=/var/run/postgresql"), null);
    assert.equal(localServerPort("not a url"), null);
  });
});

describe("CPU time of a pass", () => {
  let admin: Admin;
  let client: pg.Client;
  const busy = "SELECT count(*) FROM generate_series(1, 4000000)";
  const port = localServerPort(DATABASE_URL);

  before(async () => {
    admin = new Admin(DATABASE_URL);
    await admin.connect();
    client = new pg.Client({ connectionString: DATABASE_URL });
    await client.connect();
  });
  after(async () => {
    await client.end();
    await admin.end();
  });

  it("reads a process's CPU time, all threads, in nanoseconds", () => {
    const before = processCpuNs(process.pid) as number;
    const usage = process.cpuUsage();
    const onCpuUs = () => {
      const { user, system } = process.cpuUsage(usage);
      return user + system;
    };
    while (onCpuUs() < 50_000); // 50 ms on a CPU, by the kernel's other count (getrusage)
    const spent = (processCpuNs(process.pid) as number) - before;
    assert.ok(spent >= 45e6 && spent <= onCpuUs() * 1000 + 20e6, `${spent} ns vs ${onCpuUs()} µs`);
    assert.equal(processCpuNs(2 ** 22 + 1), null);
  });

  it("counts the backend of the system's own connection, and not the runner's admin connection", async () => {
    assert.notEqual(port, null, "the test server runs on this machine, reached over TCP");
    const meter = new CpuMeter(admin, DATABASE_URL, () => [process.pid]);
    assert.equal(meter.unavailable, null);
    const { rows } = await client.query<{ pid: number }>("SELECT pg_backend_pid() AS pid");
    const backend = rows[0]?.pid as number;
    const backendBefore = processCpuNs(backend) as number;
    const mark = await meter.start();
    assert.ok(mark?.backends.has(backend), "the client's backend is one of the system's");
    await client.query(busy);
    const ns = (await meter.stop(mark)) as number;
    const backendSpent = (processCpuNs(backend) as number) - backendBefore;
    assert.ok(backendSpent > 20e6, `the query took ${backendSpent} ns of its backend`);
    assert.ok(ns >= backendSpent * 0.9, `counted ${ns} ns, the backend alone spent ${backendSpent} ns`);

    const idle = await meter.start();
    await admin.query(busy); // the admin connection's backend works; the system's idles
    const adminWork = (await meter.stop(idle)) as number;
    assert.ok(adminWork < backendSpent / 2, `admin work counted: ${adminWork} ns vs ${backendSpent} ns`);
  });
});
