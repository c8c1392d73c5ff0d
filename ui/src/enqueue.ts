/** Enqueue a job from a form: type, payload JSON, priority, max retries, run at (POST /jobs). */
import { call } from "./api.js";
import { h } from "./dom.js";
import { act, notify } from "./feedback.js";
import { fromLocalInput } from "./jobs.js";
import type { Page } from "./page.js";
import type { Job } from "./wire.js";

/** The enqueue page. */
export function enqueuePage(): Page {
  const form = h(
    "form",
    { class: "stack", "aria-label": "Enqueue a job" },
    h(
      "label",
      {},
      "Type",
      h("input", {
        name: "type",
        required: true,
        maxlength: 200,
        autocomplete: "off",
        placeholder: "e.g. echo",
      }),
    ),
    h("label", {}, "Payload (JSON)", h("textarea", { name: "payload", rows: 6, spellcheck: "false" }, "{}")),
    h(
      "label",
      {},
      "Priority (1–10, 10 first)",
      h("input", { name: "priority", type: "number", min: 1, max: 10, value: 5 }),
    ),
    h(
      "label",
      {},
      "Max retries (0–10)",
      h("input", { name: "max_retries", type: "number", min: 0, max: 10, value: 3 }),
    ),
    h(
      "label",
      {},
      "Run at (empty: now; your time zone)",
      h("input", { name: "run_at", type: "datetime-local", step: 1 }),
    ),
    h("div", { class: "actions" }, h("button", { type: "submit" }, "Enqueue")),
  );
  form.addEventListener("submit", (event) => {
    event.preventDefault();
    const data = new FormData(form);
    let payload: unknown;
    try {
      payload = JSON.parse(String(data.get("payload") ?? "{}") || "{}");
    } catch (error) {
      notify(`The payload is not JSON: ${(error as Error).message}`, "error");
      return;
    }
    const body: Record<string, unknown> = {
      type: String(data.get("type") ?? "").trim(),
      payload,
      priority: Number(data.get("priority")),
      max_retries: Number(data.get("max_retries")),
    };
    const runAt = fromLocalInput(String(data.get("run_at") ?? ""));
    if (runAt) body.run_at = runAt;
    void act(`Enqueue a job of type "${body.type}"?`, "Enqueue", async () => {
      const job = await call<Job>("jobs", "POST", body);
      location.hash = `#/jobs/${job.id}`;
      return `Job #${job.id} enqueued.`;
    });
  });
  return {
    title: "Enqueue",
    mount(view) {
      view.append(h("h1", {}, "Enqueue a job"), h("section", { class: "panel" }, form));
    },
    refresh: null,
  };
}
