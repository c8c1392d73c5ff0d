/**
 * A {@link Snapshot} as lines of text for `taskqueue inspect`. On a terminal the lines fit its
 * size: none longer than its width, and no more of them than its height (80×24 shows everything a
 * section has room for), so the title line never scrolls away; the lists (workers, held locks, dead
 * letters) share the rows left and end with "… N more" when cut. Paused types and types with
 * pending jobs that no live worker claims get a line each when there are any. A part whose query failed is an
 * `error` line naming the part and the database's message.
 */
import type { HeldLock, RelationSize } from "../../queue/inspect.js";
import type { DeadLetterJob, WorkerInfo } from "../../queue/types.js";
import type { Part, Snapshot } from "./snapshot.js";

/** A terminal's size in characters; null: not a terminal (nothing is cut). */
export type ScreenSize = { columns: number; rows: number } | null;

/** Width of the label column ("depth", "workers", ...). */
const LABEL = 9;
const label = (name: string) => name.padEnd(LABEL);

/** A byte count in binary units: 512 B, 8.0 KiB, 1.2 MiB. */
export function formatBytes(bytes: number): string {
  const units = ["B", "KiB", "MiB", "GiB", "TiB"];
  let value = bytes;
  let unit = 0;
  while (value >= 1024 && unit < units.length - 1) {
    value /= 1024;
    unit++;
  }
  return unit === 0 ? `${value} B` : `${value.toFixed(value < 10 ? 1 : 0)} ${units[unit]}`;
}

const seconds = (value: number | null, digits = 3) => (value === null ? "-" : value.toFixed(digits));

/** `text` cut to `width` characters, the last one an ellipsis when cut. */
export function fit(text: string, width: number): string {
  return text.length <= width ? text : `${text.slice(0, Math.max(0, width - 1))}…`;
}

const errorLine = (part: string, error: string) => `${label("error")}${part}: ${error}`;

/** The sizes: the schema's total, then tables and indexes, largest first. */
function sizeLines(sizes: RelationSize[]): string[] {
  const tables = sizes.filter((r) => r.kind === "table");
  const indexes = sizes.filter((r) => r.kind === "index");
  const sum = (list: RelationSize[]) => list.reduce((total, r) => total + r.bytes, 0);
  const list = (items: RelationSize[]) => items.map((r) => `${r.name} ${formatBytes(r.bytes)}`).join(" · ");
  return [
    `${label("size")}${formatBytes(sum(sizes))}: ${tables.length} tables ${formatBytes(sum(tables))}, ${indexes.length} indexes ${formatBytes(sum(indexes))}`,
    `${label("tables")}${list(tables)}`,
    `${label("indexes")}${list(indexes)}`,
  ];
}

function workerLine(w: WorkerInfo, now: Date): string {
  const age = Math.max(0, (now.getTime() - w.heartbeatAt.getTime()) / 1000);
  return `  ${w.id} held ${w.heldJobs}/${w.concurrency} · heartbeat ${age.toFixed(1)} s ago · ${w.types.join(",")}`;
}

function lockLine(l: HeldLock): string {
  if (l.jobId === null) return `  key ${l.jobKey}: no claimed or running job has it · pid ${l.pid}`;
  return `  job ${l.jobId} ${l.type} ${l.status} ${seconds(l.heldSeconds, 1)} s · worker ${l.workerId ?? "-"} · pid ${l.pid}`;
}

function deadLine(d: DeadLetterJob): string {
  return `  #${d.jobId} ${d.type} ×${d.attempts} ${(d.error ?? "").replace(/\s+/g, " ")}`;
}

/** A list section: its header, and its items (or the error that kept it from being read). */
interface ListSection {
  header: string;
  items: string[];
}

function listSection<T>(
  part: Part<T[]>,
  name: string,
  header: (items: T[]) => string,
  line: (item: T) => string,
): ListSection {
  if (!part.ok) return { header: errorLine(name, part.error), items: [] };
  return { header: header(part.value), items: part.value.map(line) };
}

/**
 * Shares `budget` rows among the lists' items, one row to each in turn, so that a long list does
 * not crowd out the others. A list given fewer rows than it has items shows one item fewer and
 * "… N more" in the last row.
 */
