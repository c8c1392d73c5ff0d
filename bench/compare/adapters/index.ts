/**
 * Adapter factory. Each system's module is imported only when that system runs (in its own child
 * process, see run-system.ts), so no library's import-time side effects reach another's row.
 */
import type { BenchContext, SystemAdapter, SystemName } from "../types.js";

export async function createAdapter(system: SystemName, ctx: BenchContext): Promise<SystemAdapter> {
  switch (system) {
    case "taskqueue":
      return new (await import("./taskqueue.js")).TaskQueueAdapter(ctx);
    case "taskqueue-baseline":
      if (!ctx.baselineDir) throw new Error("taskqueue-baseline runs only with --baseline DIR");
      return new (await import("./taskqueue.js")).TaskQueueAdapter(ctx, 1, ctx.baselineDir);
    case "taskqueue-2-sessions":
      return new (await import("./taskqueue.js")).TaskQueueAdapter(ctx, 2);
    case "taskqueue-http":
      return new (await import("./taskqueue-http.js")).TaskQueueHttpAdapter(ctx);
    case "pg-boss":
      return new (await import("./pg-boss.js")).PgBossAdapter(ctx, false);
    case "pg-boss-batch":
      return new (await import("./pg-boss.js")).PgBossAdapter(ctx, true);
    case "graphile-worker":
      return new (await import("./graphile-worker.js")).GraphileWorkerAdapter(ctx);
    case "bullmq":
      return new (await import("./bullmq.js")).BullMqAdapter(ctx, false);
    case "bullmq-redis":
      return new (await import("./bullmq.js")).BullMqAdapter(ctx, true);
    case "sql-floor":
      return new (await import("./sql-floor.js")).SqlFloorAdapter(ctx);
  }
}
