/** The jobs list (the filters of GET /jobs, paged; a search by id) and a job's page. */
import { call } from "./api.js";
import { badge, h, replaceRegion, table, time } from "./dom.js";
import type { Page } from "./page.js";
import { type Job, STATUSES } from "./wire.js";

/** Jobs per page. */
const PAGE_SIZE = 50;

/** Builds a hash route with the non-empty `params`. */
export function route(path: string, params: Record<string, string | number | undefined>): string {
  const query = new URLSearchParams();
  for (const [k, v] of Object.entries(params))
    if (v !== undefined && v !== "" && v !== 0) query.set(k, String(v));
  const text = query.toString();
  return `#/${path}${text ? `?${text}` : ""}`;
}

/** An ISO-8601 instant as a `datetime-local` value (the browser's time zone). */
export function toLocalInput(iso: string | null): string {
  if (!iso) return "";
  const d = new Date(iso);
  if (Number.isNaN(d.getTime())) return "";
  return new Date(d.getTime() - d.getTimezoneOffset() * 60_000).toISOString().slice(0, 16);
}

/** A `datetime-local` value as an ISO-8601 instant with offset (Z), or undefined when empty. */
export function fromLocalInput(value: string): string | undefined {
  if (!value) return undefined;
  const d = new Date(value);
  return Number.isNaN(d.getTime()) ? undefined : d.toISOString();
}

/** One row of a job list. */
function jobRow(job: Job): HTMLTableRowElement {
  return h(
    "tr",
    { "data-job": job.id },
    h("td", { class: "n" }, h("a", { href: `#/jobs/${job.id}`, "data-key": `job:${job.id}` }, `#${job.id}`)),
    h("td", {}, job.type),
    h("td", {}, badge(job.status)),
    h("td", { class: "n" }, job.priority),
    h("td", { class: "n" }, `${job.attempt} / ${job.max_retries + 1}`),
    h("td", {}, time(job.created_at)),
    h("td", {}, time(job.completed_at ?? job.run_at)),
  );
}

/** The jobs list with `params` from the route (status, type, created_after, offset). */
export function jobsPage(params: URLSearchParams): Page {
  const status = params.get("status") ?? "";
  const type = params.get("type") ?? "";
  const createdAfter = params.get("created_after") ?? "";
  const offset = Math.max(0, Number(params.get("offset") ?? 0) || 0);
  const list = h("section", { class: "panel" });

  const form = h(
    "form",
    { class: "filters", "aria-label": "Filter jobs" },
    h(
      "label",
      {},
      "Status ",
      h(
        "select",
        { name: "status" },
        h("option", { value: "" }, "any"),
        ...STATUSES.map((s) => h("option", { value: s, selected: s === status }, s)),
      ),
    ),
    h(
      "label",
      {},
      "Type ",
      h("input", { name: "type", value: type, placeholder: "any", autocomplete: "off" }),
    ),
    h(
      "label",
      {},
      "Created after ",
      h("input", {
        name: "created_after",
        type: "datetime-local",
        step: 1,
        value: toLocalInput(createdAfter),
      }),
    ),
    h("button", { type: "submit" }, "Filter"),
  );
  form.addEventListener("submit", (event) => {
    event.preventDefault();
    const data = new FormData(form);
    location.hash = route("jobs", {
      status: String(data.get("status") ?? ""),
      type: String(data.get("type") ?? "").trim(),
      created_after: fromLocalInput(String(data.get("created_after") ?? "")),
    });
  });

  const search = h(
    "form",
    { class: "filters", role: "search", "aria-label": "Find a job by id" },
    h(
      "label",
      {},
      "Job id ",
      h("input", { name: "id", inputmode: "numeric", pattern: "[0-9]+", required: true, size: 10 }),
    ),
    h("button", { type: "submit" }, "Open"),
  );
  search.addEventListener("submit", (event) => {
    event.preventDefault();
    const id = String(new FormData(search).get("id") ?? "")
      .trim()
      .replace(/^#/, "");
    if (/^[0-9]+$/.test(id)) location.hash = `#/jobs/${id}`;
  });

  const refresh = async () => {
    const query = new URLSearchParams({ limit: String(PAGE_SIZE), offset: String(offset) });
    if (status) query.set("status", status);
    if (type) query.set("type", type);
    if (createdAfter) query.set("created_after", createdAfter);
    const { jobs } = await call<{ jobs: Job[] }>(`jobs?${query}`);
    const here = { status, type, created_after: createdAfter };
    replaceRegion(
      list,
      table(
        `Jobs ${jobs.length === 0 ? "" : `${offset + 1}–${offset + jobs.length}`}, newest first`,
        ["id", "type", "status", "priority", "attempts", "created", "run at / finished"],
        jobs.map(jobRow),
        "no job matches",
      ),
      h(
        "nav",
        { class: "pager", "aria-label": "Pages" },
        offset > 0 &&
          h(
            "a",
            {
              href: route("jobs", { ...here, offset: Math.max(0, offset - PAGE_SIZE) }),
              "data-key": "newer",
            },
            "← Newer",
          ),
        jobs.length === PAGE_SIZE &&
          h(
            "a",
            { href: route("jobs", { ...here, offset: offset + PAGE_SIZE }), "data-key": "older" },
            "Older →",
          ),
      ),
    );
  };

  return {
    title: "Jobs",
    mount(view) {
      view.append(h("h1", {}, "Jobs"), h("div", { class: "toolbar" }, form, search), list);
    },
    refresh,
  };
}
