/**
 * The health file a service process keeps (`TASKQUEUE_HEALTH_FILE`, `--health-file`) and
 * `taskqueue health`, which reads it: the Docker image's HEALTHCHECK, for an API and for a worker
 * alike, in compose or outside it (`docker run … worker`, Swarm, ECS).
 *
 * The file holds a {@link HealthRecord}. A worker rewrites it after each heartbeat of its lock
 * sessions (every `heartbeatIntervalSeconds`) while every one is open, so its age says whether the
 * worker still reaches the database; an API writes its loopback `/health` URL once listening, and
 * the check asks that URL. A graceful stop removes the file.
 */

import { readFile, rename, rm, stat, writeFile } from "node:fs/promises";
import { get, type IncomingMessage } from "node:http";
import { get as getHttps } from "node:https";
import { ConfigError } from "../errors.js";
import type { Logger } from "../log.js";

/** What a service process writes to its health file (JSON). */
export interface HealthRecord {
  /** The process that wrote it. */
  pid: number;
  /** The API's `GET /health` on a loopback address, once it listens; null: this process serves no API. */
  apiHealthUrl: string | null;
  /** Whether the process runs a worker: then the file must be younger than `staleThresholdSeconds`. */
  worker: boolean;
  /** The worker's stale threshold (`STALE_THRESHOLD_SECONDS`), seconds. */
  staleThresholdSeconds: number;
}

/**
 * The health file of one service process. Writes go one at a time, each to a temporary file renamed
 * over the path, so that a reader never sees half a record.
 */
export class HealthFile {
  private record: HealthRecord;
  private writing: Promise<void> = Promise.resolve();
  private removed = false;

  constructor(
    readonly path: string,
    record: Omit<HealthRecord, "pid">,
    private readonly logger: Logger,
  ) {
    this.record = { pid: process.pid, ...record };
  }

  /**
   * Rewrites the file with `changes` merged into the record (also its modification time: a
   * worker's heartbeat).
   * @throws {ConfigError} naming TASKQUEUE_HEALTH_FILE when the file cannot be written.
   */
  write(changes: Partial<Omit<HealthRecord, "pid">> = {}): Promise<void> {
    this.record = { ...this.record, ...changes };
    const text = `${JSON.stringify(this.record)}\n`;
    const next = this.writing.then(async () => {
      if (this.removed) return;
      const temporary = `${this.path}.${process.pid}.tmp`;
      try {
        await writeFile(temporary, text, { mode: 0o644 });
        await rename(temporary, this.path);
      } catch (error) {
        throw new ConfigError(
          "TASKQUEUE_HEALTH_FILE",
          `cannot write ${this.path}: ${(error as Error).message}`,
        );
      }
    });
    this.writing = next.catch(() => undefined);
    return next;
  }

  /** {@link write}, logging a failure at warn instead of throwing (a heartbeat's touch). */
  touch(): void {
    this.write().catch((error: unknown) => this.logger.warn({ err: error }, "health file not written"));
  }

  /** Removes the file (a stopping process is not healthy); later writes do nothing. Never throws. */
  async remove(): Promise<void> {
    this.removed = true;
    await this.writing;
    await rm(this.path, { force: true }).catch(() => undefined);
  }
}

/**
 * The URL of `GET /health` (`scheme`: https when the API serves TLS) of an API listening on `address`: the wildcard addresses are asked on
 * 127.0.0.1 (Node listens on `::` dual-stack), any other address as it is.
 */
export function loopbackHealthUrl(address: string, port: number, scheme: "http" | "https" = "http"): string {
  const host =
    address === "0.0.0.0" || address === "::" || address === ""
      ? "127.0.0.1"
      : address.includes(":")
        ? `[${address}]`
        : address;
  return `${scheme}://${host}:${port}/health`;
}

/** The verdict of {@link checkHealth}: `healthy`, and one line saying why. */
export interface HealthVerdict {
  healthy: boolean;
  message: string;
}

/**
 * GET `url` within `timeoutMs` (connecting included). Healthy on a 2xx answer.
 * Never throws: a refused connection or the deadline is an unhealthy verdict. An https URL's
 * certificate is not verified: it names the API's public host, not the loopback address, and the
 * probe asks the process next to it, not a server across a network.
 */
export function probeHttp(url: string, timeoutMs: number): Promise<HealthVerdict> {
  return new Promise((resolve) => {
    let settled = false;
    const done = (verdict: HealthVerdict) => {
      if (settled) return;
      settled = true;
      clearTimeout(timer);
      request.destroy();
      resolve(verdict);
    };
    const onResponse = (response: IncomingMessage) => {
      const status = response.statusCode ?? 0;
      response.resume();
      done({ healthy: status >= 200 && status < 300, message: `API ${url} answered ${status}` });
    };
    const request = url.startsWith("https:")
      ? getHttps(url, { agent: false, rejectUnauthorized: false }, onResponse)
      : get(url, { agent: false }, onResponse);
    request.on("error", (error) => done({ healthy: false, message: `API ${url}: ${error.message}` }));
    const timer = setTimeout(
      () => done({ healthy: false, message: `API ${url}: no answer within ${timeoutMs} ms` }),
      timeoutMs,
    );
  });
}

/** Options of {@link checkHealth}. */
export interface HealthCheckOptions {
  /** The health file; undefined: ask the API at `fallbackUrl` only. */
  path: string | undefined;
  /** Where the API is asked when there is no health file to say (from HOST and PORT). */
  fallbackUrl: string;
  /** Bound of the HTTP probe, ms. */
  timeoutMs: number;
  /** Now, ms since the epoch (tests). Default `Date.now()`. */
  nowMs?: number;
}

/**
 * Whether the service process of this container (or host) is healthy: with a health file, a worker
 * is healthy while the file is younger than its stale threshold, and an API while its `/health`
 * answers 2xx within the bound; a missing or unreadable file is unhealthy. Without a health file,
 * the API at `fallbackUrl` is asked. Never throws.
 */
export async function checkHealth(options: HealthCheckOptions): Promise<HealthVerdict> {
  if (options.path === undefined) return probeHttp(options.fallbackUrl, options.timeoutMs);
  let record: HealthRecord;
  let modifiedMs: number;
  try {
    const [text, info] = await Promise.all([readFile(options.path, "utf8"), stat(options.path)]);
    record = JSON.parse(text) as HealthRecord;
    modifiedMs = info.mtimeMs;
  } catch (error) {
    const missing = (error as NodeJS.ErrnoException).code === "ENOENT";
    return {
      healthy: false,
      message: missing
        ? `no health file at ${options.path}: the process has not started yet, or has stopped`
        : `health file ${options.path} unreadable: ${(error as Error).message}`,
    };
  }
  const parts: string[] = [];
  if (record.worker) {
    const ageSeconds = Math.max(0, ((options.nowMs ?? Date.now()) - modifiedMs) / 1000);
    const threshold = Number(record.staleThresholdSeconds);
    const line = `worker heartbeat ${ageSeconds.toFixed(1)} s ago (stale after ${threshold} s)`;
    if (!(ageSeconds <= threshold)) return { healthy: false, message: line };
    parts.push(line);
  }
  if (typeof record.apiHealthUrl === "string") {
    const verdict = await probeHttp(record.apiHealthUrl, options.timeoutMs);
    if (!verdict.healthy) return verdict;
    parts.push(verdict.message);
  }
  if (parts.length === 0)
    return { healthy: false, message: `health file ${options.path} names neither a worker nor an API yet` };
  return { healthy: true, message: parts.join("; ") };
}
