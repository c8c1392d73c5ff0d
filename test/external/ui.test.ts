/**
 * The web dashboard in a real browser (issue 12, item 5): Debian's Chromium, driven by
 * playwright-core, against a real `taskqueue api` and `taskqueue worker` on the test's PostgreSQL.
 * The test signs in, enqueues jobs and watches them move on the overview, enqueues from the form,
 * filters and pages the job list, replays a dead letter (with the keyboard) and discards dead
 * letters by filter, cancels a running `slow` job (the worker process aborts it: its lock is
 * released, nothing written, the cancel counted once), pauses a type (its due job waits) and
 * resumes it, checks the database after each
 * action, and looks at every page at 1280×800 and 390 px wide with no console error. Screenshots
 * of each page go to test-output/ui/.
 */
import assert from "node:assert/strict";
import { after, before, describe, it } from "node:test";
import type { Browser, Page } from "playwright-core";
import { freePort } from "../../src/db/embedded.js";
import { createTestDb, type TestDb } from "../helpers/db.js";
import { type CliProcess, cliEnv, startCli, until } from "../helpers/process.js";
import {
  assertNoSidewaysScroll,
  type BrowserDocument,
  type BrowserStorage,
  confirmWithKeyboard,
  depthShown,
  launch,
  openPage,
  routeShown,
  screenshot,
  unavailable,
} from "./ui-support.js";

declare const document: BrowserDocument;
declare const sessionStorage: BrowserStorage;
declare const localStorage: BrowserStorage;

