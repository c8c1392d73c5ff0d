/**
 * Operator commands on finished jobs (issue 14): `taskqueue dead list|show|replay|discard`,
 * `taskqueue retry` and `taskqueue prune`. Each opens the queue's database as `inspect` does
 * (DATABASE_URL and the other variables), calls the library (src/index.ts), prints what it did and
 * closes. A bulk replay or discard goes in batches of `--batch-size` (one statement each) until no
 * entry is left, printing each batch.
 */
import { type Command, InvalidArgumentError, Option } from "commander";
import { API_ONLY_OPTIONS, configFromEnv } from "../config.js";
import { ConfigError, DeadLetterNotFoundError } from "../errors.js";
import type { DeadLetterBatch, DeadLetterJob, DeadLetterQuery } from "../index.js";
import { TaskQueue } from "../index.js";
import { isOffsetDateTime } from "../queue/validate.js";
import { operatorDatabaseUrl } from "./embedded-state.js";
import { nonNegativeInteger, positiveInteger } from "./flags.js";

/** A date-time flag: ISO-8601 with a UTC offset, as the API takes it. */
const dateTime = (flag: string) => (value: string) => {
  if (!isOffsetDateTime(value))
    throw new InvalidArgumentError(
      `${flag} must be an ISO-8601 date-time with a UTC offset, e.g. 2030-01-01T12:00:00Z`,
    );
  return new Date(value.replace(" ", "T"));
};

/** A job id argument: a positive integer. */
const jobId = (value: string): number => positiveInteger("job id")(value);

/**
 * Runs `action` with a queue on the database of the environment (or of a running `npm start` in this
 * checkout: {@link operatorDatabaseUrl}), closed afterwards.
 */
export async function withQueue<T>(command: string, action: (queue: TaskQueue) => Promise<T>): Promise<T> {
  const config = configFromEnv(process.env, {}, API_ONLY_OPTIONS);
  const databaseUrl = operatorDatabaseUrl(config.databaseUrl, command);
  const queue = new TaskQueue({ ...config, databaseUrl, logLevel: "warn" });
  try {
    return await action(queue);
  } finally {
    await queue.close();
  }
}

interface FilterFlags {
  type?: string;
  diedAfter?: Date;
  diedBefore?: Date;
  replayed?: boolean;
  waiting?: boolean;
  all?: boolean;
  batchSize?: number;
}

/** The filter flags of `dead list`, `replay` and `discard`. */
function filterFlags(command: Command, state: boolean): Command {
  command
    .option("--type <type>", "only entries of this job type")
    .addOption(
      new Option(
        "--died-after <time>",
        "only jobs that died after this ISO-8601 time (with offset)",
      ).argParser(dateTime("--died-after")),
    )
    .addOption(
      new Option(
        "--died-before <time>",
        "only jobs that died before this ISO-8601 time (with offset)",
      ).argParser(dateTime("--died-before")),
    );
  if (state)
    command
      .addOption(
        new Option("--replayed", "only entries whose job was replayed since it died").conflicts("waiting"),
      )
      .option("--waiting", "only entries whose job waits dead");
  return command;
}

/** `--replayed` / `--waiting` as the library's `replayed` filter. */
const replayedOf = (flags: FilterFlags): boolean | undefined =>
  flags.replayed ? true : flags.waiting ? false : undefined;

/** One line of `dead list`. */
function letterLine(entry: DeadLetterJob): string {
  const state = entry.replayedAt ? `replayed ${entry.replays}×` : "waiting";
  return `#${String(entry.jobId).padEnd(8)} ${entry.type.padEnd(16)} attempts ${String(entry.attempts).padEnd(3)} died ${entry.diedAt.toISOString()}  ${state.padEnd(12)} ${entry.error ?? ""}`.slice(
    0,
    200,
  );
}

/**
 * Runs `batch` until no entry is left, printing each batch as `verb` did it; returns the total.
 * @throws what `batch` throws (a bad or empty filter: JobValidationError).
 */
async function inBatches(verb: string, batch: () => Promise<DeadLetterBatch>): Promise<number> {
  let total = 0;
  for (;;) {
    const { ids, more } = await batch();
    total += ids.length;
    if (ids.length > 0) console.log(`${verb} ${ids.length} (${total} so far): ${ids[0]}…${ids.at(-1)}`);
    if (!more) break;
  }
  console.log(`${verb} ${total} in all`);
  return total;
}

/** Ids given, or a filter (`--all` when no other): not both, not neither. */
function idsOrFilter(ids: number[], flags: FilterFlags, verb: string): void {
  const filtered =
    flags.all || flags.type || flags.diedAfter || flags.diedBefore || flags.replayed || flags.waiting;
  if (ids.length > 0 && filtered)
    throw new ConfigError(verb, "give job ids or a filter (--type, --all, ...), not both");
  if (ids.length === 0 && !filtered)
    throw new ConfigError(verb, "give job ids, or a filter (--type, --died-after, --died-before) or --all");
}

