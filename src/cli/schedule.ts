/**
 * `taskqueue schedule add|list|show|remove` (issue 13, item 2): cron schedules on the queue's
 * database (DATABASE_URL and the other variables, as `dead` opens it), through the library. Every
 * tick of a schedule enqueues one job from whichever worker process passes first; these commands
 * only write and read the schedules.
 */
import { type Command, InvalidArgumentError, Option } from "commander";
import type { JsonValue, Schedule } from "../index.js";
import { withQueue } from "./dead.js";
import { nonNegativeInteger, positiveInteger } from "./flags.js";

/** `--payload`: JSON text. */
const jsonValue = (value: string): JsonValue => {
  try {
    return JSON.parse(value) as JsonValue;
  } catch {
    throw new InvalidArgumentError('--payload must be JSON, e.g. \'{"to":"a@example.com"}\'');
  }
};

/** One line of `schedule list`. */
function scheduleLine(s: Schedule): string {
  const next = s.nextTickAt ? `next ${s.nextTickAt.toISOString()}` : "no next tick";
  return `${s.name.padEnd(24)} ${s.cron.padEnd(18)} ${s.timezone.padEnd(16)} ${s.type.padEnd(16)} ${next}${s.catchUp ? "  catch-up" : ""}`;
}

interface AddFlags {
  type: string;
  payload?: JsonValue;
  timezone?: string;
  catchUp?: boolean;
  priority?: number;
  maxRetries?: number;
}

/** Registers `schedule` (add, list, show, remove) on `program`. */
export function registerScheduleCommands(program: Command): void {
  const schedule = program
    .command("schedule")
    .description(
      "cron schedules: each tick enqueues one job, however many workers run (DATABASE_URL, or the embedded database of a running npm start here)",
    );

  schedule
    .command("add <name> <cron>")
    .description(
      "create or replace a schedule: <cron> has 5 fields, or 6 with seconds first (quote it), e.g. '30 2 * * *'",
    )
    .requiredOption("--type <type>", "job type of every tick's job")
    .addOption(
      new Option("--payload <json>", "payload of every tick's job (default {})").argParser(jsonValue),
    )
    .option("--timezone <zone>", "IANA time zone the expression is read in (default UTC)")
    .option("--catch-up", "after a downtime, enqueue the missed ticks (up to SCHEDULE_CATCH_UP_LIMIT)")
    .addOption(new Option("--priority <n>", "1–10 (default 5)").argParser(positiveInteger("--priority", 10)))
    .addOption(
      new Option("--max-retries <n>", "0–10 (default 3)").argParser(nonNegativeInteger("--max-retries")),
    )
    .action((name: string, cron: string, flags: AddFlags) =>
      withQueue("schedule add", async (queue) => {
        const { type, payload, timezone, catchUp, priority, maxRetries } = flags;
        const stored = await queue.schedule(name, cron, {
          type,
          ...(payload === undefined ? {} : { payload }),
          ...(timezone === undefined ? {} : { timezone }),
          ...(catchUp === undefined ? {} : { catchUp }),
          ...(priority === undefined ? {} : { priority }),
          ...(maxRetries === undefined ? {} : { maxRetries }),
        });
        console.log(`scheduled ${scheduleLine(stored)}`);
      }),
    );

  schedule
    .command("list")
    .description("list schedules by name")
    .option("--json", "print the schedules as JSON")
    .action((flags: { json?: boolean }) =>
      withQueue("schedule list", async (queue) => {
        const schedules = await queue.listSchedules();
        if (flags.json) console.log(JSON.stringify(schedules, null, 2));
        else if (schedules.length === 0) console.log("no schedules");
        else for (const s of schedules) console.log(scheduleLine(s));
      }),
    );

  schedule
    .command("show <name>")
    .description("print one schedule as JSON (exit 1 if there is none)")
    .action((name: string) =>
      withQueue("schedule show", async (queue) => {
        const found = await queue.getSchedule(name);
        if (!found) {
          console.error(`taskqueue: schedule ${JSON.stringify(name)} does not exist`);
          process.exitCode = 1;
          return;
        }
        console.log(JSON.stringify(found, null, 2));
      }),
    );

  schedule
    .command("remove <name>")
    .description("delete a schedule (the jobs it enqueued stay; exit 1 if there is none)")
    .action((name: string) =>
      withQueue("schedule remove", async (queue) => {
        const removed = await queue.unschedule(name);
        console.log(`removed ${scheduleLine(removed)}`);
      }),
    );
}
