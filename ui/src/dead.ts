/**
 * Dead letters: the list (filters type, died after, waiting or replayed; paged), replay or discard
 * one, and replay or discard every entry matching the filter (in batches of 1,000 while the server
 * says `more`).
 */
import { call } from "./api.js";
import { h, replaceRegion, table, time } from "./dom.js";
import { act } from "./feedback.js";
import { fromLocalInput, route, toLocalInput } from "./jobs.js";
import type { Page } from "./page.js";
import type { DeadLetter } from "./wire.js";

const PAGE_SIZE = 50;
/** Most batches one bulk action sends (1,000 entries each). */
const MAX_BATCHES = 1000;

/** Sends a bulk replay or discard until the server says nothing more matches; answers the total. */
async function bulk(path: string, filter: Record<string, unknown>): Promise<number> {
  let total = 0;
  for (let i = 0; i < MAX_BATCHES; i++) {
    const answer = await call<{ job_ids: number[]; more: boolean }>(path, "POST", { ...filter, limit: 1000 });
    total += answer.job_ids.length;
    if (!answer.more) break;
  }
  return total;
}

/** The dead-letter page with `params` from the route (type, died_after, replayed, offset). */
export function deadPage(params: URLSearchParams): Page {
  const type = params.get("type") ?? "";
  const diedAfter = params.get("died_after") ?? "";
  const replayed = params.get("replayed") ?? "false";
  const offset = Math.max(0, Number(params.get("offset") ?? 0) || 0);
  const list = h("section", { class: "panel" });

  const form = h(
    "form",
    { class: "filters", "aria-label": "Filter dead letters" },
    h(
      "label",
      {},
      "Type ",
      h("input", { name: "type", value: type, placeholder: "any", autocomplete: "off" }),
    ),
    h(
      "label",
      {},
      "Died after ",
      h("input", { name: "died_after", type: "datetime-local", step: 1, value: toLocalInput(diedAfter) }),
    ),
    h(
      "label",
      {},
      "Entries ",
      h(
        "select",
        { name: "replayed" },
        h("option", { value: "false", selected: replayed === "false" }, "waiting"),
        h("option", { value: "true", selected: replayed === "true" }, "replayed"),
        h("option", { value: "any", selected: replayed === "any" }, "all"),
      ),
    ),
    h("button", { type: "submit" }, "Filter"),
  );
  form.addEventListener("submit", (event) => {
    event.preventDefault();
    const data = new FormData(form);
    location.hash = route("dead", {
      type: String(data.get("type") ?? "").trim(),
      died_after: fromLocalInput(String(data.get("died_after") ?? "")),
      replayed: String(data.get("replayed") ?? "false"),
    });
  });

  // The bulk actions take the filter shown; with none, every entry (`all: true`), said so in the question.
  const filter: Record<string, unknown> = {};
  if (type) filter.type = type;
  if (diedAfter) filter.died_after = diedAfter;
  const described =
    Object.keys(filter).length === 0
      ? "every dead letter"
      : `every dead letter with ${Object.entries(filter)
          .map(([k, v]) => `${k} ${String(v)}`)
          .join(", ")}`;
  if (Object.keys(filter).length === 0) filter.all = true;
  const refreshLater = () => void page.refresh?.();
  const bulkButtons = h(
    "div",
    { class: "actions", role: "group", "aria-label": "Bulk actions" },
    h(
      "button",
      {
        type: "button",
        "data-key": "replay-all",
        onclick: () =>
          act(
            `Replay ${described} whose job is still dead?`,
            "Replay all",
            async () => `${await bulk("dead-letters/replay", filter)} jobs replayed.`,
            refreshLater,
          ),
      },
      "Replay all matching",
    ),
    h(
      "button",
      {
        type: "button",
        class: "danger",
        "data-key": "discard-all",
        onclick: () =>
          act(
            `Discard ${described}${replayed === "any" ? "" : ` (${replayed === "true" ? "replayed" : "waiting"} ones)`}? The jobs stay dead.`,
            "Discard all",
            async () =>
              `${await bulk("dead-letters/discard", replayed === "any" ? filter : { ...filter, replayed: replayed === "true" })} entries discarded.`,
            refreshLater,
          ),
      },
      "Discard all matching",
    ),
  );

  const row = (d: DeadLetter) =>
    h(
      "tr",
      { "data-job": d.job_id },
      h(
        "td",
        { class: "n" },
        h("a", { href: `#/jobs/${d.job_id}`, "data-key": `job:${d.job_id}` }, `#${d.job_id}`),
      ),
      h("td", {}, d.type),
      h("td", {}, time(d.died_at)),
      h("td", { class: "n" }, d.attempts),
      h("td", { class: "err" }, (d.error ?? "").slice(0, 200)),
      h("td", {}, d.replayed_at ? `replayed ${d.replays}×` : "waiting"),
      h(
        "td",
        { class: "row-actions" },
        h(
          "button",
          {
            type: "button",
            "data-key": `replay:${d.job_id}`,
            onclick: () =>
              act(
                `Replay job #${d.job_id}? It goes back to pending with its attempts reset.`,
                "Replay",
                async () => {
                  const answer = await call<{ replayed: boolean }>(`dead-letters/${d.job_id}/replay`, "POST");
                  return answer.replayed
                    ? `Job #${d.job_id} replayed.`
                    : `Job #${d.job_id} was not dead any more.`;
                },
                refreshLater,
              ),
          },
          "Replay",
        ),
        h(
          "button",
          {
            type: "button",
            class: "danger",
            "data-key": `discard:${d.job_id}`,
            onclick: () =>
              act(
                `Discard the dead-letter entry of job #${d.job_id}? The job stays dead.`,
                "Discard",
                async () => {
                  await call(`dead-letters/${d.job_id}`, "DELETE");
                  return `Dead-letter entry of job #${d.job_id} discarded.`;
                },
                refreshLater,
              ),
          },
          "Discard",
        ),
      ),
    );

  const page: Page = {
    title: "Dead letters",
    mount(view) {
      view.append(h("h1", {}, "Dead letters"), h("div", { class: "toolbar" }, form), bulkButtons, list);
    },
    refresh: async () => {
      const query = new URLSearchParams({ limit: String(PAGE_SIZE), offset: String(offset) });
      if (type) query.set("type", type);
      if (diedAfter) query.set("died_after", diedAfter);
      if (replayed !== "any") query.set("replayed", replayed);
      const { dead_letters } = await call<{ dead_letters: DeadLetter[] }>(`dead-letters?${query}`);
      const here = { type, died_after: diedAfter, replayed };
      replaceRegion(
        list,
        table(
          "Dead letters, newest death first",
          ["job", "type", "died", "attempts", "error", "entry", ""],
          dead_letters.map(row),
          "no dead letter matches",
        ),
        h(
          "nav",
          { class: "pager", "aria-label": "Pages" },
          offset > 0 &&
            h(
              "a",
              {
                href: route("dead", { ...here, offset: Math.max(0, offset - PAGE_SIZE) }),
                "data-key": "newer",
              },
              "← Newer",
            ),
          dead_letters.length === PAGE_SIZE &&
            h(
              "a",
              { href: route("dead", { ...here, offset: offset + PAGE_SIZE }), "data-key": "older" },
              "Older →",
            ),
        ),
      );
    },
  };
  return page;
}
