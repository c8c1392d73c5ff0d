/**
 * The overview's chart: completed jobs and failed attempts per minute over the last hour, as
 * stacked bars, with the error rate per minute as a line. Plain SVG, scaled to its box.
 */
import { h, num } from "./dom.js";
import type { ThroughputMinute } from "./wire.js";

const SVG = "http://www.w3.org/2000/svg";
const W = 600;
const H = 160;
const PAD = { left: 36, right: 36, top: 8, bottom: 20 };

function svg<K extends keyof SVGElementTagNameMap>(
  tag: K,
  attrs: Record<string, string | number>,
  text?: string,
) {
  const el = document.createElementNS(SVG, tag);
  for (const [name, value] of Object.entries(attrs)) el.setAttribute(name, String(value));
  if (text !== undefined) el.textContent = text;
  return el;
}

/** The chart for `minutes` (oldest first), with a caption summing the hour. */
export function throughputChart(minutes: ThroughputMinute[]): HTMLElement {
  const done = minutes.reduce((s, m) => s + m.done, 0);
  const failed = minutes.reduce((s, m) => s + m.failed, 0);
  const rate = done + failed === 0 ? 0 : failed / (done + failed);
  const summary = `Last ${minutes.length} min: ${num(done)} completed, ${num(failed)} failed attempts, error rate ${(rate * 100).toFixed(1)} %`;
  const max = Math.max(1, ...minutes.map((m) => m.done + m.failed));
  const plotW = W - PAD.left - PAD.right;
  const plotH = H - PAD.top - PAD.bottom;
  const step = plotW / Math.max(1, minutes.length);
  const y = (v: number) => PAD.top + plotH - (v / max) * plotH;
  const root = svg("svg", { viewBox: `0 0 ${W} ${H}`, role: "img", "aria-label": summary, class: "chart" });
  root.append(
    svg("line", { x1: PAD.left, x2: W - PAD.right, y1: y(0), y2: y(0), class: "axis" }),
    svg("text", { x: PAD.left - 4, y: y(max) + 4, "text-anchor": "end", class: "tick" }, num(max)),
    svg("text", { x: PAD.left - 4, y: y(0), "text-anchor": "end", class: "tick" }, "0"),
    svg("text", { x: W - PAD.right + 4, y: y(max) + 4, class: "tick rate" }, "100 %"),
    svg("text", { x: PAD.left, y: H - 4, class: "tick" }, `−${minutes.length} min`),
    svg("text", { x: W - PAD.right, y: H - 4, "text-anchor": "end", class: "tick" }, "now"),
  );
  const points: string[] = [];
  minutes.forEach((m, i) => {
    const x = PAD.left + i * step;
    const bar = svg("g", {});
    const label = `${new Date(m.minute).toLocaleTimeString()}: ${m.done} completed, ${m.failed} failed`;
    bar.append(svg("title", {}, label));
    if (m.done > 0)
      bar.append(
        svg("rect", {
          x: x + 1,
          width: Math.max(1, step - 2),
          y: y(m.done),
          height: y(0) - y(m.done),
          class: "done",
        }),
      );
    if (m.failed > 0)
      bar.append(
        svg("rect", {
          x: x + 1,
          width: Math.max(1, step - 2),
          y: y(m.done + m.failed),
          height: y(m.done) - y(m.done + m.failed),
          class: "failed",
        }),
      );
    root.append(bar);
    const total = m.done + m.failed;
    if (total > 0) points.push(`${x + step / 2},${PAD.top + plotH - (m.failed / total) * plotH}`);
  });
  if (points.length > 1) root.append(svg("polyline", { points: points.join(" "), class: "rate-line" }));
  return h(
    "figure",
    { class: "chart-box" },
    root,
    h(
      "figcaption",
      {},
      h("span", { class: "key done" }, "completed"),
      " ",
      h("span", { class: "key failed" }, "failed attempts"),
      " ",
      h("span", { class: "key rate" }, "error rate (line, right axis)"),
      h("br"),
      summary,
    ),
  );
}
