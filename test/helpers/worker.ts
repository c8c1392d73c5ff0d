import type { ResolvedConfig } from "../../src/config.js";
import { createLogger } from "../../src/log.js";
import { registerBuiltinHandlers } from "../../src/worker/handlers/index.js";
import { HandlerRegistry, type JobHandler } from "../../src/worker/registry.js";
import { Worker } from "../../src/worker/worker.js";
import type { TestDb } from "./db.js";

/** A started worker on the test schema: built-in handlers plus `handlers`, tiny intervals. */
export async function startWorker(
  db: TestDb,
  options: {
    handlers?: Record<string, JobHandler>;
    builtins?: boolean;
    config?: Partial<ResolvedConfig>;
    runReaper?: boolean;
    types?: string[];
  } = {},
): Promise<Worker> {
  const registry = new HandlerRegistry();
  if (options.builtins !== false) registerBuiltinHandlers(registry);
  for (const [type, handler] of Object.entries(options.handlers ?? {})) registry.register(type, handler);
  const worker = new Worker({
    config: { ...db.config, ...options.config, databaseUrl: db.config.databaseUrl as string },
    registry,
    ledger: db.ledger,
    logger: createLogger("silent"),
    runReaper: options.runReaper ?? false,
    types: options.types,
  });
  await worker.start();
  return worker;
}
