/**
 * A few DOM helpers instead of a framework. Text always goes in as text nodes (never innerHTML), so
 * a job's payload or error can contain anything.
 */

type Child = Node | string | number | null | undefined | false;
type AttrValue = string | number | boolean | null | undefined | ((event: Event) => void);

/** Creates `<tag>` with attributes (`on*` functions become listeners; true is a bare attribute) and children. */
export function h<K extends keyof HTMLElementTagNameMap>(
  tag: K,
  attrs: Record<string, AttrValue> = {},
  ...children: (Child | Child[])[]
): HTMLElementTagNameMap[K] {
  const el = document.createElement(tag);
  for (const [name, value] of Object.entries(attrs)) {
    if (typeof value === "function") el.addEventListener(name.slice(2), value);
    else if (value === true) el.setAttribute(name, "");
    else if (value !== false && value !== null && value !== undefined) el.setAttribute(name, String(value));
  }
  for (const child of children.flat()) {
    if (child === null || child === undefined || child === false) continue;
    el.append(child instanceof Node ? child : String(child));
  }
  return el;
}

/**
 * Replaces the children of `region`, keeping keyboard focus on the element with the same
 * `data-key` if it had it, so that a live refresh every 2 s does not throw a keyboard user out.
 */
export function replaceRegion(region: Element, ...children: (Child | Child[])[]): void {
  const active = document.activeElement;
  const key = active instanceof HTMLElement && region.contains(active) ? active.dataset.key : undefined;
  region.replaceChildren(
    ...children
      .flat()
      .filter((c): c is Node | string => c !== null && c !== undefined && c !== false)
      .map((c) => (c instanceof Node ? c : String(c))),
  );
  if (key) region.querySelector<HTMLElement>(`[data-key="${CSS.escape(key)}"]`)?.focus();
}

/** "12 s", "4 min", "3 h", "2 d": an age or duration in seconds, short. */
export function age(seconds: number | null): string {
  if (seconds === null || !Number.isFinite(seconds)) return "—";
  if (seconds < 60) return `${seconds.toFixed(seconds < 10 ? 1 : 0)} s`;
  if (seconds < 3600) return `${Math.floor(seconds / 60)} min`;
  if (seconds < 86400) return `${(seconds / 3600).toFixed(1)} h`;
  return `${(seconds / 86400).toFixed(1)} d`;
}

/** Seconds since an ISO-8601 instant (the browser's clock, for display only). */
export function since(iso: string | null): number | null {
  return iso === null ? null : Math.max(0, (Date.now() - Date.parse(iso)) / 1000);
}

/** An instant as local date and time, to the second, with its ISO-8601 form as the tooltip. */
export function time(iso: string | null): HTMLElement | string {
  if (iso === null) return "—";
  const d = new Date(iso);
  const pad = (n: number) => String(n).padStart(2, "0");
  const text = `${d.getFullYear()}-${pad(d.getMonth() + 1)}-${pad(d.getDate())} ${pad(d.getHours())}:${pad(d.getMinutes())}:${pad(d.getSeconds())}`;
  return h("time", { datetime: iso, title: iso }, text);
}

/** A number with thousands separators. */
export function num(n: number): string {
  return n.toLocaleString("en-US");
}

/** A JSON value, pretty-printed, in a scrollable block. */
export function json(value: unknown): HTMLElement {
  return h("pre", { class: "json", tabindex: 0 }, value === undefined ? "—" : JSON.stringify(value, null, 2));
}

/** A status badge. */
export function badge(status: string): HTMLElement {
  return h("span", { class: `badge s-${status}` }, status);
}

/** A table in a horizontally scrolling, keyboard-focusable wrapper (narrow screens). */
export function table(
  caption: string,
  head: string[],
  rows: HTMLTableRowElement[],
  empty = "none",
): HTMLElement {
  // Each cell names its column, so that narrow screens can show a row as a card (app.css).
  for (const row of rows)
    for (const [i, cell] of [...row.cells].entries()) if (head[i]) cell.dataset.label = head[i];
  return h(
    "div",
    { class: "table-wrap", tabindex: 0, role: "region", "aria-label": caption },
    h(
      "table",
      {},
      h("caption", {}, caption),
      h("thead", {}, h("tr", {}, ...head.map((c) => h("th", { scope: "col" }, c)))),
      h(
        "tbody",
        {},
        rows.length > 0 ? rows : h("tr", {}, h("td", { colspan: head.length, class: "empty" }, empty)),
      ),
    ),
  );
}
