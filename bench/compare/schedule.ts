/**
 * The order in which the runner asks each system's child process to work. A run is a list of
 * steps, each one command to one system; a system's child process lives from its `setup` to its
 * `teardown`. Two schedules:
 *
 * - sequential (the default): one system after another, each doing all its passes (the order the
 *   benchmark always had; one child process alive at a time);
 * - interleaved (`--interleave`): every system is set up and warmed up first; then round r runs
 *   pass r of each phase — (a) bulk enqueue, (b) single enqueue, (c) drain, (d) pickup — for every
 *   system in turn, so one figure of all systems is measured within seconds of each other; the
 *   order of the systems is reversed every other round (A B C, C B A, …), so that no system is
 *   always measured first or right after another one's drain. (e) runs once per system after
 *   the rounds, one system after another.
 */
import type { Phase, SystemName } from "./types.js";

/** A phase measured once per pass. */
export type PassPhase = Exclude<Phase, "claim1m">;

/** The passes of a round, in order. */
export const PASS_PHASES: readonly PassPhase[] = ["enqueueBulk", "enqueueSingle", "drain", "pickup"];

/** One unit of work for a system's child process. */
export type Command =
  | { kind: "setup" }
  /** The untimed warm-up before (a) or (b), then a clear. */
  | { kind: "warm-up"; phase: "enqueueBulk" | "enqueueSingle" }
  /** Pass `round` of `of` of a phase (its figures are round `round`'s). */
  | { kind: "pass"; phase: PassPhase; round: number; of: number }
  /** (e): pickup on an empty table, with the finished rows, and empty again. */
  | { kind: "claim1m" }
  | { kind: "teardown" };

export interface Step {
  system: SystemName;
  command: Command;
}

/** The systems of round `round` (1-based) in the order they run: as given on odd rounds, reversed on even ones. */
export function roundOrder(systems: readonly SystemName[], round: number): SystemName[] {
  return round % 2 === 1 ? [...systems] : [...systems].reverse();
}

/**
 * One system after another: setup, (a) warm-up and `repeat` passes, (b) warm-up and one pass,
 * (c) `repeat` passes, (d) one pass, (e), teardown.
 */
export function sequentialSchedule(systems: readonly SystemName[], repeat: number): Step[] {
  const steps: Step[] = [];
  for (const system of systems) {
    const add = (command: Command) => steps.push({ system, command });
    add({ kind: "setup" });
    add({ kind: "warm-up", phase: "enqueueBulk" });
    for (let r = 1; r <= repeat; r++) add({ kind: "pass", phase: "enqueueBulk", round: r, of: repeat });
    add({ kind: "warm-up", phase: "enqueueSingle" });
    add({ kind: "pass", phase: "enqueueSingle", round: 1, of: 1 });
    for (let r = 1; r <= repeat; r++) add({ kind: "pass", phase: "drain", round: r, of: repeat });
    add({ kind: "pass", phase: "pickup", round: 1, of: 1 });
    add({ kind: "claim1m" });
    add({ kind: "teardown" });
  }
  return steps;
}

/**
 * Every system set up and warmed up; then `rounds` rounds, each running every system's pass of
 * (a), (b), (c) and (d) phase by phase (order per {@link roundOrder}); then (e) and teardown of
 * each system.
 */
export function interleavedSchedule(systems: readonly SystemName[], rounds: number): Step[] {
  const steps: Step[] = [];
  for (const system of systems) {
    steps.push({ system, command: { kind: "setup" } });
    steps.push({ system, command: { kind: "warm-up", phase: "enqueueBulk" } });
    steps.push({ system, command: { kind: "warm-up", phase: "enqueueSingle" } });
  }
  for (let round = 1; round <= rounds; round++)
    for (const phase of PASS_PHASES)
      for (const system of roundOrder(systems, round))
        steps.push({ system, command: { kind: "pass", phase, round, of: rounds } });
  for (const system of systems) steps.push({ system, command: { kind: "claim1m" } });
  for (const system of systems) steps.push({ system, command: { kind: "teardown" } });
  return steps;
}

/**
 * How long the runner waits for a command before it kills the child: every phase the command
 * runs at its bound (a drain pass fills the queue and drains it: two; (e) runs three pickups and
 * the seed: four), plus 15 minutes for the bounded steps around them (VACUUM before a phase, up
 * to 120 s each; clears, up to 3 × 60 s; stopping workers and closing, up to 30 s each).
 */
export function commandBudgetMs(command: Command, phaseTimeoutMs: number): number {
  const phases =
    command.kind === "claim1m" ? 4 : command.kind === "pass" && command.phase === "drain" ? 2 : 1;
  return phases * phaseTimeoutMs + 15 * 60_000;
}

/** A short name of a command for the log and the notes. */
export function describeCommand(command: Command): string {
  switch (command.kind) {
    case "pass":
      return `${command.phase} pass ${command.round}/${command.of}`;
    case "warm-up":
      return `${command.phase} warm-up`;
    default:
      return command.kind;
  }
}
