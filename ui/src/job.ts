/**
 * A job's page: its fields, payload, result and error, the attempt history as a timeline, its
 * worker, and the actions its state allows (cancel, retry now, replay or discard its dead letter),
 * each confirmed and each one call of the public API.
 */
import { ApiError, call, hasRoute } from "./api.js";
import { age, badge, h, json, replaceRegion, since, time } from "./dom.js";
import { act } from "./feedback.js";
import type { Page } from "./page.js";
import type { DeadLetter, Job, Worker } from "./wire.js";

/** Jobs whose dead-letter entry this page discarded: not asked for again (it would be a 404). */
const discarded = new Set<number>();

interface Event {
  at: string;
  label: string;
  detail?: string;
  kind: string;
}

/** `later` − `earlier` (ISO-8601 instants) in ms or s, never negative. */
function ms(later: string, earlier: string): string {
  const elapsed = Math.max(0, Date.parse(later) - Date.parse(earlier));
  return elapsed < 1000 ? `${elapsed} ms` : `${(elapsed / 1000).toFixed(elapsed < 10_000 ? 2 : 1)} s`;
}

/** The job's history in time order: enqueued, each failed attempt, the last claim and start, the end. */
function timeline(job: Job): HTMLElement {
  const events: Event[] = [{ at: job.created_at, label: "enqueued", kind: "pending" }];
  for (const e of job.errors) {
    events.push({
      at: e.failed_at ?? job.created_at,
      label: `attempt ${e.attempt ?? "?"} failed${e.permanent ? " (permanent)" : ""}`,
      detail: `${e.error ?? ""}${e.worker_id ? ` — worker ${e.worker_id}` : ""}`,
      kind: "dead",
    });
  }
  if (job.claimed_at)
    events.push({
      at: job.claimed_at,
      label: `attempt ${job.attempt} claimed`,
      detail: `${job.worker_id ? `worker ${job.worker_id}, ` : ""}${ms(job.claimed_at, job.run_at)} after it was due`,
      kind: "claimed",
    });
  if (job.started_at)
    events.push({ at: job.started_at, label: `attempt ${job.attempt} running`, kind: "running" });
  if (job.completed_at)
    events.push({
      at: job.completed_at,
      label: job.status,
      detail:
        job.status === "dead"
          ? (job.error ?? undefined)
          : job.status === "done" && job.started_at
            ? `ran ${ms(job.completed_at, job.started_at)}`
            : undefined,
      kind: job.status,
    });
  events.sort((a, b) => Date.parse(a.at) - Date.parse(b.at));
  return h(
    "ol",
    { class: "timeline", "aria-label": "Attempt history" },
    events.map((e) =>
      h(
        "li",
        { class: `t-${e.kind}` },
        time(e.at),
        " ",
        h("strong", {}, e.label),
        e.detail ? h("div", { class: "detail" }, e.detail) : null,
      ),
    ),
  );
}

/** The actions the job's state allows; each refreshes the page when done. */
function actions(job: Job, dead: DeadLetter | null, refresh: () => void): HTMLElement {
  const buttons: HTMLElement[] = [];
  const held = job.status === "claimed" || job.status === "running";
  const cancelRoute = hasRoute("POST /jobs/{id}/cancel");
  if (job.status === "pending" || held) {
    const can = job.status === "pending" || cancelRoute;
    buttons.push(
      h(
        "button",
        {
          type: "button",
          class: "danger",
          "data-key": "cancel",
          disabled: !can,
          title: can ? undefined : "this server has no POST /jobs/{id}/cancel (running jobs)",
          onclick: () =>
            act(
              held
                ? `Cancel running job #${job.id}? Its handler is aborted and the job ends cancelled.`
                : `Cancel pending job #${job.id}?`,
              "Cancel job",
              async () => {
                if (cancelRoute) await call(`jobs/${job.id}/cancel`, "POST");
                else await call(`jobs/${job.id}`, "DELETE");
                return `Job #${job.id}: cancel requested.`;
              },
              refresh,
            ),
        },
        "Cancel",
      ),
    );
  }
  if (job.status === "pending" || job.status === "dead") {
    buttons.push(
      h(
        "button",
        {
          type: "button",
          "data-key": "retry",
          onclick: () =>
            act(
              `Retry job #${job.id} now?`,
              "Retry now",
              async () => {
                const answer = await call<{ status?: string; job?: { status?: string } }>(
                  `jobs/${job.id}/retry`,
                  "POST",
                );
                return `Job #${job.id} is ${answer.status ?? answer.job?.status ?? "due now"}.`;
              },
              refresh,
            ),
        },
        "Retry now",
      ),
    );
  }
  if (dead) {
    buttons.push(
      h(
        "button",
        {
          type: "button",
          "data-key": "replay",
          disabled: dead.replayed_at !== null && job.status !== "dead",
          onclick: () =>
            act(
              `Replay dead letter #${job.id}? The job goes back to pending with its attempts reset.`,
              "Replay",
              async () => {
                const answer = await call<{ replayed: boolean }>(`dead-letters/${job.id}/replay`, "POST");
                return answer.replayed ? `Job #${job.id} replayed.` : `Job #${job.id} was not dead any more.`;
              },
              refresh,
            ),
        },
        "Replay dead letter",
      ),
      h(
        "button",
        {
          type: "button",
          class: "danger",
          "data-key": "discard",
          onclick: () =>
            act(
              `Discard the dead-letter entry of job #${job.id}? The job stays dead.`,
              "Discard",
              async () => {
                await call(`dead-letters/${job.id}`, "DELETE");
                discarded.add(job.id);
                return `Dead-letter entry of job #${job.id} discarded.`;
              },
              refresh,
            ),
        },
        "Discard dead letter",
      ),
    );
  }
  return h(
    "div",
    { class: "actions", role: "group", "aria-label": "Actions" },
    buttons.length > 0 ? buttons : h("span", { class: "muted" }, `no action for a job that is ${job.status}`),
  );
}

