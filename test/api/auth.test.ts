/**
 * Token authentication (src/api/auth.ts): every route but /health, /ready and the dashboard's
 * files needs the token (Bearer, or a Basic password; /docs offers Basic to browsers); 401 problem+json with WWW-Authenticate; the token from a file; the refusal to serve
 * without a token on a non-loopback address, through the real CLI.
 */
import assert from "node:assert/strict";
import { execFile } from "node:child_process";
import { mkdtempSync, rmSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { after, before, describe, it } from "node:test";
import { promisify } from "node:util";
import type { FastifyInstance } from "fastify";
import { buildApp } from "../../src/api/app.js";
import { assertSafeBind, bearerChecker, isLoopbackHost } from "../../src/api/auth.js";
import { configFromEnv } from "../../src/config.js";
import { ConfigError } from "../../src/errors.js";
import { createTestDb, type TestDb } from "../helpers/db.js";
import { CLI, type CliProcess, cliEnv, startCli } from "../helpers/process.js";
import { assertProblem, JSON_HEADERS } from "./support.js";

const TOKEN = "s3cret-token-of-32-characters-xx";
const run = promisify(execFile);

describe("an API with a token", () => {
  let db: TestDb;
  let app: FastifyInstance;
  before(async () => {
    db = await createTestDb();
    app = await buildApp({ ledger: db.ledger, config: { ...db.config, apiToken: TOKEN } });
  });
  after(async () => {
    await app.close();
    await db.drop();
  });

  it("answers 401 problem+json with a Bearer challenge to a request without Authorization", async () => {
    const res = await app.inject({ method: "GET", url: "/jobs" });
    const body = assertProblem(res, 401);
    assert.equal(body.type, "urn:taskqueue:problem:unauthorized");
    assert.equal(res.headers["www-authenticate"], 'Bearer realm="taskqueue"');
  });

  it("answers 401 with error=invalid_token to a wrong token, a prefix of it, or another scheme", async () => {
    for (const authorization of [
      "Bearer wrong-token-of-32-characters-xxx",
      `Bearer ${TOKEN.slice(0, -1)}`,
      `Bearer ${TOKEN}x`,
      `Basic ${Buffer.from(`u:${TOKEN}`).toString("base64")}`,
      TOKEN,
    ]) {
      const res = await app.inject({ method: "GET", url: "/jobs", headers: { authorization } });
      assertProblem(res, 401);
      assert.match(
        String(res.headers["www-authenticate"]),
        /^Bearer realm="taskqueue", error="invalid_token"$/,
      );
    }
  });

  it("serves every route with the token (scheme name in any case)", async () => {
    const created = await app.inject({
      method: "POST",
      url: "/jobs",
      headers: { ...JSON_HEADERS, authorization: `Bearer ${TOKEN}` },
      payload: { type: "echo", payload: { a: 1 } },
    });
    assert.equal(created.statusCode, 201, created.body);
    const id = created.json<{ id: number }>().id;
    for (const url of [`/jobs/${id}`, "/jobs", "/dead-letters", "/metrics", "/metrics/prometheus"]) {
      const res = await app.inject({ method: "GET", url, headers: { authorization: `bearer ${TOKEN}` } });
      assert.equal(res.statusCode, 200, `${url}: ${res.body.slice(0, 200)}`);
    }
  });

  it("refuses writes without the token and writes nothing", async () => {
    const before = await db.sql<{ n: number }>("SELECT count(*)::int AS n FROM jobs");
    const post = await app.inject({
      method: "POST",
      url: "/jobs",
      headers: JSON_HEADERS,
      payload: { type: "echo" },
    });
    assertProblem(post, 401);
    assertProblem(await app.inject({ method: "DELETE", url: "/jobs/1" }), 401);
    // A body over the size limit is refused 401 too, before anything reads it.
    const huge = await app.inject({
      method: "POST",
      url: "/jobs",
      headers: { ...JSON_HEADERS, "content-length": String(1024 ** 3) },
      payload: "{}",
    });
    assert.equal(huge.statusCode, 401);
    assert.deepEqual(await db.sql("SELECT count(*)::int AS n FROM jobs"), before);
  });

  it("answers an unknown route 401 too, so a stranger cannot tell which routes exist", async () => {
    assertProblem(await app.inject({ method: "GET", url: "/no-such-route" }), 401);
    const known = await app.inject({
      method: "GET",
      url: "/no-such-route",
      headers: { authorization: `Bearer ${TOKEN}` },
    });
    assertProblem(known, 404);
  });

  it("serves /health, /ready and the dashboard's files without a token", async () => {
    for (const url of ["/health", "/ready", "/ui", "/ui/app.js"]) {
      const res = await app.inject({ method: "GET", url });
      assert.equal(res.statusCode, 200, `${url}: ${res.statusCode}`);
    }
  });

  it("asks a browser for the token on /docs (a Basic challenge), and takes it as a Basic password", async () => {
    for (const url of ["/docs", "/docs/json"]) {
      const refused = await app.inject({ method: "GET", url });
      assertProblem(refused, 401);
      assert.deepEqual(refused.headers["www-authenticate"], [
        'Bearer realm="taskqueue"',
        'Basic realm="taskqueue", charset="UTF-8"',
      ]);
      const basic = (user: string, password: string) =>
        `Basic ${Buffer.from(`${user}:${password}`).toString("base64")}`;
      const asBrowser = await app.inject({
        method: "GET",
        url,
        headers: { authorization: basic("me", TOKEN) },
      });
      assert.ok([200, 302].includes(asBrowser.statusCode), `${url} with Basic: ${asBrowser.statusCode}`);
      const wrong = await app.inject({
        method: "GET",
        url,
        headers: { authorization: basic(TOKEN, "nope") },
      });
      assertProblem(wrong, 401);
      const withBearer = await app.inject({
        method: "GET",
        url,
        headers: { authorization: `Bearer ${TOKEN}` },
      });
      assert.equal(withBearer.statusCode, asBrowser.statusCode);
    }
    // Other routes challenge with Bearer only (an API client is not asked for a password).
    assert.equal(
      (await app.inject({ method: "GET", url: "/jobs" })).headers["www-authenticate"],
      'Bearer realm="taskqueue"',
    );
  });

  it("declares the bearer scheme in the OpenAPI document, required everywhere but the probes", async () => {
    const doc = (
      await app.inject({ method: "GET", url: "/docs/json", headers: { authorization: `Bearer ${TOKEN}` } })
    ).json<{
      components: { securitySchemes: Record<string, unknown> };
      security?: unknown;
      paths: Record<string, Record<string, { security?: unknown }>>;
    }>();
    assert.deepEqual(doc.components.securitySchemes.bearerAuth, {
      type: "http",
      scheme: "bearer",
      description: (doc.components.securitySchemes.bearerAuth as { description: string }).description,
    });
    assert.deepEqual(doc.security, [{ bearerAuth: [] }]);
    assert.deepEqual(doc.paths["/health"]?.get?.security, []);
    assert.deepEqual(doc.paths["/ready"]?.get?.security, []);
    assert.equal(doc.paths["/jobs"]?.post?.security, undefined, "jobs inherit the global requirement");
  });
});

describe("an API without a token", () => {
  it("serves every route as before, and its OpenAPI document requires nothing", async () => {
    const db = await createTestDb();
    const app = await buildApp({ ledger: db.ledger, config: db.config });
    try {
      assert.equal((await app.inject({ method: "GET", url: "/jobs" })).statusCode, 200);
      const doc = (await app.inject({ method: "GET", url: "/docs/json" })).json<{ security?: unknown }>();
      assert.equal(doc.security, undefined);
    } finally {
      await app.close();
      await db.drop();
    }
  });
});

describe("the token check", () => {
  it("accepts exactly `Bearer <token>`, or where asked for, the token as a Basic password", () => {
    const matches = bearerChecker(TOKEN);
    const base64 = (text: string) => Buffer.from(text).toString("base64");
    assert.equal(matches(`Bearer ${TOKEN}`), true);
    assert.equal(matches(`BEARER  ${TOKEN} `), true);
    assert.equal(matches(`Basic ${base64(`anyone:${TOKEN}`)}`, true), true);
    assert.equal(matches(`basic ${base64(`:${TOKEN}`)}`, true), true);
    assert.equal(matches(`Basic ${base64(`anyone:${TOKEN}`)}`), false, "Basic only where a browser is asked");
    for (const header of [
      undefined,
      "",
      "Bearer",
      "Bearer ",
      `Bearer ${TOKEN} extra`,
      `Token ${TOKEN}`,
      `Basic ${base64(TOKEN)}`,
      `Basic ${base64(`${TOKEN}:`)}`,
      `Basic ${base64(`${TOKEN}:x`)}`,
      `Basic ${base64(`a:${TOKEN}x`)}`,
      "Basic !!!",
    ])
      assert.equal(matches(header, true), false, String(header));
  });

  it("takes the token from TASKQUEUE_API_TOKEN or the file TASKQUEUE_API_TOKEN_FILE names", () => {
    const dir = mkdtempSync(join(tmpdir(), "tq-auth-"));
    try {
      const file = join(dir, "token");
      writeFileSync(file, `${TOKEN}\n`);
      assert.equal(configFromEnv({ TASKQUEUE_API_TOKEN_FILE: file }).apiToken, TOKEN);
      assert.equal(configFromEnv({ TASKQUEUE_API_TOKEN: TOKEN }).apiToken, TOKEN);
      assert.equal(configFromEnv({}).apiToken, undefined);
      assert.throws(
        () => configFromEnv({ TASKQUEUE_API_TOKEN_FILE: file, TASKQUEUE_API_TOKEN: TOKEN }),
        (e: unknown) => e instanceof ConfigError && e.field === "TASKQUEUE_API_TOKEN_FILE",
      );
      assert.throws(
        () => configFromEnv({ TASKQUEUE_API_TOKEN_FILE: join(dir, "missing") }),
        (e: unknown) => e instanceof ConfigError && /cannot read/.test(e.message),
      );
      writeFileSync(file, "short\n");
      assert.throws(
        () => configFromEnv({ TASKQUEUE_API_TOKEN_FILE: file }),
        (e: unknown) =>
          e instanceof ConfigError && e.field === "TASKQUEUE_API_TOKEN_FILE" && /at least 16/.test(e.message),
      );
      // DATABASE_URL_FILE works the same way.
      writeFileSync(file, "postgres://u:p@db:5432/x\n");
      assert.equal(configFromEnv({ DATABASE_URL_FILE: file }).databaseUrl, "postgres://u:p@db:5432/x");
    } finally {
      rmSync(dir, { recursive: true, force: true });
    }
  });

  it("refuses a token under 16 characters without echoing it", () => {
    assert.throws(
      () => configFromEnv({ TASKQUEUE_API_TOKEN: "hunter2" }),
      (e: unknown) =>
        e instanceof ConfigError &&
        e.field === "TASKQUEUE_API_TOKEN" &&
        /at least 16 characters/.test(e.message) &&
        !e.message.includes("hunter2"),
    );
  });

  it("allows no token only on loopback, or when told --insecure-no-auth", () => {
    for (const host of ["127.0.0.1", "127.1.2.3", "localhost", "::1", "[::1]"])
      assert.equal(isLoopbackHost(host), true, host);
    for (const host of ["0.0.0.0", "::", "10.0.0.1", "example.com", "128.0.0.1"])
      assert.equal(isLoopbackHost(host), false, host);
    assert.throws(
      () => assertSafeBind({ host: "0.0.0.0", apiToken: undefined, insecureNoAuth: false }),
      (e: unknown) => e instanceof ConfigError && /--insecure-no-auth/.test(e.message),
    );
    assertSafeBind({ host: "0.0.0.0", apiToken: TOKEN, insecureNoAuth: false });
    assertSafeBind({ host: "0.0.0.0", apiToken: undefined, insecureNoAuth: true });
  });
});

describe("taskqueue api (the real process)", () => {
  let db: TestDb;
  let api: CliProcess | null = null;
  before(async () => {
    db = await createTestDb();
  });
  after(async () => {
    api?.child.kill("SIGTERM");
    await api?.exited;
    await db.drop();
  });

  it("exits 2 naming TASKQUEUE_API_TOKEN and --insecure-no-auth when HOST is not loopback and no token is set", async () => {
    const env = cliEnv(db, { HOST: "0.0.0.0", PORT: "0" });
    delete env.TASKQUEUE_API_TOKEN;
    delete env.TASKQUEUE_API_TOKEN_FILE;
    const failed = await run(process.execPath, [CLI, "api", "--no-migrate"], { env, timeout: 20_000 }).then(
      () => assert.fail("the API started"),
      (error: { code: number; stderr: string }) => error,
    );
    assert.equal(failed.code, 2);
    assert.match(failed.stderr, /TASKQUEUE_API_TOKEN/);
    assert.match(failed.stderr, /--insecure-no-auth/);
  });

  it("serves over HTTP with the token from a file, on 0.0.0.0", async () => {
    const dir = mkdtempSync(join(tmpdir(), "tq-auth-"));
    try {
      writeFileSync(join(dir, "token"), `${TOKEN}\n`);
      api = startCli(
        ["api", "--no-migrate"],
        cliEnv(db, { HOST: "0.0.0.0", PORT: "0", TASKQUEUE_API_TOKEN_FILE: join(dir, "token") }),
      );
      const listening = await api.waitForLog((l) => l.msg === "API listening");
      const port = new URL(String(listening.url)).port;
      const base = `http://127.0.0.1:${port}`;
      assert.equal((await fetch(`${base}/jobs`)).status, 401);
      assert.equal((await fetch(`${base}/health`)).status, 200);
      const ok = await fetch(`${base}/jobs`, { headers: { authorization: `Bearer ${TOKEN}` } });
      assert.equal(ok.status, 200);
    } finally {
      rmSync(dir, { recursive: true, force: true });
    }
  });
});
