/**
 * The API over HTTPS (TLS_CERT_FILE, TLS_KEY_FILE) with a certificate made by openssl: a client
 * that trusts its CA gets answers (`taskqueue smoke` passes every check with NODE_EXTRA_CA_CERTS),
 * plain HTTP gets none, `taskqueue health` asks the https URL; a certificate without its key, or
 * a key of another certificate, refuses the start (exit 2) naming the variable.
 */
import assert from "node:assert/strict";
import { execFile } from "node:child_process";
import { existsSync, mkdtempSync, readFileSync, rmSync } from "node:fs";
import { get } from "node:https";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { after, before, it } from "node:test";
import { freePort } from "../../src/db/embedded.js";
import { createTestDb, type TestDb } from "../helpers/db.js";
import { CLI, cliEnv, startCli, until } from "../helpers/process.js";
import { makeCertificates, type TestCertificates } from "../helpers/tls.js";

let db: TestDb;
let folder: string;
let certs: TestCertificates;

before(async () => {
  db = await createTestDb();
  folder = mkdtempSync(join(tmpdir(), "taskqueue-https-"));
  certs = makeCertificates(folder);
});
after(async () => {
  await db.drop();
  rmSync(folder, { recursive: true, force: true });
});

function cli(args: string[], env: NodeJS.ProcessEnv): Promise<{ code: number; output: string }> {
  return new Promise((resolve) => {
    execFile(process.execPath, [CLI, ...args], { env, timeout: 60_000 }, (error, stdout, stderr) =>
      resolve({ code: error ? Number(error.code ?? -1) : 0, output: `${stdout}${stderr}`.trim() }),
    );
  });
}

/** GET `url` trusting only `ca`: the status code. */
function getTrusting(url: string, ca: Buffer): Promise<number> {
  return new Promise((resolve, reject) => {
    const request = get(url, { ca, agent: false, timeout: 5000 }, (response) => {
      response.resume();
      resolve(response.statusCode ?? 0);
    });
    request.on("error", reject);
    request.on("timeout", () => request.destroy(new Error("timed out")));
  });
}

it("serves HTTPS with TLS_CERT_FILE and TLS_KEY_FILE; smoke and health go through it", async () => {
  const port = await freePort();
  const file = join(folder, "health.json");
  const env = cliEnv(db, {
    PORT: String(port),
    TLS_CERT_FILE: certs.serverCert,
    TLS_KEY_FILE: certs.serverKey,
    TASKQUEUE_HEALTH_FILE: file,
  });
  const service = startCli(["start", "--no-migrate"], env);
  try {
    const listening = await service.waitForLog((l) => l.msg === "API listening");
    assert.equal(listening.url, `https://127.0.0.1:${port}`);
    const ca = readFileSync(certs.caCert);
    assert.equal(await getTrusting(`https://localhost:${port}/health`, ca), 200);
    // A client that trusts another CA refuses the server.
    await assert.rejects(getTrusting(`https://localhost:${port}/health`, readFileSync(certs.otherCaCert)), {
      code: "UNABLE_TO_VERIFY_LEAF_SIGNATURE",
    });
    // Plain HTTP gets no answer from the TLS port.
    await assert.rejects(fetch(`http://127.0.0.1:${port}/health`, { signal: AbortSignal.timeout(5000) }));

    const smoke = await cli(["smoke", "--url", `https://localhost:${port}`], {
      ...env,
      NODE_EXTRA_CA_CERTS: certs.caCert,
    });
    assert.equal(smoke.code, 0, smoke.output);
    assert.match(smoke.output, /^\d+ passed, 0 failed$/m);

    await until(async () => existsSync(file), 10_000, "the health file");
    const health = await cli(["health"], env);
    assert.equal(health.code, 0, health.output);
    assert.match(health.output, new RegExp(`API https://127\\.0\\.0\\.1:${port}/health answered 200`));
    const byPort = await cli(["health"], { ...env, TASKQUEUE_HEALTH_FILE: "" });
    assert.equal(byPort.code, 0, byPort.output);
  } finally {
    service.child.kill("SIGTERM");
  }
  assert.equal(await service.exited, 0);
});

it("a certificate without its key, or with another key, refuses the start naming the variable", async () => {
  const base = cliEnv(db, { PORT: String(await freePort()) });
  const alone = await cli(["api", "--no-migrate"], { ...base, TLS_CERT_FILE: certs.serverCert });
  assert.equal(alone.code, 2, alone.output);
  assert.match(
    alone.output,
    /configuration error: TLS_KEY_FILE: must be set together with the other of TLS_CERT_FILE and TLS_KEY_FILE/,
  );
  const mismatched = await cli(["api", "--no-migrate"], {
    ...base,
    TLS_CERT_FILE: certs.serverCert,
    TLS_KEY_FILE: join(folder, "other.key"),
  });
  assert.equal(mismatched.code, 2, mismatched.output);
  assert.match(
    mismatched.output,
    /configuration error: TLS_CERT_FILE: .* are not a PEM certificate and its key/,
  );
  const missing = await cli(["api", "--no-migrate"], {
    ...base,
    TLS_CERT_FILE: join(folder, "no-such.crt"),
    TLS_KEY_FILE: certs.serverKey,
  });
  assert.equal(missing.code, 2, missing.output);
  assert.match(missing.output, /configuration error: TLS_CERT_FILE: cannot read .*no-such\.crt/);
  // A worker does not read them.
  const worker = await cli(["migrate"], { ...base, TLS_CERT_FILE: certs.serverCert });
  assert.equal(worker.code, 0, worker.output);
});