/** The page of job `id`. */
export function jobPage(id: number): Page {
  const body = h("section", {});
  const refresh = async () => {
    let job: Job;
    try {
      job = await call<Job>(`jobs/${id}`);
    } catch (error) {
      if (error instanceof ApiError && error.status === 404) {
        replaceRegion(body, h("p", { class: "alert" }, `No job #${id}.`));
        return;
      }
      throw error;
    }
    const [dead, workers] = await Promise.all([
      job.status === "dead" && !discarded.has(id)
        ? call<DeadLetter>(`dead-letters/${id}`).catch((e: unknown) =>
            e instanceof ApiError && e.status === 404 ? null : Promise.reject(e),
          )
        : Promise.resolve(null),
      job.worker_id ? call<{ workers: Worker[] }>("workers") : Promise.resolve({ workers: [] as Worker[] }),
    ]);
    const worker = workers.workers.find((w) => w.id === job.worker_id);
    const field = (name: string, value: Node | string | number) => [h("dt", {}, name), h("dd", {}, value)];
    replaceRegion(
      body,
      h("h1", {}, `Job #${job.id} `, badge(job.status)),
      actions(job, dead, () => void refresh()),
      h(
        "div",
        { class: "columns" },
        h(
          "dl",
          { class: "fields" },
          field("type", job.type),
          field("priority", job.priority),
          field("attempts", `${job.attempt} failed of ${job.max_retries + 1} allowed`),
          field("run at", time(job.run_at)),
          field("created", time(job.created_at)),
          field("claimed", time(job.claimed_at)),
          field("started", time(job.started_at)),
          field("heartbeat", time(job.heartbeat_at)),
          field("finished", time(job.completed_at)),
          field(
            "worker",
            job.worker_id
              ? h(
                  "span",
                  {},
                  h("span", { class: "mono" }, job.worker_id),
                  worker
                    ? ` — live on ${worker.host}, pid ${worker.pid}, heartbeat ${age(since(worker.heartbeat_at))} ago`
                    : " — not live",
                )
              : "—",
          ),
          dead
            ? field(
                "dead letter",
                dead.replayed_at
                  ? `replayed ${dead.replays}×, last ${new Date(dead.replayed_at).toLocaleString()}`
                  : `died ${new Date(dead.died_at).toLocaleString()}, waiting`,
              )
            : [],
        ),
        h("div", {}, h("h2", {}, "Attempt history"), timeline(job)),
      ),
      h("h2", {}, "Payload"),
      json(job.payload),
      h("h2", {}, "Result"),
      json(job.result),
      h("h2", {}, "Error"),
      job.error ? h("pre", { class: "error", tabindex: 0 }, job.error) : h("p", { class: "muted" }, "none"),
    );
  };
  return {
    title: `Job #${id}`,
    mount(view) {
      view.append(h("p", {}, h("a", { href: "#/jobs" }, "← Jobs")), body);
    },
    refresh,
  };
}
