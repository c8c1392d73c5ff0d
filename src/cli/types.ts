/**
 * `taskqueue types list|pause|resume` (issue 14, items 6 and 8): job types on the queue's database
 * (DATABASE_URL and the other variables, as `dead` opens it), through the library. A paused type's
 * jobs are claimed by no worker on any host from its next claim on; running jobs finish.
 */
import type { Command } from "commander";
import type { TypeLimit, TypeLimitOptions, TypePause, TypeState, TypeStateLimit } from "../index.js";
import { TYPE_LIMIT_BOUNDS } from "../queue/type-limits.js";
import { withQueue } from "./dead.js";
import { positiveInteger, positiveNumber } from "./flags.js";

/** A type's limits in words: `max 5 running, 50/s (burst 50)`. */
function limitText(l: TypeStateLimit): string {
  const parts: string[] = [];
  if (l.maxRunning !== null) parts.push(`max ${l.maxRunning} running`);
  if (l.ratePerSecond !== null)
    parts.push(`${l.ratePerSecond}/s (burst ${l.burst ?? `${Math.ceil(l.ratePerSecond)}, the default`})`);
  return parts.join(", ");
}

/** One line of `types limit`. */
function limitLine(l: TypeLimit): string {
  return `limited ${l.type}: ${limitText(l)}`;
}

/** One line of `types list`. */
function typeLine(t: TypeState): string {
  const age = t.oldestPendingAgeSeconds === null ? "-" : `${t.oldestPendingAgeSeconds.toFixed(1)}s`;
  const state = t.paused ? `paused since ${t.pausedAt?.toISOString()}` : "active";
  const unhandled = t.pending > 0 && t.liveWorkers === 0 ? "  no live worker" : "";
  const limit = t.limit ? `  limit: ${limitText(t.limit)}` : "";
  return `${t.type.padEnd(24)} ${String(t.pending).padStart(9)} ${age.padStart(10)} ${String(t.liveWorkers).padStart(7)}  ${state}${limit}${unhandled}`;
}

/** One line of `types pause` and `types resume`. */
function pauseLine(p: TypePause): string {
  return p.paused ? `paused ${p.type} (since ${p.pausedAt?.toISOString()})` : `resumed ${p.type}`;
}

/** The flags of `types limit`. */
interface LimitFlags {
  maxRunning?: number;
  rate?: number;
  burst?: number;
}

/** Registers `types` (list, pause, resume, limit, unlimit) on `program`. */
export function registerTypeCommands(program: Command): void {
  const types = program
    .command("types")
    .description(
      "job types: pending jobs and live workers per type; pause and resume claiming a type; global limits per type (DATABASE_URL, or the embedded database of a running npm start here)",
    );

  types
    .command("list")
    .description(
      "every type with pending jobs, paused, limited, or claimed by a live worker: pending jobs, age of the oldest due one, live workers, limits",
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

  const limit = types
    .command("limit <type>")
    .description(
      "limit <type> over every worker on every host: at most --max-running jobs held (claimed or running), at most --rate claims per second; replaces its limits (one left out is removed)",
    )
    .option(
      "--max-running <n>",
      "most jobs of the type held at once",
      positiveInteger("--max-running", TYPE_LIMIT_BOUNDS.maxRunning),
    )
    .option("--rate <per-second>", "most claims of the type per second", positiveNumber("--rate"))
    .option(
      "--burst <n>",
      "most claims at once after an idle spell (default: ceil of --rate)",
      positiveInteger("--burst", TYPE_LIMIT_BOUNDS.burst),
    )
    .action((type: string, flags: LimitFlags) => {
      if (flags.maxRunning === undefined && flags.rate === undefined)
        limit.error("error: set --max-running, --rate, or both");
      if (flags.burst !== undefined && flags.rate === undefined) limit.error("error: --burst needs --rate");
      const options: TypeLimitOptions = {};
      if (flags.maxRunning !== undefined) options.maxRunning = flags.maxRunning;
      if (flags.rate !== undefined) options.ratePerSecond = flags.rate;
      if (flags.burst !== undefined) options.burst = flags.burst;
      return withQueue("types limit", async (queue) =>
        console.log(limitLine(await queue.setTypeLimit(type, options))),
      );
    });

  types
    .command("unlimit <type>")
    .description("remove the limits of <type>: workers claim it without limits again (idempotent)")
    .action((type: string) =>
      withQueue("types unlimit", async (queue) =>
        console.log((await queue.removeTypeLimit(type)) ? `unlimited ${type}` : `${type} had no limits`),
      ),
    );
}
