/**
 * A worker process's own metrics (per process; the database-wide ones are the API's
 * GET /metrics/prometheus): its job events and run times by type, the handlers it runs now, and
 * prom-client's process and Node metrics; served on `workerMetricsPort` by {@link serveMetrics}.
 * Values start at zero with the process, as Prometheus expects of a counter.
 */
import { createServer, type Server } from "node:http";
import type { AddressInfo } from "node:net";
import { Counter, Gauge, Histogram, Registry } from "prom-client";
import { HISTOGRAM_BOUNDS_SECONDS } from "../queue/sql/accounting.js";
import { processMetrics } from "./exposition.js";

/** The job events a worker process counts. */
export type WorkerJobEvent =
  | "claimed"
  | "completed"
  | "retried"
  | "dead"
  | "released"
  | "fenced"
  | "aborted"
  | "overdue";

export class WorkerProcessMetrics {
  readonly registry = new Registry();
  private readonly events: Counter<"type" | "event">;
  private readonly runSeconds: Histogram<"type">;

  /** @param running the handlers this process runs now (read at scrape time). */
  constructor(running: () => number) {
    const registers = [this.registry];
    processMetrics(this.registry);
    this.events = new Counter({
      name: "taskqueue_worker_job_events_total",
      help: "Job events of this worker process, by type and event (claimed, completed, retried, dead, released, fenced, aborted, overdue).",
      labelNames: ["type", "event"],
      registers,
    });
    this.runSeconds = new Histogram({
      name: "taskqueue_worker_job_run_seconds",
      help: "Handler run time of the attempts this worker process finished (completed or failed), by type.",
      labelNames: ["type"],
      buckets: [...HISTOGRAM_BOUNDS_SECONDS],
      registers,
    });
    new Gauge({
      name: "taskqueue_worker_jobs_running",
      help: "Handlers this worker process runs now.",
      registers,
      collect() {
        this.set(running());
      },
    });
  }

  /** Counts one job event of `type`; `runMs`, the handler's run time, for a finished attempt. */
  count(type: string, event: WorkerJobEvent, runMs?: number): void {
    this.events.inc({ type, event });
    if (runMs !== undefined) this.runSeconds.observe({ type }, runMs / 1000);
  }
}

/** A metrics HTTP server: its address and how to close it. */
export interface MetricsServer {
  readonly host: string;
  readonly port: number;
  /** Closes the server and its connections. Idempotent. */
  close(): Promise<void>;
}

/**
 * Serves `registry` at GET /metrics (and GET /health, 200) on `host`:`port` (0: any free port).
 * Anything else answers 404. @throws the listen error (e.g. EADDRINUSE).
 */
export async function serveMetrics(registry: Registry, host: string, port: number): Promise<MetricsServer> {
  const server: Server = createServer((request, response) => {
    const path = (request.url ?? "/").split("?")[0];
    if (request.method !== "GET" || (path !== "/metrics" && path !== "/health")) {
      response.writeHead(404, { "content-type": "text/plain" }).end("not found\n");
      return;
    }
    if (path === "/health") {
      response.writeHead(200, { "content-type": "text/plain" }).end("ok\n");
      return;
    }
    registry.metrics().then(
      (text) => response.writeHead(200, { "content-type": registry.contentType }).end(text),
      (error: unknown) => response.writeHead(500, { "content-type": "text/plain" }).end(`${String(error)}\n`),
    );
  });
  await new Promise<void>((resolve, reject) => {
    server.once("error", reject);
    server.listen(port, host, () => {
      server.off("error", reject);
      resolve();
    });
  });
  const address = server.address() as AddressInfo;
  let closing: Promise<void> | null = null;
  return {
    host,
    port: address.port,
    close: () => {
      closing ??= new Promise<void>((resolve) => {
        server.close(() => resolve());
        server.closeAllConnections();
      });
      return closing;
    },
  };
}
