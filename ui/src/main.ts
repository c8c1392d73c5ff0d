/**
 * The dashboard's entry: the login form (when the API asks for a token), the fragment router
 * (`#/`, `#/jobs?…`, `#/jobs/42`, `#/dead?…`, `#/enqueue`) and the live loop, which refreshes the
 * page shown every 2 s while the tab is visible (one request round at a time).
 */
import { ApiError, call, loadRoutes, setToken, token, whenUnauthorized } from "./api.js";
import { deadPage } from "./dead.js";
import { h } from "./dom.js";
import { enqueuePage } from "./enqueue.js";
import { notify } from "./feedback.js";
import { jobPage } from "./job.js";
import { jobsPage } from "./jobs.js";
import { overviewPage } from "./overview.js";
import type { Page } from "./page.js";

/** Live refresh period, ms (the issue: at most every 2 s). */
const REFRESH_MS = 2000;

const view = document.getElementById("view") as HTMLElement;
const logout = document.getElementById("logout") as HTMLButtonElement;
let page: Page | null = null;
let timer: ReturnType<typeof setTimeout> | undefined;
let generation = 0;

/** The page for the current fragment. */
function pageFor(hash: string): Page {
  const [path = "", query = ""] = hash.replace(/^#\/?/, "").split("?");
  const params = new URLSearchParams(query);
  const job = /^jobs\/([0-9]+)$/.exec(path);
  if (job) return jobPage(Number(job[1]));
  if (path === "jobs") return jobsPage(params);
  if (path === "dead") return deadPage(params);
  if (path === "enqueue") return enqueuePage();
  return overviewPage();
}

/** Refreshes the page now, then every {@link REFRESH_MS} while it is shown and the tab visible. */
async function tick(mine: number): Promise<void> {
  clearTimeout(timer);
  if (mine !== generation || !page?.refresh) return;
  try {
    await page.refresh();
    document.body.classList.remove("stale");
  } catch (error) {
    if (mine !== generation) return;
    document.body.classList.add("stale");
    if (!(error instanceof ApiError && error.status === 401))
      notify(`Could not refresh: ${error instanceof Error ? error.message : String(error)}`, "error");
  }
  // The page now shows what the server said for its route (or that it could not say).
  if (mine === generation) view.setAttribute("aria-busy", "false");
  if (mine === generation && !document.hidden) timer = setTimeout(() => void tick(mine), REFRESH_MS);
}

/** Shows the page of the current fragment. */
function show(): void {
  generation++;
  page = pageFor(location.hash);
  document.title = `${page.title} — taskqueue`;
  view.replaceChildren();
  // `data-route` names what the view shows; `aria-busy` is true until its first read is done.
  view.dataset.route = location.hash || "#/";
  view.setAttribute("aria-busy", page.refresh ? "true" : "false");
  page.mount(view);
  for (const link of document.querySelectorAll<HTMLAnchorElement>("header nav a")) {
    const here = (location.hash || "#/").split("?")[0] ?? "";
    const target = link.getAttribute("href") ?? "";
    if (target === here || (target !== "#/" && here.startsWith(target)))
      link.setAttribute("aria-current", "page");
    else link.removeAttribute("aria-current");
  }
  void tick(generation);
}

/** Shows the login form; on submit keeps the token for this tab and starts again. */
function login(message?: string): void {
  generation++;
  clearTimeout(timer);
  const form = h(
    "form",
    { class: "stack login", "aria-label": "Sign in" },
    h("h1", {}, "Sign in"),
    h(
      "p",
      {},
      message ??
        "This API needs its bearer token (TASKQUEUE_API_TOKEN). It is kept in this tab only, until you close it.",
    ),
    h(
      "label",
      {},
      "API token",
      h("input", { name: "token", type: "password", required: true, autocomplete: "current-password" }),
    ),
    h("div", { class: "actions" }, h("button", { type: "submit" }, "Sign in")),
  );
  form.addEventListener("submit", (event) => {
    event.preventDefault();
    setToken(String(new FormData(form).get("token") ?? "").trim());
    void start();
  });
  view.replaceChildren(form);
  form.querySelector("input")?.focus();
}

/** Checks the token (or that none is needed), loads the server's routes and shows the page. */
async function start(): Promise<void> {
  try {
    // Ask for the token first when the API needs one, rather than call it to be refused.
    if (token() === null) {
      const config = await call<{ auth_required?: boolean }>("ui/config.json");
      if (config.auth_required) {
        login();
        return;
      }
    }
    await loadRoutes();
  } catch (error) {
    // A 401 has shown the login form already (whenUnauthorized below).
    if (error instanceof ApiError && error.status === 401) return;
    view.replaceChildren(h("p", { class: "alert" }, `The API does not answer: ${String(error)}`));
    return;
  }
  logout.hidden = token() === null;
  show();
}

whenUnauthorized(() => {
  const had = token() !== null;
  setToken(null);
  logout.hidden = true;
  login(had ? "The token was refused. Enter the API's bearer token." : undefined);
});
logout.addEventListener("click", () => {
  setToken(null);
  logout.hidden = true;
  void start();
});
window.addEventListener("hashchange", () => {
  if (view.querySelector("form.login")) return;
  show();
});
document.addEventListener("visibilitychange", () => {
  if (!document.hidden && page) void tick(generation);
});
void start();
