/**
 * The runner's side of a system's child process (run-system.ts): forks it, sends it one command
 * at a time and waits for the answer, each wait bounded (schedule.ts, `commandBudgetMs`); a child
 * that outlives the bound is killed and its remaining commands are skipped.
 */
import { type ChildProcess, fork } from "node:child_process";
import { dirname, join } from "node:path";
import { fileURLToPath } from "node:url";
import type { RunOptions } from "./cli.js";
import type { ChildMessage, ParentMessage } from "./run-system.js";
import { type Command, commandBudgetMs, describeCommand } from "./schedule.js";
import { blankReport, type ResultRow, type SystemName, type SystemReport } from "./types.js";

const HERE = dirname(fileURLToPath(import.meta.url)); // dist/bench/compare

/** A report for a system whose child produced nothing: every figure failed for `reason`. */
export function emptyReport(system: SystemName, reason: string): SystemReport {
  const report = blankReport(system, "", "?");
  for (const key of Object.keys(report.row) as (keyof ResultRow)[])
    if (key !== "system" && key !== "settings") report.missing[key] = { kind: "failed", reason };
  report.notes.push(reason);
  return report;
}

/** Marks every figure that has neither a value nor a reason as failed for `reason` (a child that ended early). */
export function markUnmeasured(report: SystemReport, reason: string): void {
  for (const key of Object.keys(report.row) as (keyof ResultRow)[])
    if (key !== "system" && key !== "settings" && report.row[key] === null && !report.missing[key])
      report.missing[key] = { kind: "failed", reason };
}

export class SystemChild {
  /** The latest report the child sent (or one saying why there is none). */
  report: SystemReport | null = null;
  /** False once the child exited (normally after teardown, or early). */
  alive = true;
  /** Resolves when the child process has exited. */
  readonly exited: Promise<void>;
  private readonly child: ChildProcess;
  private readonly ready: Promise<boolean>;
  private nextId = 1;
  private answer: ((report: SystemReport | null) => void) | null = null;
  private exitText = "";
  /** The child answered its teardown. */
  private tornDown = false;
  /** The reason the child ended early is in the report. */
  private explained = false;

  constructor(
    readonly system: SystemName,
    private readonly options: RunOptions,
    runId: string,
    private readonly log: (message: string) => void,
  ) {
    this.child = fork(join(HERE, "run-system.js"), [system, JSON.stringify(options), runId], {
      stdio: ["ignore", 2, 2, "ipc"],
    });
    let readyNow: (ok: boolean) => void = () => undefined;
    this.ready = new Promise((resolve) => {
      readyNow = resolve;
    });
    this.child.on("message", (message: ChildMessage) => {
      if (message.type === "ready") readyNow(true);
      else if (message.type === "result") {
        this.report = message.report;
        this.answer?.(message.report);
      }
    });
    this.exited = new Promise((resolve) => {
      this.child.on("exit", (code, signal) => {
        this.alive = false;
        this.exitText = String(signal ?? code);
        readyNow(false);
        this.answer?.(null);
        resolve();
      });
    });
  }

  /**
   * Runs `command` in the child and waits for its answer, at most the command's budget; past it the
   * child is killed. After the child is gone, does nothing. Never throws.
   */
  async run(command: Command): Promise<void> {
    if (!this.alive) {
      if (!this.tornDown && !this.explained)
        this.endedEarly(
          `run cut short: child exited with ${this.exitText} before ${describeCommand(command)}`,
        );
      return;
    }
    const budgetMs = commandBudgetMs(command, this.options.phaseTimeoutMs);
    let timer: NodeJS.Timeout | undefined;
    const expired = new Promise<"expired">((resolve) => {
      timer = setTimeout(() => resolve("expired"), budgetMs);
    });
    try {
      const ready = await Promise.race([this.ready, expired]);
      let outcome: SystemReport | null | "expired" = null;
      if (ready === true) {
        const id = this.nextId++;
        const answered = new Promise<SystemReport | null>((resolve) => {
          this.answer = resolve;
        });
        this.child.send({ type: "command", id, command } satisfies ParentMessage);
        outcome = await Promise.race([answered, expired]);
      } else if (ready === "expired") outcome = "expired";
      if (outcome === "expired") {
        this.log(
          `${this.system}: ${describeCommand(command)} still running after ${budgetMs / 1000} s; killing it`,
        );
        this.child.kill("SIGKILL");
        await this.exited;
        this.endedEarly(`killed: ${describeCommand(command)} outlasted its bound of ${budgetMs / 1000} s`);
      } else if (outcome === null)
        this.endedEarly(
          `run cut short: child exited with ${this.exitText} during ${describeCommand(command)}`,
        );
      else if (command.kind === "teardown") this.tornDown = true;
    } finally {
      clearTimeout(timer);
      this.answer = null;
    }
  }

  /** The child is gone before its teardown: say why, and mark what it did not measure as failed. */
  private endedEarly(reason: string): void {
    this.explained = true;
    if (this.report === null) this.report = emptyReport(this.system, reason);
    else {
      this.report.notes.push(reason);
      markUnmeasured(this.report, "not measured: the system's process ended early (see the notes)");
    }
  }

  /** The final report: the child's, or one saying it produced none. */
  finalReport(): SystemReport {
    if (!this.tornDown && !this.explained) this.endedEarly("run cut short: the system's process ended early");
    return this.report ?? emptyReport(this.system, "the system's process produced no report");
  }
}
