/**
 * `taskqueue types list|pause|resume` (issue 14, items 6 and 8): job types on the queue's database
 * (DATABASE_URL and the other variables, as `dead` opens it), through the library. A paused type's
 * jobs are claimed by no worker on any host from its next claim on; running jobs finish.
 */
import type { Command } from "commander";
import type { TypePause, TypeState } from "../index.js";
import { withQueue } from "./dead.js";

/** One line of `types list`. */
function typeLine(t: TypeState): string {
  const age = t.oldestPendingAgeSeconds === null ? "-" : `${t.oldestPendingAgeSeconds.toFixed(1)}s`;
  const state = t.paused ? `paused since ${t.pausedAt?.toISOString()}` : "active";
  const unhandled = t.pending > 0 && t.liveWorkers === 0 ? "  no live worker" : "";
  return `${t.type.padEnd(24)} ${String(t.pending).padStart(9)} ${age.padStart(10)} ${String(t.liveWorkers).padStart(7)}  ${state}${unhandled}`;
}

/** One line of `types pause` and `types resume`. */
function pauseLine(p: TypePause): string {
  return p.paused ? `paused ${p.type} (since ${p.pausedAt?.toISOString()})` : `resumed ${p.type}`;
}

/** Registers `types` (list, pause, resume) on `program`. */
export function registerTypeCommands(program: Command): void {
  const types = program
    .command("types")
    .description(
      "job types: pending jobs and live workers per type; pause and resume claiming a type (needs DATABASE_URL)",
    );

  types
    .command("list")
    .description(
      "every type with pending jobs, paused, or claimed by a live worker: pending jobs, age of the oldest due one, live workers",
    )
    .option("--json", "print the types as JSON")
    .action((flags: { json?: boolean }) =>
      withQueue("types list", async (queue) => {
        const listed = await queue.listTypes();
        if (flags.json) console.log(JSON.stringify(listed, null, 2));
        else if (listed.length === 0) console.log("no types");
        else {
          console.log(
            `${"TYPE".padEnd(24)} ${"PENDING".padStart(9)} ${"OLDEST".padStart(10)} ${"WORKERS".padStart(7)}  STATE`,
          );
          for (const t of listed) console.log(typeLine(t));
        }
      }),
    );

  types
    .command("pause <type>")
    .description("stop every worker on every host from claiming <type> (running jobs finish; idempotent)")
    .action((type: string) =>
      withQueue("types pause", async (queue) => console.log(pauseLine(await queue.pauseType(type)))),
    );

  types
    .command("resume <type>")
    .description("let workers claim <type> again, waking idle ones at once (idempotent)")
    .action((type: string) =>
      withQueue("types resume", async (queue) => console.log(pauseLine(await queue.resumeType(type)))),
    );
}
