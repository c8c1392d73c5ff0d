/**
 * `npm run soak -- --minutes N`: a live system (a private PostgreSQL cluster, the API and 2 worker
 * processes, all reaching the server through a TCP proxy; test/chaos/helpers) under steady load (a
 * client posting at `--rate` jobs/s), with random faults at random intervals: SIGKILL of a worker
 * (started again a second later), `pg_ctl restart -m fast` and `-m immediate`, and a blackholed or
 * dropped link for a few seconds. At the end the load and faults stop, the jobs get `--drain`
 * seconds to finish, and the ledger audit prints its table (acknowledged = done + dead +
 * cancelled + still pending; outcome writes and executions per job; lost). Exit code 1 on any
 * loss or broken check of the audit (jobs still pending are reported, not failed).
 */
import { setTimeout as sleep } from "node:timers/promises";
import { Command, InvalidArgumentError } from "commander";
import { auditLedger } from "../test/chaos/helpers/audit.js";
import { type ChaosCluster, startChaosCluster } from "../test/chaos/helpers/cluster.js";
import { type ChaosSystem, SCHEMA, startSystem } from "../test/chaos/helpers/system.js";

const FAULTS = ["kill-worker", "restart-fast", "restart-immediate", "blackhole", "drop"] as const;
type Fault = (typeof FAULTS)[number];

function positive(flag: string) {
  return (value: string): number => {
    const n = Number(value);
    if (!Number.isFinite(n) || n <= 0) throw new InvalidArgumentError(`${flag} must be a positive number`);
    return n;
  };
}

interface SoakFlags {
  minutes: number;
  rate: number;
  faultMin: number;
  faultMax: number;
  drain: number;
  faults: string;
}

const program = new Command()
  .name("npm run soak --")
  .description("random faults against a live taskqueue under steady load, ending with a ledger audit")
  .option("--minutes <n>", "how long the load and the faults last", positive("--minutes"), 2)
  .option("--rate <n>", "jobs posted per second", positive("--rate"), 40)
  .option("--fault-min <seconds>", "shortest pause between faults", positive("--fault-min"), 6)
  .option("--fault-max <seconds>", "longest pause between faults", positive("--fault-max"), 15)
  .option("--drain <seconds>", "time the jobs get to finish after the last fault", positive("--drain"), 90)
  .option(
    "--faults <list>",
    `faults to choose from, comma-separated (${FAULTS.join(",")})`,
    FAULTS.join(","),
  );

/** Inflicts `fault` on the system; resolves once it is over (link restored, worker restarted). */
async function inflict(fault: Fault, system: ChaosSystem, cluster: ChaosCluster): Promise<string> {
  switch (fault) {
    case "kill-worker": {
      const index = Math.floor(Math.random() * system.workers.length);
      const pid = await system.killWorker(index);
      await sleep(1000);
      await system.startWorker(index);
      return `SIGKILL of worker ${index} (pid ${pid}), started again`;
    }
    case "restart-fast":
    case "restart-immediate": {
      const mode = fault === "restart-fast" ? "fast" : "immediate";
      const started = Date.now();
      await cluster.restart(mode);
      return `pg_ctl restart -m ${mode} (${((Date.now() - started) / 1000).toFixed(1)} s)`;
    }
    case "blackhole":
    case "drop": {
      const seconds = 2 + Math.random() * 4;
      system.proxy?.set({ kind: fault });
      await sleep(seconds * 1000);
      system.proxy?.set({ kind: "forward" });
      return `${fault} of every link for ${seconds.toFixed(1)} s`;
    }
  }
}

async function main(): Promise<number> {
  program.parse();
  const flags = program.opts<SoakFlags>();
  const faults = flags.faults.split(",").map((f) => f.trim()) as Fault[];
  const unknown = faults.filter((f) => !FAULTS.includes(f));
  if (unknown.length > 0 || faults.length === 0) {
    console.error(`soak: unknown fault ${unknown.join(", ")}; choose from ${FAULTS.join(", ")}`);
    return 2;
  }
  const cluster = await startChaosCluster("soak");
  let system: ChaosSystem | undefined;
  try {
    system = await startSystem({ cluster, workers: 2, proxy: true, workerEnv: { WORKER_COUNT: "8" } });
    const sys = system;
    console.log(
      `# soak: ${flags.minutes} min at ${flags.rate} jobs/s, a fault every ${flags.faultMin}-${flags.faultMax} s from ${faults.join(", ")}`,
    );
    const started = Date.now();
    const endsAt = started + flags.minutes * 60_000;
    const poster = sys.postSteadily({
      body: () => ({
        type: "chaos_work",
        payload: { ms: Math.floor(Math.random() * 200) },
        max_retries: 10,
      }),
      ratePerSecond: flags.rate,
      concurrency: 8,
    });
    const counts: Record<string, number> = {};
    try {
      for (;;) {
        const pause = (flags.faultMin + Math.random() * (flags.faultMax - flags.faultMin)) * 1000;
        if (Date.now() + pause >= endsAt) break;
        await sleep(pause);
        const fault = faults[Math.floor(Math.random() * faults.length)] as Fault;
        counts[fault] = (counts[fault] ?? 0) + 1;
        const what = await inflict(fault, sys, cluster);
        const at = ((Date.now() - started) / 1000).toFixed(1);
        console.log(`# ${at.padStart(6)} s  ${what}; ${sys.acknowledged.length} jobs acknowledged so far`);
      }
      await sleep(Math.max(0, endsAt - Date.now()));
    } finally {
      await poster.stop();
    }
    console.log(`# faults: ${JSON.stringify(counts)}; client answers: ${JSON.stringify(sys.answers)}`);
    const report = await auditLedger(sys.db, SCHEMA, {
      title: `soak, ${flags.minutes} min`,
      acknowledged: sys.acknowledged,
      boundMs: flags.drain * 1000,
      allowOverlap: true,
      processEnds: sys.processEnds,
    });
    // Jobs still pending at the end are part of the sum, not a loss; every other check counts.
    const broken = report.failures.filter((failure) => !failure.includes("not final after"));
    if (report.lost.length > 0 || broken.length > 0) {
      console.error(`soak: FAILED: ${broken.join("; ")}`);
      return 1;
    }
    console.log(`soak: no acknowledged job lost (${report.acknowledged} acknowledged)`);
    return 0;
  } finally {
    await system?.stop();
    await cluster.destroy();
  }
}

main().then(
  (code) => process.exit(code),
  (error: unknown) => {
    console.error("soak:", error instanceof Error ? (error.stack ?? error.message) : error);
    process.exit(1);
  },
);