function shareRows(sections: ListSection[], budget: number): string[][] {
  const given = sections.map(() => 0);
  let left = Math.max(0, budget);
  let progress = true;
  while (left > 0 && progress) {
    progress = false;
    sections.forEach((section, i) => {
      if (left > 0 && (given[i] as number) < section.items.length) {
        given[i] = (given[i] as number) + 1;
        left--;
        progress = true;
      }
    });
  }
  return sections.map((section, i) => {
    const rows = given[i] as number;
    if (rows >= section.items.length) return section.items;
    if (rows === 0) return [];
    return [...section.items.slice(0, rows - 1), `  … ${section.items.length - rows + 1} more`];
  });
}

/**
 * The lines of `snapshot`, fitted to `size` (see the top of this file). `status` goes at the end
 * of the title line (in a watch: how often it redraws).
 */
export function renderSnapshot(snapshot: Snapshot, size: ScreenSize, status = ""): string[] {
  const { version, metrics, sizes } = snapshot;
  const time = snapshot.takenAt.toISOString().slice(11, 19);
  const title = `taskqueue inspect · schema ${snapshot.schema}${version.ok ? ` v${version.value}` : ""} · ${time} UTC${status ? ` · ${status}` : ""}`;
  const head: string[] = [title];
  if (!version.ok) head.push(errorLine("schema version", version.error));
  if (metrics.ok) {
    const m = metrics.value;
    const q = m.executionSecondsQuantiles;
    head.push(
      `${label("depth")}${Object.entries(m.depth)
        .map(([status, n]) => `${status} ${n}`)
        .join("  ")}`,
      `${label("rates")}${m.jobsPerSecond.toFixed(2)} jobs/s over ${m.windowSeconds} s · errors ${(m.errorRate * 100).toFixed(1)} % · exec mean ${seconds(m.averageExecutionSeconds)} p99 ${seconds(q.p99)} s`,
    );
    // Only when there are some: paused types, and pending jobs no live worker claims.
    if (m.pausedTypes.length > 0)
      head.push(
        `${label("paused")}${m.pausedTypes.map((p) => `${p.type} since ${p.pausedAt.toISOString().slice(0, 19)}Z`).join(" · ")}`,
      );
    if (m.typeLimits.length > 0)
      head.push(
        `${label("limits")}${m.typeLimits
          .map((l) => {
            const limits = [
              l.maxRunning === null ? null : `max ${l.maxRunning} running`,
              l.ratePerSecond === null ? null : `${l.ratePerSecond}/s`,
            ];
            return `${l.type} ${limits.filter((x) => x !== null).join(", ")}`;
          })
          .join(" · ")}`,
      );
    if (m.unhandledTypes.length > 0)
      head.push(
        `${label("orphans")}${m.unhandledTypes
          .map((u) => `${u.type} ${u.pending} pending, oldest due ${seconds(u.oldestPendingAgeSeconds, 1)} s`)
          .join(" · ")} (no live worker claims them)`,
      );
  } else head.push(errorLine("metrics", metrics.error));
  head.push(...(sizes.ok ? sizeLines(sizes.value) : [errorLine("sizes", sizes.error)]));

  const fenced = metrics.ok ? `; fenced writes ${metrics.value.fencedWrites}` : "";
  const deadCount = metrics.ok ? `${metrics.value.deadLetterCount} waiting, ` : "";
  const lists = [
    listSection(
      snapshot.workers,
      "workers",
      (items) => `${label("workers")}${items.length} live`,
      (w) => workerLine(w, snapshot.takenAt),
    ),
    listSection(
      snapshot.locks,
      "locks",
      (items) => `${label("locks")}${items.length} job advisory locks held${fenced}`,
      lockLine,
    ),
    listSection(
      snapshot.dead,
      "dead letters",
      (items) => `${label("dead")}${deadCount}${items.length} recent`,
      deadLine,
    ),
  ];

  if (size === null) {
    return [...head, ...lists.flatMap((section) => [section.header, ...section.items])];
  }
  const budget = size.rows - head.length - lists.length;
  const shown = shareRows(lists, budget);
  const lines = [...head, ...lists.flatMap((section, i) => [section.header, ...(shown[i] as string[])])];
  return lines.slice(0, Math.max(1, size.rows)).map((line) => fit(line, size.columns));
}
