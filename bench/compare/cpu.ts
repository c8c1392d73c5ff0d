/**
 * CPU time a system spends on a pass: its own processes (the child that drives it and any server
 * it runs, every thread) plus the PostgreSQL backends serving their connections, read from Linux
 * /proc in nanoseconds (`/proc/<pid>/task/<tid>/schedstat`, first field: time on a CPU). Unlike
 * the wall-clock figures, CPU time does not grow when other work on the machine takes the CPUs
 * away, so a per-job CPU cost compares two builds on a busy machine where throughput cannot.
 *
 * The backends are found by their client ports: the TCP sockets among the processes' open file
 * descriptors whose remote port is the server's (/proc/<pid>/fd, /proc/net/tcp{,6}), matched to
 * `pg_stat_activity.client_port`. A backend that connects during the pass counts from its start
 * (connecting is part of the pass's cost); one that exits before the end of the pass is lost.
 * Unavailable (null) off Linux, when PostgreSQL is not on this machine, or over a Unix socket.
 */
import { readdirSync, readFileSync, readlinkSync } from "node:fs";
import type { Admin } from "./harness.js";

/** A reading at the start of a pass. */
export interface CpuMark {
  /** Nanoseconds on a CPU so far, by process id (the system's) and backend id. */
  processes: Map<number, number>;
  backends: Map<number, number>;
}

/** Nanoseconds process `pid` spent on a CPU, all its threads; null if it is gone. */
export function processCpuNs(pid: number): number | null {
  try {
    let total = 0;
    for (const tid of readdirSync(`/proc/${pid}/task`)) {
      try {
        total += Number(readFileSync(`/proc/${pid}/task/${tid}/schedstat`, "utf8").split(" ")[0]);
      } catch {
        // the thread ended between the listing and the read
      }
    }
    return total;
  } catch {
    return null;
  }
}

/**
 * Local ports of the TCP connections of process `pid` to remote port `serverPort`, given the
 * text of /proc/net/tcp and tcp6 (IPv4 and IPv6 rows: `sl local rem st … uid timeout inode`).
 */
export function connectionPorts(socketInodes: ReadonlySet<string>, tcpTables: string[], serverPort: number) {
  const ports: number[] = [];
  for (const table of tcpTables)
    for (const line of table.split("\n").slice(1)) {
      const cols = line.trim().split(/\s+/);
      const [local, remote, inode] = [cols[1], cols[2], cols[9]];
      if (!local || !remote || !inode || !socketInodes.has(inode)) continue;
      if (Number.parseInt(remote.split(":")[1] ?? "", 16) !== serverPort) continue;
      ports.push(Number.parseInt(local.split(":")[1] ?? "", 16));
    }
  return ports;
}

/** Socket inodes among process `pid`'s open file descriptors. */
function socketInodes(pid: number): Set<string> {
  const inodes = new Set<string>();
  try {
    for (const fd of readdirSync(`/proc/${pid}/fd`)) {
      try {
        const match = /^socket:\[(\d+)\]$/.exec(readlinkSync(`/proc/${pid}/fd/${fd}`));
        if (match?.[1]) inodes.add(match[1]);
      } catch {
        // closed between the listing and the read
      }
    }
  } catch {
    // the process is gone
  }
  return inodes;
}

function readTcpTables(): string[] {
  return ["/proc/net/tcp", "/proc/net/tcp6"].flatMap((path) => {
    try {
      return [readFileSync(path, "utf8")];
    } catch {
      return [];
    }
  });
}

/** The server's port if `databaseUrl` reaches PostgreSQL on this machine over TCP, else null. */
export function localServerPort(databaseUrl: string): number | null {
  try {
    const url = new URL(databaseUrl);
    const host = url.hostname.replace(/^\[|\]$/g, "");
    if (!["127.0.0.1", "localhost", "::1"].includes(host)) return null;
    if (url.searchParams.has("host")) return null; // a Unix socket directory
    return url.port ? Number(url.port) : 5432;
  } catch {
    return null;
  }
}

/** Measures the CPU time of a system's processes and their PostgreSQL backends over a pass. */
export class CpuMeter {
  private readonly serverPort: number | null;
  private readonly available: boolean;

  /**
   * @param admin the child's admin connection (its own backend is left out)
   * @param processes the system's process ids at the time of a reading (the child's own first)
   */
  constructor(
    private readonly admin: Admin,
    databaseUrl: string,
    private readonly processes: () => number[],
  ) {
    this.serverPort = localServerPort(databaseUrl);
    this.available = this.serverPort !== null && processCpuNs(process.pid) !== null;
  }

  /** Why there is no CPU figure, or null when there is one. */
  get unavailable(): string | null {
    if (this.serverPort === null) return "n/a — PostgreSQL is not reached over TCP on this machine";
    if (!this.available) return "n/a — no /proc/<pid>/task/<tid>/schedstat to read CPU time from";
    return null;
  }

  private async backends(pids: number[]): Promise<number[]> {
    const inodes = new Set(pids.flatMap((pid) => [...socketInodes(pid)]));
    const ports = connectionPorts(inodes, readTcpTables(), this.serverPort as number);
    if (ports.length === 0) return [];
    const { rows } = await this.admin.query<{ pid: number }>(
      "SELECT pid FROM pg_stat_activity WHERE client_port = ANY($1::int[]) AND pid <> pg_backend_pid()",
      [ports],
    );
    return rows.map((r) => r.pid);
  }

  private static read(pids: number[], into: Map<number, number>): void {
    for (const pid of pids) {
      const ns = processCpuNs(pid);
      if (ns !== null) into.set(pid, ns);
    }
  }

  /** A reading before the pass; null when unavailable. */
  async start(): Promise<CpuMark | null> {
    if (this.unavailable) return null;
    const pids = this.processes();
    const backends = await this.backends(pids);
    const mark: CpuMark = { processes: new Map(), backends: new Map() };
    CpuMeter.read(backends, mark.backends);
    CpuMeter.read(pids, mark.processes);
    return mark;
  }

  /** Nanoseconds on a CPU since `mark` (processes + backends, new backends from their start); null without a mark. */
  async stop(mark: CpuMark | null): Promise<number | null> {
    if (mark === null) return null;
    const pids = this.processes();
    const now = { processes: new Map<number, number>(), backends: new Map<number, number>() };
    CpuMeter.read(pids, now.processes);
    const backends = await this.backends(pids);
    CpuMeter.read([...new Set([...backends, ...mark.backends.keys()])], now.backends);
    let total = 0;
    for (const [kind, map] of Object.entries(now) as [keyof CpuMark, Map<number, number>][])
      for (const [pid, ns] of map) total += ns - (mark[kind].get(pid) ?? 0);
    return total;
  }
}
