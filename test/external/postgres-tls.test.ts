/**
 * TLS to PostgreSQL as the README says to set it, on a private cluster (never the shared server)
 * that accepts TLS connections only (`hostssl`; `hostnossl … reject`), its certificate signed by a
 * CA made here: `sslmode=verify-full` with the CA in `sslrootcert` (or in NODE_EXTRA_CA_CERTS)
 * connects the API and a worker, which run a job; a wrong CA, no CA, or no TLS at all is refused
 * with an error that says so.
 */
import assert from "node:assert/strict";
import { execFile } from "node:child_process";
import { chmodSync, chownSync, copyFileSync, mkdtempSync, rmSync, statSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { after, before, it } from "node:test";
import pg from "pg";
import { freePort } from "../../src/db/embedded.js";
import { type ChaosCluster, startChaosCluster } from "../chaos/helpers/cluster.js";
import { CLI, startCli, until } from "../helpers/process.js";
import { makeCertificates, type TestCertificates } from "../helpers/tls.js";

let cluster: ChaosCluster;
let folder: string;
let certs: TestCertificates;

/** The cluster's URL with these query parameters. */
function urlWith(params: Record<string, string>): string {
  const url = new URL(cluster.url);
  for (const [key, value] of Object.entries(params)) url.searchParams.set(key, value);
  return url.toString();
}

before(async () => {
  folder = mkdtempSync(join(tmpdir(), "taskqueue-tls-"));
  certs = makeCertificates(folder);
  cluster = await startChaosCluster("tls");
  // The server's certificate and key in its data directory, owned by the server's user; the key
  // readable by it alone (PostgreSQL refuses a key others can read).
  const owner = statSync(cluster.dataDir);
  for (const [source, name] of [
    [certs.serverCert, "server.crt"],
    [certs.serverKey, "server.key"],
  ] as const) {
    const target = join(cluster.dataDir, name);
    copyFileSync(source, target);
    chownSync(target, owner.uid, owner.gid);
    chmodSync(target, 0o600);
  }
  writeFileSync(
    join(cluster.dataDir, "pg_hba.conf"),
    "hostssl all all 127.0.0.1/32 scram-sha-256\nhostnossl all all all reject\n",
  );
  const client = new pg.Client({ connectionString: cluster.url });
  await client.connect();
  try {
    await client.query("ALTER SYSTEM SET ssl = on");
    await client.query("ALTER SYSTEM SET ssl_cert_file = 'server.crt'");
    await client.query("ALTER SYSTEM SET ssl_key_file = 'server.key'");
    await client.query("SELECT pg_reload_conf()");
  } finally {
    await client.end();
  }
});
after(async () => {
  await cluster?.destroy();
  rmSync(folder, { recursive: true, force: true });
});

/** Runs the CLI with `args` and `env` (over this process's, DATABASE_URL replaced): exit code and output. */
function cli(args: string[], env: Record<string, string>): Promise<{ code: number; output: string }> {
  return new Promise((resolve) => {
    const environment = { ...process.env, LOG_LEVEL: "warn", ...env };
    execFile(
      process.execPath,
      [CLI, ...args],
      { env: environment, timeout: 60_000 },
      (error, stdout, stderr) =>
        resolve({ code: error ? Number(error.code ?? -1) : 0, output: `${stdout}${stderr}`.trim() }),
    );
  });
}

it("verify-full with the CA in sslrootcert: migrate, then the API and a worker run a job over TLS", async () => {
  const databaseUrl = urlWith({ sslmode: "verify-full", sslrootcert: certs.caCert });
  const migrated = await cli(["migrate"], { DATABASE_URL: databaseUrl });
  assert.equal(migrated.code, 0, migrated.output);

  const port = await freePort();
  const env = {
    ...process.env,
    DATABASE_URL: databaseUrl,
    PORT: String(port),
    POLL_INTERVAL_SECONDS: "0.2",
    HEARTBEAT_INTERVAL_SECONDS: "0.2",
    LOG_LEVEL: "info",
  };
  const service = startCli(["start", "--no-migrate"], env);
  try {
    await service.waitForLog((l) => l.msg === "API listening", 30_000);
    const base = `http://127.0.0.1:${port}`;
    const created = await fetch(`${base}/jobs`, {
      method: "POST",
      headers: { "content-type": "application/json" },
      body: JSON.stringify({ type: "echo", payload: { over: "tls" } }),
    });
    assert.equal(created.status, 201);
    const { id } = (await created.json()) as { id: number };
    await until(
      async () =>
        ((await (await fetch(`${base}/jobs/${id}`)).json()) as { status: string }).status === "done",
      20_000,
      "the job to be done",
    );
    // Every connection of the service is encrypted (the server would refuse any other).
    const client = new pg.Client({ connectionString: databaseUrl });
    await client.connect();
    try {
      const { rows } = await client.query<{ ssl: boolean; name: string }>(
        `SELECT s.ssl, a.application_name AS name FROM pg_stat_activity a JOIN pg_stat_ssl s USING (pid)
          WHERE a.backend_type = 'client backend' AND a.application_name LIKE 'taskqueue%'`,
      );
      assert.ok(
        rows.some((r) => r.name === "taskqueue-api"),
        JSON.stringify(rows),
      );
      assert.ok(
        rows.some((r) => r.name.startsWith("taskqueue lock")),
        JSON.stringify(rows),
      );
      assert.ok(
        rows.every((r) => r.ssl),
        JSON.stringify(rows),
      );
    } finally {
      await client.end();
    }
  } finally {
    service.child.kill("SIGTERM");
  }
  assert.equal(await service.exited, 0);
});

it("verify-full trusts NODE_EXTRA_CA_CERTS too; PGSSLROOTCERT is not read", async () => {
  const databaseUrl = urlWith({ sslmode: "verify-full" });
  const extra = await cli(["migrate"], { DATABASE_URL: databaseUrl, NODE_EXTRA_CA_CERTS: certs.caCert });
  assert.equal(extra.code, 0, extra.output);
  const noCa = await cli(["migrate"], { DATABASE_URL: databaseUrl, PGSSLROOTCERT: certs.caCert });
  assert.equal(noCa.code, 1, noCa.output);
  assert.match(noCa.output, /PostgreSQL's TLS certificate was refused/);
});

it("a wrong CA, or no TLS, is refused with an error saying why", async () => {
  const wrongCa = await cli(["worker"], {
    DATABASE_URL: urlWith({ sslmode: "verify-full", sslrootcert: certs.otherCaCert }),
  });
  assert.equal(wrongCa.code, 1, wrongCa.output);
  assert.match(
    wrongCa.output,
    /^taskqueue: PostgreSQL's TLS certificate was refused \(unable to verify the first certificate, UNABLE_TO_VERIFY_LEAF_SIGNATURE\): give the CA that signed it as sslrootcert=<file> in DATABASE_URL/,
  );
  const plain = await cli(["worker"], { DATABASE_URL: urlWith({ sslmode: "disable" }) });
  assert.equal(plain.code, 1, plain.output);
  assert.match(plain.output, /no encryption/);
});
