/**
 * The overview page: depth by status and by type, throughput and error rate over the last hour,
 * oldest due age per type, live workers, paused types, and types with pending jobs but no live
 * worker. Refreshed every 2 s by the page loop (main.ts).
 */
import { call, hasRoute } from "./api.js";
import { throughputChart } from "./chart.js";
import { age, badge, h, num, replaceRegion, since, table, time } from "./dom.js";
import { act } from "./feedback.js";
import type { Page } from "./page.js";
import {
  type Metrics,
  readTypeStates,
  STATUSES,
  type ThroughputMinute,
  type TypeDepth,
  type TypeState,
  type Worker,
} from "./wire.js";

/** Pause or resume `type` after confirmation (POST /types/{type}/pause|resume). */
function pauseButton(type: string, paused: boolean, refresh: () => void): HTMLElement {
  const action = paused ? "resume" : "pause";
  const route = `POST /types/{type}/${action}`;
  const available = hasRoute(route);
  return h(
    "button",
    {
      type: "button",
      class: paused ? "secondary" : "warn",
      "data-key": `${action}:${type}`,
      disabled: !available,
      title: available ? undefined : `this server has no ${route}`,
      onclick: () =>
        act(
          paused
            ? `Resume type "${type}"? Workers start claiming its jobs again.`
            : `Pause type "${type}"? Workers on every host stop claiming its jobs; running jobs finish.`,
          paused ? "Resume" : "Pause",
          async () => {
            await call(`types/${encodeURIComponent(type)}/${action}`, "POST");
            return `Type "${type}" ${paused ? "resumed" : "paused"}.`;
          },
          refresh,
        ),
    },
    paused ? "Resume" : "Pause",
  );
}

/** The overview page. */
export function overviewPage(): Page {
  const cards = h("section", { class: "cards", "aria-label": "Depth by status" });
  const alerts = h("section", { class: "alerts", "aria-live": "polite" });
  const chart = h("section", { class: "panel", "aria-label": "Throughput" });
  const types = h("section", { class: "panel" });
  const workers = h("section", { class: "panel" });

  const refresh = async (): Promise<void> => {
    const [metrics, depths, throughput, live, states] = await Promise.all([
      call<Metrics>("metrics"),
      call<{ types: TypeDepth[] }>("stats/types"),
      call<{ minutes: ThroughputMinute[] }>("stats/throughput?minutes=60"),
      call<{ workers: Worker[] }>("workers"),
      hasRoute("GET /types") ? call<unknown>("types").then(readTypeStates) : Promise.resolve<TypeState[]>([]),
    ]);
    const paused = new Set(states.filter((s) => s.paused).map((s) => s.type));

    replaceRegion(
      cards,
      STATUSES.map((s) =>
        h(
          "a",
          { class: `card s-${s}`, href: `#/jobs?status=${s}`, "data-key": `card:${s}` },
          h("span", { class: "label" }, s),
          h("span", { class: "value", "data-status": s }, num(metrics.queue_depth[s] ?? 0)),
        ),
      ),
      h(
        "div",
        { class: "card" },
        h("span", { class: "label" }, "jobs/s (60 s)"),
        h("span", { class: "value" }, metrics.jobs_per_second.toFixed(2)),
      ),
      h(
        "div",
        { class: "card" },
        h("span", { class: "label" }, "error rate (60 s)"),
        h("span", { class: "value" }, `${(metrics.error_rate * 100).toFixed(1)} %`),
      ),
      h(
        "a",
        { class: "card", href: "#/dead", "data-key": "card:dlq" },
        h("span", { class: "label" }, "dead letters waiting"),
        h("span", { class: "value" }, num(metrics.dead_letter_count)),
      ),
      h(
        "div",
        { class: "card" },
        h("span", { class: "label" }, "live workers"),
        h("span", { class: "value" }, num(metrics.active_workers)),
      ),
    );

    const orphans = depths.types.filter((t) => t.pending > 0 && t.live_workers === 0);
    replaceRegion(
      alerts,
      orphans.length > 0 &&
        h(
          "p",
          { class: "alert" },
          "Pending jobs and no live worker for: ",
          orphans.map((t) => t.type).join(", "),
        ),
      paused.size > 0 && h("p", { class: "alert info" }, "Paused types: ", [...paused].sort().join(", ")),
    );

    replaceRegion(chart, h("h2", {}, "Throughput, last hour"), throughputChart(throughput.minutes));

    const rows = new Map<string, TypeDepth>(depths.types.map((t) => [t.type, t]));
    for (const type of paused)
      if (!rows.has(type))
        rows.set(type, {
          type,
          pending: 0,
          due: 0,
          claimed: 0,
          running: 0,
          oldest_due_seconds: null,
          next_run_at: null,
          live_workers: 0,
        });
    replaceRegion(
      types,
      h("h2", {}, "Types"),
      table(
        "Live jobs by type",
        ["type", "pending", "due", "running", "oldest due", "workers", "state", ""],
        [...rows.values()].map((t) =>
          h(
            "tr",
            { class: t.pending > 0 && t.live_workers === 0 ? "orphan" : "" },
            h(
              "td",
              {},
              h(
                "a",
                { href: `#/jobs?type=${encodeURIComponent(t.type)}`, "data-key": `type:${t.type}` },
                t.type,
              ),
            ),
            h("td", { class: "n" }, num(t.pending)),
            h("td", { class: "n" }, num(t.due)),
            h("td", { class: "n" }, num(t.running + t.claimed)),
            h("td", { class: "n" }, age(t.oldest_due_seconds)),
            h(
              "td",
              { class: "n" },
              t.live_workers === 0 && t.pending > 0 ? h("strong", {}, "none") : num(t.live_workers),
            ),
            h("td", {}, paused.has(t.type) ? badge("paused") : "active"),
            h(
              "td",
              {},
              pauseButton(t.type, paused.has(t.type), () => void refresh()),
            ),
          ),
        ),
        "no pending or running jobs",
      ),
    );

    replaceRegion(
      workers,
      h("h2", {}, "Live workers"),
      table(
        "Worker lock sessions with a fresh heartbeat",
        ["host", "pid", "types", "in flight", "last heartbeat", "id"],
        live.workers.map((w) =>
          h(
            "tr",
            {},
            h("td", {}, w.host),
            h("td", { class: "n" }, w.pid),
            h("td", {}, w.types.join(", ")),
            h("td", { class: "n" }, `${w.in_flight} / ${w.concurrency}`),
            h("td", {}, `${age(since(w.heartbeat_at))} ago `, time(w.heartbeat_at)),
            h("td", { class: "mono" }, w.id),
          ),
        ),
        "no live worker",
      ),
    );
  };

  return {
    title: "Overview",
    mount(view) {
      view.append(h("h1", {}, "Overview"), cards, alerts, chart, types, workers);
    },
    refresh,
  };
}
