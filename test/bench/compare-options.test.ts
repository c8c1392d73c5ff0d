/**
 * bench:compare's `--baseline DIR`, `--interleave` and `--single-jobs`: how they are parsed and refused, the order in
 * which the runner sends commands to the systems (one after another, or round-robin with the
 * order reversed every other round), and the command recorded in the .meta.json.
 */
import assert from "node:assert/strict";
import { mkdirSync, mkdtempSync, rmSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { join, relative } from "node:path";
import { after, describe, it } from "node:test";
import { baselineLibrary, ownLibrary } from "../../bench/compare/adapters/taskqueue.js";
import { parseOptions } from "../../bench/compare/cli.js";
import { shareableArgv } from "../../bench/compare/invocation.js";
import {
  type Command,
  commandBudgetMs,
  interleavedSchedule,
  roundOrder,
  sequentialSchedule,
} from "../../bench/compare/schedule.js";
import { SELECTABLE, type SystemName } from "../../bench/compare/types.js";

const env = { DATABASE_URL: "postgres://x@127.0.0.1:1/db" };
/** A checkout with a build (dist/src/index.js) and one without. */
const root = mkdtempSync(join(tmpdir(), "taskqueue-bench-options-"));
const built = join(root, "built");
const unbuilt = join(root, "unbuilt");
mkdirSync(join(built, "dist", "src"), { recursive: true });
writeFileSync(
  join(built, "dist", "src", "index.js"),
  'export class TaskQueue { static build = "the baseline checkout"; }\n',
);
mkdirSync(unbuilt);
/** A built checkout whose library is not taskqueue's. */
const foreign = join(root, "foreign");
mkdirSync(join(foreign, "dist", "src"), { recursive: true });
writeFileSync(join(foreign, "dist", "src", "index.js"), "export const something = 1;\n");
after(() => rmSync(root, { recursive: true, force: true }));

describe("--baseline and --interleave", () => {
  it("are off by default, and every selectable system runs, without the baseline row", () => {
    const options = parseOptions([], env);
    assert.equal(options.baseline, null);
    assert.equal(options.interleave, false);
    assert.deepEqual(options.only, [...SELECTABLE]);
    assert.ok(!options.only.includes("taskqueue-baseline"));
  });

  it("--baseline DIR adds taskqueue-baseline right after taskqueue; --interleave is a switch", () => {
    const options = parseOptions(
      ["--only", "graphile-worker,taskqueue", "--baseline", built, "--interleave", "--repeat", "5"],
      env,
    );
    assert.deepEqual(options.only, ["taskqueue", "taskqueue-baseline", "graphile-worker"]);
    assert.equal(options.baseline, built);
    assert.equal(options.interleave, true);
    assert.equal(options.repeat, 5);
    assert.equal(parseOptions([`--baseline=${built}`, "--only", "taskqueue"], env).baseline, built);
  });

  it("a relative --baseline is resolved from the current directory", () => {
    const options = parseOptions(["--baseline", relative(process.cwd(), built)], env);
    assert.equal(options.baseline, built);
  });

  it("refuses a checkout that is not built, naming the flag and the missing file", () => {
    assert.throws(
      () => parseOptions(["--baseline", unbuilt], env),
      (error: Error) =>
        error.message.startsWith("--baseline: ") &&
        error.message.includes(join(unbuilt, "dist", "src", "index.js")) &&
        /npm run build/.test(error.message),
    );
  });

  it("refuses --baseline without the taskqueue row, and taskqueue-baseline in --only", () => {
    assert.throws(
      () => parseOptions(["--only", "graphile-worker", "--baseline", built], env),
      /--baseline: .*add taskqueue to --only/,
    );
    assert.throws(
      () => parseOptions(["--only", "taskqueue,taskqueue-baseline", "--baseline", built], env),
      /--only: taskqueue-baseline is not chosen with --only; --baseline DIR adds it/,
    );
    assert.throws(() => parseOptions(["--interleave=yes"], env), /interleave/);
  });
});

describe("--single-jobs", () => {
  it("is --jobs unless given, and is a positive integer", () => {
    assert.equal(parseOptions([], env).singleJobs, 20_000);
    assert.equal(parseOptions(["--jobs", "5000"], env).singleJobs, 5000);
    const options = parseOptions(["--jobs", "200000", "--single-jobs", "2000"], env);
    assert.equal(options.jobs, 200_000);
    assert.equal(options.singleJobs, 2000);
    assert.throws(() => parseOptions(["--single-jobs", "0"], env), /--single-jobs/);
  });
});

describe("the baseline row's library", () => {
  it("is DIR/dist/src/index.js's TaskQueue, not this build's", async () => {
    const library = (await baselineLibrary(built)) as unknown as { build?: string };
    assert.equal(library.build, "the baseline checkout");
    assert.notEqual(await baselineLibrary(built), await ownLibrary());
  });

  it("refuses a build that exports no TaskQueue class, naming the file", async () => {
    await assert.rejects(
      baselineLibrary(foreign),
      new RegExp(
        `${join(foreign, "dist", "src", "index.js").replaceAll(".", "\\.")} exports no TaskQueue class`,
      ),
    );
  });
});

const key = (system: SystemName, c: Command) =>
  `${system} ${c.kind}${"phase" in c ? ` ${c.phase}` : ""}${c.kind === "pass" ? ` ${c.round}/${c.of}` : ""}`;

describe("schedules", () => {
  it("sequential: one system after another, each in the order the benchmark always had", () => {
    const steps = sequentialSchedule(["taskqueue", "graphile-worker"], 2).map((s) =>
      key(s.system, s.command),
    );
    const one = (s: SystemName) => [
      `${s} setup`,
      `${s} warm-up enqueueBulk`,
      `${s} pass enqueueBulk 1/2`,
      `${s} pass enqueueBulk 2/2`,
      `${s} warm-up enqueueSingle`,
      `${s} pass enqueueSingle 1/1`,
      `${s} pass drain 1/2`,
      `${s} pass drain 2/2`,
      `${s} pass pickup 1/1`,
      `${s} claim1m`,
      `${s} teardown`,
    ];
    assert.deepEqual(steps, [...one("taskqueue"), ...one("graphile-worker")]);
  });

  it("interleaved: all set up and warmed up, then round r runs every system's pass r phase by phase, order reversed every other round", () => {
    const systems: SystemName[] = ["taskqueue", "taskqueue-baseline", "graphile-worker"];
    assert.deepEqual(roundOrder(systems, 1), systems);
    assert.deepEqual(roundOrder(systems, 2), [...systems].reverse());
    assert.deepEqual(roundOrder(systems, 3), systems);
    const steps = interleavedSchedule(systems, 3).map((s) => key(s.system, s.command));
    const prepare = systems.flatMap((s) => [
      `${s} setup`,
      `${s} warm-up enqueueBulk`,
      `${s} warm-up enqueueSingle`,
    ]);
    const rounds = [1, 2, 3].flatMap((r) =>
      ["enqueueBulk", "enqueueSingle", "drain", "pickup"].flatMap((phase) =>
        roundOrder(systems, r).map((s) => `${s} pass ${phase} ${r}/3`),
      ),
    );
    assert.deepEqual(steps, [
      ...prepare,
      ...rounds,
      ...systems.map((s) => `${s} claim1m`),
      ...systems.map((s) => `${s} teardown`),
    ]);
    // Over two rounds each pair of systems runs once in each order.
    const drains = steps.filter((s) => s.includes("pass drain"));
    const at = (s: string, r: number) => drains.indexOf(`${s} pass drain ${r}/3`);
    assert.ok(at("taskqueue", 1) < at("taskqueue-baseline", 1));
    assert.ok(at("taskqueue", 2) > at("taskqueue-baseline", 2));
  });

  it("every command's wait is bounded by its phases at the phase timeout plus the bounded steps around them", () => {
    const t = 120_000;
    const extra = 15 * 60_000;
    assert.equal(commandBudgetMs({ kind: "setup" }, t), t + extra);
    assert.equal(commandBudgetMs({ kind: "pass", phase: "enqueueBulk", round: 1, of: 1 }, t), t + extra);
    assert.equal(commandBudgetMs({ kind: "pass", phase: "drain", round: 1, of: 1 }, t), 2 * t + extra);
    assert.equal(commandBudgetMs({ kind: "claim1m" }, t), 4 * t + extra);
  });
});

describe("the recorded command", () => {
  it("writes the --baseline directory relative to the current directory, whatever form the flag had", () => {
    const cwd = join(root, "project");
    assert.deepEqual(shareableArgv(["--baseline", join(root, "base"), "--interleave"], cwd), [
      "--baseline",
      join("..", "base"),
      "--interleave",
    ]);
    assert.deepEqual(shareableArgv([`--baseline=${cwd}`], cwd), ["--baseline=."]);
    assert.deepEqual(shareableArgv(["--baseline", "../base", "--jobs", "300"], cwd), [
      "--baseline",
      "../base",
      "--jobs",
      "300",
    ]);
  });
});
