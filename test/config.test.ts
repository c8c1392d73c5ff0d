/** Configuration (DESIGN.md §9): a bad value is refused at start-up, naming the variable. */
import assert from "node:assert/strict";
import { describe, it } from "node:test";
import { FormatRegistry, TypeRegistry } from "@sinclair/typebox";
import {
  API_ONLY_OPTIONS,
  CONFIG_SCHEMA,
  configFromEnv,
  environmentVariables,
  resolveConfig,
} from "../src/config.js";
import { ConfigError } from "../src/errors.js";

function refused(env: Record<string, string>, field: string): void {
  assert.throws(
    () => configFromEnv(env),
    (error: unknown) => error instanceof ConfigError && error.field === field,
    `expected a ConfigError naming ${field} for ${JSON.stringify(env)}`,
  );
}

describe("configuration", () => {
  it("has the documented defaults", () => {
    const config = configFromEnv({});
    assert.equal(config.port, 8000);
    assert.equal(config.workerCount, 4);
    assert.equal(config.pollIntervalSeconds, 5);
    assert.equal(config.heartbeatIntervalSeconds, 10);
    assert.equal(config.reaperIntervalSeconds, 15);
    assert.equal(config.staleThresholdSeconds, 30);
    assert.equal(config.shutdownGraceSeconds, 60);
    assert.equal(config.backoffBaseSeconds, 1);
    assert.equal(config.backoffMaxSeconds, 3600);
    assert.equal(config.backoffJitter, true);
    assert.equal(config.schema, "taskqueue");
    assert.equal(config.notifyChannel, "job_channel");
    assert.equal(config.allowedJobTypes, undefined);
    assert.equal(config.idempotencyWindowSeconds, 86_400);
    assert.equal(config.retainDoneSeconds, 7 * 86_400);
    assert.equal(config.retainDeadSeconds, 30 * 86_400);
    assert.equal(config.pruneIntervalSeconds, 60);
  });

  it("reads ALLOWED_JOB_TYPES as a comma-separated list (empty: any type) and refuses an empty name", () => {
    assert.deepEqual(configFromEnv({ ALLOWED_JOB_TYPES: " echo, noop ,collatz" }).allowedJobTypes, [
      "echo",
      "noop",
      "collatz",
    ]);
    assert.equal(configFromEnv({ ALLOWED_JOB_TYPES: "" }).allowedJobTypes, undefined);
    refused({ ALLOWED_JOB_TYPES: "echo,,noop" }, "ALLOWED_JOB_TYPES");
    refused({ ALLOWED_JOB_TYPES: "x".repeat(201) }, "ALLOWED_JOB_TYPES");
    assert.throws(() => resolveConfig({ allowedJobTypes: [] }), /allowedJobTypes: must be a non-empty list/);
    refused({ RETAIN_DONE_SECONDS: "-1" }, "RETAIN_DONE_SECONDS");
    refused({ IDEMPOTENCY_WINDOW_SECONDS: "soon" }, "IDEMPOTENCY_WINDOW_SECONDS");
    assert.equal(configFromEnv({ RETAIN_DEAD_SECONDS: "0" }).retainDeadSeconds, 0);
  });

  it("reads the environment", () => {
    const config = configFromEnv({
      PORT: "9000",
      WORKER_COUNT: "8",
      BACKOFF_JITTER: "false",
      LOG_LEVEL: "debug",
    });
    assert.deepEqual(
      [config.port, config.workerCount, config.backoffJitter, config.logLevel],
      [9000, 8, false, "debug"],
    );
  });

  it("names the variable of each bad value", () => {
    refused({ PORT: "abc" }, "PORT");
    refused({ PORT: "0x1F40" }, "PORT");
    refused({ PORT: "8e3" }, "PORT");
    refused({ WORKER_COUNT: "0" }, "WORKER_COUNT");
    refused({ WORKER_COUNT: "2.5" }, "WORKER_COUNT");
    refused({ WORKER_COUNT: "+2" }, "WORKER_COUNT");
    refused({ WORKER_COUNT: "-2" }, "WORKER_COUNT");
    refused({ BACKOFF_JITTER: "maybe" }, "BACKOFF_JITTER");
    refused({ LOG_LEVEL: "loud" }, "LOG_LEVEL");
    refused({ TASKQUEUE_SCHEMA: "Bad-Name" }, "TASKQUEUE_SCHEMA");
    refused({ TASKQUEUE_SCHEMA: "public" }, "TASKQUEUE_SCHEMA");
    refused({ DATABASE_URL: "notaurl" }, "DATABASE_URL");
    refused({ DATABASE_URL: "mysql://localhost/db" }, "DATABASE_URL");
    refused({ BACKOFF_BASE_SECONDS: "10", BACKOFF_MAX_SECONDS: "5" }, "BACKOFF_MAX_SECONDS");
  });

  it("does not read a variable that an override replaces, so a bad one does not matter", () => {
    const config = configFromEnv({ WORKER_COUNT: "abc", PORT: "9000" }, { workerCount: 6 });
    assert.deepEqual([config.workerCount, config.port], [6, 9000]);
    refused({ WORKER_COUNT: "abc" }, "WORKER_COUNT");
  });

  it("does not read the API's variables for a process without the API, so a bad PORT does not matter", () => {
    const config = configFromEnv({ PORT: "abc", HOST: "", WORKER_COUNT: "3" }, {}, API_ONLY_OPTIONS);
    assert.deepEqual([config.port, config.host, config.workerCount], [8000, "127.0.0.1", 3]);
    refused({ PORT: "abc" }, "PORT");
  });

  it("refuses a stale threshold that live workers' heartbeats cannot beat", () => {
    refused({ HEARTBEAT_INTERVAL_SECONDS: "10", STALE_THRESHOLD_SECONDS: "10" }, "STALE_THRESHOLD_SECONDS");
    assert.throws(
      () => resolveConfig({ heartbeatIntervalSeconds: 5, staleThresholdSeconds: 1 }),
      /staleThresholdSeconds/,
    );
  });

  it("refuses an option it does not know, naming the nearest one (a typo from JavaScript)", () => {
    const typo = { databaseUrl: "postgres://h/db", wokerCount: 2 } as unknown as Parameters<
      typeof resolveConfig
    >[0];
    assert.throws(
      () => resolveConfig(typo),
      (error) =>
        error instanceof ConfigError &&
        error.field === "wokerCount" &&
        /did you mean workerCount\?/.test(error.message),
    );
    const unrelated = { somethingElse: 1 } as unknown as Parameters<typeof resolveConfig>[0];
    assert.throws(() => resolveConfig(unrelated), /somethingElse.*is not an option$/);
  });

  it("describes every option in one TypeBox schema: its variable, default and a description", () => {
    const defaults = resolveConfig();
    for (const [field, property] of Object.entries(CONFIG_SCHEMA.properties)) {
      const keywords = property as { env?: unknown; default?: unknown; description?: unknown };
      assert.match(String(keywords.env), /^[A-Z][A-Z_]+$/, `${field} names its variable`);
      assert.equal(keywords.default, defaults[field as keyof typeof defaults], `${field}'s default`);
      assert.match(String(keywords.description), /default/i, `${field}'s description states its default`);
    }
    assert.deepEqual(
      environmentVariables().map((v) => [v.field, v.env]),
      Object.entries(CONFIG_SCHEMA.properties).map(([field, p]) => [field, (p as { env?: string }).env]),
    );
  });

  it("refuses what the schema's keywords refuse, with the bound in the message", () => {
    assert.throws(
      () => configFromEnv({ WORKER_LOCK_SESSIONS: "17" }),
      /WORKER_LOCK_SESSIONS: must be between 1 and 16, got 17/,
    );
    assert.throws(() => resolveConfig({ port: 65_536 }), /port: must be between 0 and 65535, got 65536/);
    assert.throws(
      () => resolveConfig({ logLevel: "loud" as "info" }),
      /logLevel: must be one of fatal, error/,
    );
    assert.throws(
      () => resolveConfig({ notifyChannel: "A" }),
      /notifyChannel: must be a lower-case SQL identifier, got "A"/,
    );
    assert.throws(() => resolveConfig({ host: "" }), /host: must be a non-empty string/);
  });

  it("registers no TypeBox format or kind (no global side effect of importing the configuration)", () => {
    assert.deepEqual([...FormatRegistry.Entries().keys()], []);
    assert.deepEqual([...TypeRegistry.Entries().keys()], []);
  });
});