/** Registers `dead` (list, show, replay, discard), `retry` and `prune` on `program`. */
export function registerDeadLetterCommands(program: Command): void {
  const dead = program
    .command("dead")
    .description(
      "dead letters: jobs that exhausted their retries or failed permanently (DATABASE_URL, or the embedded database of a running npm start here)",
    );

  filterFlags(dead.command("list").description("list dead letters, newest death first"), true)
    .addOption(
      new Option("--limit <n>", "entries to show, 1–1000")
        .default(50)
        .argParser(positiveInteger("--limit", 1000)),
    )
    .addOption(
      new Option("--offset <n>", "entries to skip").default(0).argParser(nonNegativeInteger("--offset")),
    )
    .option("--json", "print the entries as JSON")
    .action((flags: FilterFlags & { limit: number; offset: number; json?: boolean }) =>
      withQueue("dead list", async (queue) => {
        const entries = await queue.listDeadLetters({
          type: flags.type,
          diedAfter: flags.diedAfter,
          diedBefore: flags.diedBefore,
          replayed: replayedOf(flags),
          limit: flags.limit,
          offset: flags.offset,
        });
        if (flags.json) console.log(JSON.stringify(entries, null, 2));
        else if (entries.length === 0) console.log("no dead letters");
        else for (const entry of entries) console.log(letterLine(entry));
      }),
    );

  dead
    .command("show")
    .description("one dead letter, whole, as JSON")
    .argument("<job_id>", "the dead job's id", jobId)
    .action((id: number) =>
      withQueue("dead show", async (queue) => {
        const entry = await queue.getDeadLetter(id);
        if (!entry) throw new DeadLetterNotFoundError(id);
        console.log(JSON.stringify(entry, null, 2));
      }),
    );

  filterFlags(
    dead
      .command("replay")
      .description(
        "send dead jobs back to pending (attempts reset, history kept): by id, or all matching a filter",
      )
      .argument("[job_id...]", "dead jobs' ids", (value: string, ids: number[] = []) => [
        ...ids,
        jobId(value),
      ]),
    false,
  )
    .option("--all", "every dead letter whose job is still dead")
    .addOption(
      new Option("--batch-size <n>", "entries per statement, 1–10000")
        .default(1000)
        .argParser(positiveInteger("--batch-size", 10_000)),
    )
    .action((ids: number[] = [], flags: FilterFlags) =>
      withQueue("dead replay", async (queue) => {
        idsOrFilter(ids, flags, "dead replay");
        for (const id of ids) {
          const { replayed, job } = await queue.replayDeadLetter(id);
          console.log(
            replayed
              ? `replayed job ${id}: pending`
              : `job ${id} is not dead (replayed already): ${job?.status ?? "its row is gone"}`,
          );
        }
        if (ids.length > 0) return;
        const filter = {
          type: flags.type,
          diedAfter: flags.diedAfter,
          diedBefore: flags.diedBefore,
          all: flags.all,
        };
        await inBatches("replayed", () => queue.replayDeadLetters(filter, { limit: flags.batchSize }));
      }),
    );

  filterFlags(
    dead
      .command("discard")
      .description(
        "delete dead-letter entries (the jobs stay dead until retention): by id, or all matching a filter",
      )
      .argument("[job_id...]", "dead jobs' ids", (value: string, ids: number[] = []) => [
        ...ids,
        jobId(value),
      ]),
    true,
  )
    .option("--all", "every dead-letter entry")
    .addOption(
      new Option("--batch-size <n>", "entries per statement, 1–10000")
        .default(1000)
        .argParser(positiveInteger("--batch-size", 10_000)),
    )
    .action((ids: number[] = [], flags: FilterFlags) =>
      withQueue("dead discard", async (queue) => {
        idsOrFilter(ids, flags, "dead discard");
        for (const id of ids) {
          await queue.discardDeadLetter(id);
          console.log(`discarded the dead letter of job ${id}`);
        }
        if (ids.length > 0) return;
        const filter: DeadLetterQuery = {
          type: flags.type,
          diedAfter: flags.diedAfter,
          diedBefore: flags.diedBefore,
          replayed: replayedOf(flags),
          all: flags.all,
        };
        await inBatches("discarded", () => queue.discardDeadLetters(filter, { limit: flags.batchSize }));
      }),
    );

  program
    .command("retry")
    .description(
      "make jobs due now: pending ones waiting for a backoff or run_at, or dead ones, replayed (DATABASE_URL, or the embedded database of a running npm start here)",
    )
    .argument("<job_id...>", "jobs' ids", (value: string, ids: number[] = []) => [...ids, jobId(value)])
    .action((ids: number[]) =>
      withQueue("retry", async (queue) => {
        for (const id of ids) {
          const { changed, job } = await queue.retryJob(id);
          console.log(changed ? `job ${id}: due now` : `job ${id}: already due (${job.status})`);
        }
      }),
    );

  program
    .command("prune")
    .description(
      "one pruning pass now: delete finished jobs past RETAIN_DONE_SECONDS / RETAIN_DEAD_SECONDS (workers also do it; DATABASE_URL, or the embedded database of a running npm start here)",
    )
    .action(() =>
      withQueue("prune", async (queue) => {
        const report = await queue.pruneHistory();
        if (!report.ran) {
          console.log("another process is pruning; nothing done");
          return;
        }
        const jobs = Object.entries(report.deletedJobs).map(([status, n]) => `${n} ${status}`);
        console.log(
          `deleted ${jobs.length > 0 ? jobs.join(", ") : "no"} jobs and ${report.deletedDeadLetters} dead-letter entries in ${(report.elapsedMs / 1000).toFixed(1)} s`,
        );
      }),
    );
}