const TOKEN = "dashboard-test-token-0123456789";
describe("web dashboard in Chromium", () => {
  let db: TestDb;
  let api: CliProcess;
  let worker: CliProcess;
  let browser: Browser;
  let page: Page;
  let base: string;
  let routes: Set<string>;
  const problems: string[] = [];
  const closers: (() => Promise<unknown>)[] = [];

  const job = async (id: number) =>
    (
      await db.sql<{ status: string; errors: unknown[]; priority: number }>(
        "SELECT * FROM jobs WHERE id = $1",
        [id],
      )
    )[0];

  before(async () => {
    // Fails (not skips) without Chromium: CI installs it, and the external tests run only when asked.
    const missing = unavailable();
    if (missing) throw new Error(missing);
    db = await createTestDb();
    const port = await freePort();
    base = `http://127.0.0.1:${port}`;
    const env = cliEnv(db, {
      PORT: String(port),
      WORKER_COUNT: "4",
      TASKQUEUE_API_TOKEN: TOKEN,
      LOG_LEVEL: "warn",
    });
    api = startCli(["api"], { ...env, LOG_LEVEL: "info" });
    worker = startCli(["worker", "--no-migrate"], env);
    await api.waitForLog((l) => l.msg === "API listening");
    await until(async () => (await db.sql("SELECT 1 FROM workers")).length > 0, 20_000, "the worker's row");
    browser = await launch();
    ({ page } = await openPage(browser, 1280, 800, problems));
  });
  after(async () => {
    for (const close of closers) await close();
    await browser?.close();
    for (const child of [api, worker]) {
      child?.child.kill("SIGTERM");
      await child?.exited;
    }
    await db?.drop();
  });

  it("asks for the token when the API needs one, then shows the overview", async () => {
    await page.goto(`${base}/ui`);
    const login = page.locator("form.login");
    const cards = page.locator('[data-status="done"]');
    await Promise.race([login.waitFor(), cards.waitFor()]);
    if (await login.isVisible()) {
      await page.getByLabel("API token").fill(TOKEN);
      await page.keyboard.press("Enter");
    }
    await cards.waitFor();
    assert.equal(await page.evaluate(() => sessionStorage.length <= 1 && localStorage.length === 0), true);
    const doc = await page.evaluate(async (token) => {
      const res = await fetch("/docs/json", { headers: { authorization: `Bearer ${token}` } });
      return (await res.json()) as { paths: Record<string, Record<string, unknown>> };
    }, TOKEN);
    routes = new Set(
      Object.entries(doc.paths).flatMap(([path, methods]) =>
        Object.keys(methods).map((m) => `${m.toUpperCase()} ${path}`),
      ),
    );
  });

  it("shows enqueued jobs running, then done, on the overview and its chart", async () => {
    const before = await depthShown(page, "done");
    const ids = (
      await db.ledger.addJobs(
        Array.from({ length: 4 }, () => ({ type: "slow", payload: { sleep_seconds: 3 } })),
      )
    ).map((j) => j.id);
    // The page polls every 2 s and the jobs run 3 s: the overview must show them running.
    await page.waitForFunction(
      () => Number(document.querySelector('[data-status="running"]')?.textContent) > 0,
      null,
      { timeout: 10_000 },
    );
    await page.locator("table tr", { hasText: "slow" }).first().waitFor();
    await screenshot(page, "overview-running-1280");
    await page.waitForFunction(
      (n) => Number(document.querySelector('[data-status="done"]')?.textContent?.replaceAll(",", "")) >= n,
      before + 4,
      { timeout: 20_000 },
    );
    for (const id of ids) assert.equal((await job(id))?.status, "done");
    await page.waitForFunction(() =>
      /Last 60 min: [1-9][0-9,]* completed/.test(document.querySelector("figcaption")?.textContent ?? ""),
    );
    const workers = page.locator("section.panel", { hasText: "Live workers" });
    await workers.getByRole("cell", { name: String(worker.child.pid), exact: true }).waitFor();
    assert.match((await workers.textContent()) ?? "", /slow/);
    await screenshot(page, "overview-1280");
  });

  it("enqueues from the form; the job's page shows its result and history", async () => {
    await page.goto(`${base}/ui#/enqueue`);
    await page.getByLabel("Type").fill("collatz");
    await page.getByLabel("Payload (JSON)").fill('{"n": 27}');
    await page.getByLabel("Priority (1–10, 10 first)").fill("7");
    await page.getByRole("button", { name: "Enqueue" }).click();
    await page.locator("dialog[open] [data-confirm]").click();
    await page.waitForURL(/#\/jobs\/[0-9]+$/);
    const id = Number(/#\/jobs\/([0-9]+)$/.exec(page.url())?.[1]);
    await page.locator("h1 .badge", { hasText: "done" }).waitFor();
    assert.match((await page.locator("pre.json").nth(1).textContent()) ?? "", /"checksum": 101440/);
    assert.equal(await page.locator("ol.timeline li").count(), 4, "enqueued, claimed, running, done");
    const row = await job(id);
    assert.deepEqual({ status: row?.status, priority: row?.priority }, { status: "done", priority: 7 });
    await screenshot(page, "job-1280");
  });

  it("filters and pages the job list, and finds a job by id", async () => {
    await db.ledger.addJobs(Array.from({ length: 60 }, () => ({ type: "noop" })));
    await until(
      async () => (await db.sql("SELECT 1 FROM jobs WHERE type = 'noop' AND status = 'done'")).length === 60,
    );
    await page.goto(`${base}/ui#/jobs`);
    await page.getByLabel("Status").selectOption("done");
    await page.getByLabel("Type").fill("noop");
    await page.getByRole("button", { name: "Filter" }).click();
    await routeShown(page, "#/jobs?status=done&type=noop");
    assert.equal(await page.locator("tr[data-job]").count(), 50);
    await screenshot(page, "jobs-1280");
    await page.getByRole("link", { name: "Older →" }).click();
    await routeShown(page, "#/jobs?status=done&type=noop&offset=50");
    assert.equal(await page.locator("tr[data-job]").count(), 10);
    const [first] = await db.sql<{ id: number }>("SELECT min(id)::int AS id FROM jobs WHERE type = 'noop'");
    await page.getByLabel("Job id").fill(String(first?.id));
    await page.getByRole("button", { name: "Open" }).click();
    await page.locator("h1", { hasText: `Job #${first?.id}` }).waitFor();
  });

  it("replays a dead letter with the keyboard, and discards the dead letters of a type", async () => {
    const [dead] = await db.ledger.addJobs([{ type: "always_fail", maxRetries: 0 }]);
    const id = dead?.id ?? 0;
    await until(async () => (await job(id))?.status === "dead", 20_000, "the job's death");
    await page.goto(`${base}/ui#/dead`);
    const replay = page.locator(`[data-key="replay:${id}"]`);
    await replay.focus();
    await screenshot(page, "dead-letters-1280");
    await page.keyboard.press("Enter");
    await confirmWithKeyboard(page);
    await page.locator("#status", { hasText: `Job #${id} replayed.` }).waitFor();
    await until(
      async () =>
        (await db.sql("SELECT 1 FROM dead_letter_jobs WHERE job_id = $1 AND replays = 1", [id])).length === 1,
      10_000,
      "the entry marked replayed",
    );
    // always_fail dies again: its history keeps both attempts.
    await until(async () => (await job(id))?.errors.length === 2, 20_000, "the replayed attempt");

    await db.ledger.addJobs(Array.from({ length: 3 }, () => ({ type: "always_fail", maxRetries: 0 })));
    await until(
      async () =>
        (await db.sql("SELECT 1 FROM dead_letter_jobs WHERE type = 'always_fail' AND replayed_at IS NULL"))
          .length === 4,
    );
    await page.goto(`${base}/ui#/dead?type=always_fail`);
    await page.locator("tr[data-job]").nth(3).waitFor();
    await page.getByRole("button", { name: "Discard all matching" }).click();
    await page.locator("dialog[open] [data-confirm]").click();
    await page.locator("#status", { hasText: "4 entries discarded." }).waitFor();
    assert.equal((await db.sql("SELECT 1 FROM dead_letter_jobs WHERE type = 'always_fail'")).length, 0);
    assert.equal(
      (await db.sql("SELECT 1 FROM jobs WHERE type = 'always_fail' AND status = 'dead'")).length,
      4,
      "the jobs stay dead",
    );
  });

  it("cancels a running slow job from its page", async () => {
    assert.ok(routes.has("POST /jobs/{id}/cancel"), "the API serves POST /jobs/{id}/cancel");
    const [slow] = await db.ledger.addJobs([{ type: "slow", payload: { sleep_seconds: 600 } }]);
    const id = slow?.id ?? 0;
    await until(async () => (await job(id))?.status === "running", 20_000, "the slow job running");
    await page.goto(`${base}/ui#/jobs/${id}`);
    await page.locator("h1 .badge", { hasText: "running" }).waitFor();
    await page.getByRole("button", { name: "Cancel" }).click();
    await confirmWithKeyboard(page);
    await until(async () => (await job(id))?.status === "cancelled", 15_000, "the running job cancelled");
    await page.locator("h1 .badge", { hasText: "cancelled" }).waitFor();
    await screenshot(page, "job-cancelled-1280");
    // The worker process heard of it (NOTIFY) and aborted the handler: `slow` stops on abort, and
    // the job's advisory lock is released long before its 600 s; nothing of its outcome is written.
    await until(
      async () => !(await db.ledger.heldJobLocks()).some((l) => l.jobKey === id % 2 ** 31),
      15_000,
      "the worker to abort the handler and release the job's lock",
    );
    const [row] = await db.sql<{
      status: string;
      result: unknown;
      completed_at: Date | null;
      attempt: number;
    }>("SELECT status, result, completed_at, attempt FROM jobs WHERE id = $1", [id]);
    assert.deepEqual(
      {
        status: row?.status,
        result: row?.result,
        attempt: row?.attempt,
        finished: row?.completed_at !== null,
      },
      { status: "cancelled", result: null, attempt: 0, finished: true },
    );
    const [counted] = await db.sql<{ n: number }>(
      "SELECT coalesce(sum(count), 0)::int AS n FROM job_totals WHERE type = 'slow' AND event = 'cancelled'",
    );
    assert.equal(counted?.n, 1, "counted once");
  });

  it("pauses and resumes a type from the overview; the pause holds its due jobs back", async () => {
    assert.ok(routes.has("POST /types/{type}/pause") && routes.has("GET /types"), "the API serves /types");
    await db.ledger.addJobs([{ type: "noop", runAt: new Date(Date.now() + 3600_000).toISOString() }]);
    await page.goto(`${base}/ui#/`);
    await page.locator('[data-key="pause:noop"]').click();
    await confirmWithKeyboard(page);
    await page.locator(".alert", { hasText: "Paused types: noop" }).waitFor();
    assert.deepEqual(await db.sql("SELECT type FROM paused_types"), [{ type: "noop" }]);
    // A due noop job stays pending while its type is paused: an `echo` job enqueued after it (so
    // behind it in claim order) runs, and the noop job is still pending once the echo job is done.
    const [due] = await db.ledger.addJobs([{ type: "noop" }]);
    const [later] = await db.ledger.addJobs([{ type: "echo", payload: "after the paused one" }]);
    await until(async () => (await job(later?.id ?? 0))?.status === "done", 10_000, "the echo job run");
    assert.equal((await job(due?.id ?? 0))?.status, "pending");
    await screenshot(page, "overview-paused-1280");
    await page.locator('[data-key="resume:noop"]').click();
    await confirmWithKeyboard(page);
    await page.locator(".alert", { hasText: "Paused types" }).waitFor({ state: "detached" });
    assert.deepEqual(await db.sql("SELECT type FROM paused_types"), []);
    await until(async () => (await job(due?.id ?? 0))?.status === "done", 10_000, "the held-back job run");
  });

  it("is usable on a 390-px phone: no sideways scroll on any page", async () => {
    const phone = await openPage(browser, 390, 844, problems);
    closers.push(() => phone.context.close());
    await phone.page.goto(`${base}/ui`);
    if (await phone.page.locator("form.login").isVisible()) {
      await phone.page.getByLabel("API token").fill(TOKEN);
      await phone.page.keyboard.press("Enter");
    }
    const [done] = await db.sql<{ id: number }>("SELECT max(id)::int AS id FROM jobs WHERE type = 'collatz'");
    for (const [hash, name, ready] of [
      ["#/", "overview", '[data-status="done"]'],
      ["#/jobs", "jobs", "tr[data-job]"],
      [`#/jobs/${done?.id}`, "job", "ol.timeline"],
      ["#/dead?replayed=any", "dead-letters", "table"],
      ["#/enqueue", "enqueue", "form textarea"],
    ] as const) {
      await phone.page.goto(`${base}/ui${hash}`);
      await phone.page.locator(ready).first().waitFor();
      await assertNoSidewaysScroll(phone.page);
      await screenshot(phone.page, `${name}-390`);
    }
  });

  it("is reachable with the keyboard: Tab to a page's link, Enter to open it", async () => {
    await page.goto(`${base}/ui#/`);
    await page.reload();
    await page.locator('[data-status="done"]').waitFor();
    let found = false;
    for (let i = 0; i < 40 && !found; i++) {
      await page.keyboard.press("Tab");
      found = await page.evaluate(() => document.activeElement?.textContent === "Dead letters");
    }
    assert.ok(found, "Tab reaches the navigation");
    await page.keyboard.press("Enter");
    await page.waitForURL(/#\/dead$/);
    await page.locator("h1", { hasText: "Dead letters" }).waitFor();
  });

  it("logged no console error and no failed request on any page", () => {
    assert.deepEqual(problems, []);
  });
});
