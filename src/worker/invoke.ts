/**
 * Running one handler: in this process, or in a child process of the lane's sandbox pool for a
 * sandboxed handler (sandbox/pool.ts), which hands the job's abort, with its typed reason, to the
 * child.
 */
import type { ResolvedConfig } from "../config.js";
import { HandlerMissingError } from "../errors.js";
import type { Logger } from "../log.js";
import type { ClaimedJob } from "../queue/lock-session.js";
import { type HandlerJob, isSandboxed, type RegisteredHandler } from "./registry.js";
import { failureOutcome, type HandlerOutcome, resultOutcome } from "./sandbox/outcome.js";
import { SandboxPool } from "./sandbox/pool.js";

export class HandlerInvoker {
  /** The child processes of sandboxed handlers, forked at the first sandboxed job. */
  private sandbox: SandboxPool | null = null;

  constructor(
    private readonly config: ResolvedConfig,
    private readonly logger: Logger,
  ) {}

  /**
   * Runs the job's handler with `signal`. Never throws: a failure (a throw, a result that cannot be
   * stored, a crash of the handler's process) is `{ error }`.
   */
  async invoke(
    job: ClaimedJob,
    handler: RegisteredHandler | undefined,
    signal: AbortSignal,
  ): Promise<HandlerOutcome> {
    const handlerJob: HandlerJob = {
      id: job.id,
      type: job.type,
      payload: job.payload,
      attempt: job.attempt,
      maxRetries: job.maxRetries,
    };
    try {
      if (!handler) throw new HandlerMissingError([job.type]);
      if (isSandboxed(handler)) {
        this.sandbox ??= new SandboxPool({
          size: this.config.workerCount,
          killGraceMs: this.config.handlerKillGraceSeconds * 1000,
          logger: this.logger,
        });
        return await this.sandbox.run(handler, handlerJob, signal);
      }
      return resultOutcome(await handler(handlerJob, signal));
    } catch (error) {
      return failureOutcome(error);
    }
  }

  /** Ends the sandboxed handlers' child processes (stop), within the kill grace. Never throws. */
  async close(): Promise<void> {
    await this.sandbox?.close();
  }
}
