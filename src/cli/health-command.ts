/** `taskqueue health`: the Docker image's HEALTHCHECK (see health.ts). Exit 0 healthy, 1 not, 2 usage. */
import { type Command, Option } from "commander";
import { ConfigError } from "../errors.js";
import { positiveNumber } from "./flags.js";
import { checkHealth, loopbackHealthUrl } from "./health.js";

/** Registers `taskqueue health` on `program`. */
export function registerHealthCommand(program: Command): void {
  program
    .command("health")
    .description(
      "exit 0 if the service process here is healthy, else 1 (the Docker HEALTHCHECK): with a health file, a worker's is younger than its STALE_THRESHOLD_SECONDS and an API's /health answers; without one, the API at HOST:PORT on loopback answers (https with TLS_CERT_FILE)",
    )
    .option(
      "--health-file <path>",
      "the health file that start, api or worker keeps (overrides TASKQUEUE_HEALTH_FILE)",
    )
    .addOption(
      new Option("--timeout <seconds>", "bound of the API's answer, connecting included")
        .default(3)
        .argParser(positiveNumber("--timeout")),
    )
    .action(async (flags: { healthFile?: string; timeout: number }) => {
      const port = process.env.PORT?.trim() || "8000";
      if (!/^[0-9]+$/.test(port) || Number(port) > 65_535)
        throw new ConfigError("PORT", `must be a TCP port number, got ${JSON.stringify(port)}`);
      const verdict = await checkHealth({
        path: flags.healthFile ?? (process.env.TASKQUEUE_HEALTH_FILE || undefined),
        fallbackUrl: loopbackHealthUrl(
          process.env.HOST?.trim() || "127.0.0.1",
          Number(port),
          process.env.TLS_CERT_FILE ? "https" : "http",
        ),
        timeoutMs: flags.timeout * 1000,
      });
      if (verdict.healthy) console.log(`healthy: ${verdict.message}`);
      else console.error(`unhealthy: ${verdict.message}`);
      process.exitCode = verdict.healthy ? 0 : 1;
    });
}
