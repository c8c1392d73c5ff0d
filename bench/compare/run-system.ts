/**
 * One system's child process of run.ts (so that each library loads into a clean process): creates
 * the system's adapter, then runs the commands the parent sends (schedule.ts) one at a time and
 * answers each with the report so far. Exits after `teardown`, or, if the parent goes away, tears
 * down and exits.
 *
 * argv: system, options (JSON of RunOptions), run id.
 */
import { hostname } from "node:os";
import { createAdapter } from "./adapters/index.js";
import type { RunOptions } from "./cli.js";
import { Admin, describe, within } from "./harness.js";
import type { Command } from "./schedule.js";
import { SystemRun } from "./system-run.js";
import type { BenchContext, SystemName, SystemReport } from "./types.js";

/** Message from run.ts to this child: run `command`, answer with the same `id`. */
export type ParentMessage = { type: "command"; id: number; command: Command };

/**
 * Message from this child to run.ts: ready for commands (sent once, when listening), or `command`
 * number `id` ran, with the report so far.
 */
export type ChildMessage = { type: "ready" } | { type: "result"; id: number; report: SystemReport };

/** Bound of the teardown when the parent went away. */
const ORPHAN_TEARDOWN_MS = 60_000;

const log = (message: string) =>
  process.stderr.write(`[bench:compare ${new Date().toISOString().slice(11, 19)}] ${message}\n`);

function reply(message: ChildMessage): Promise<void> {
  return new Promise((resolve) => {
    if (!process.send || !process.connected) return resolve();
    process.send(message, (error: Error | null) => {
      if (error) log(`could not answer the runner: ${describe(error)}`);
      resolve();
    });
  });
}

/** Exits once the event loop is empty; a handle a library left open must not hang the run. */
function leave(system: string, code: number): void {
  process.exitCode = code;
  if (process.connected) process.disconnect();
  setTimeout(() => {
    log(`${system}: still open 5 s after teardown: ${process.getActiveResourcesInfo().join(", ")}; exiting`);
    process.exit(code);
  }, 5000).unref();
}

async function main(): Promise<void> {
  const [system, optionsJson, runId] = process.argv.slice(2) as [SystemName, string, string];
  const options = JSON.parse(optionsJson) as RunOptions;
  const admin = new Admin(options.databaseUrl);
  await admin.connect();
  const ctx: BenchContext = {
    databaseUrl: options.databaseUrl,
    redisUrl: options.redisUrl,
    runId,
    baselineDir: options.baseline,
    admin,
    log,
  };
  const adapter = await createAdapter(system, ctx);
  log(`${system}: start on ${hostname()} (${adapter.backend})`);
  const run = new SystemRun(adapter, options, admin, runId, log);

  // Commands run one at a time, in the order they arrive.
  let queue: Promise<void> = Promise.resolve();
  let tornDown = false;
  const finish = async () => {
    await admin.end();
    leave(system, 0);
  };
  process.on("message", (message: ParentMessage) => {
    if (message?.type !== "command") return;
    queue = queue.then(async () => {
      if (tornDown) return;
      await run.execute(message.command);
      if (message.command.kind === "teardown") tornDown = true;
      await reply({ type: "result", id: message.id, report: run.report });
      if (tornDown) await finish();
    });
  });
  process.on("disconnect", () => {
    queue = queue.then(async () => {
      if (tornDown) return;
      tornDown = true;
      log(`${system}: the runner went away; tearing down`);
      await within(run.execute({ kind: "teardown" }), ORPHAN_TEARDOWN_MS, "teardown").catch(() => undefined);
      await finish();
    });
  });
  await reply({ type: "ready" });
}

main().catch((error: unknown) => {
  process.stderr.write(`[bench:compare] ${describe(error)}\n`);
  leave("child", 1);
});
