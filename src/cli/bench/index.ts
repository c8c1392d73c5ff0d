/** `taskqueue bench ...`: benchmarks that print figures (docs/benchmarks.md keeps them). */
import type { Command } from "commander";

/** Adds the `bench` command group to the CLI. */
export function registerBenchCommands(program: Command): void {
  program
    .command("bench")
    .description("benchmarks: math (verified results), load (noop throughput and latency)");
}
