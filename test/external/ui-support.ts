/**
 * What the dashboard's browser test drives: Debian's Chromium through playwright-core (nothing
 * downloads a browser), a real `taskqueue api` and `taskqueue worker` on the test's schema, and the
 * checks every page gets (no console error, no request failed, no sideways scroll on a phone).
 */
import assert from "node:assert/strict";
import { existsSync, mkdirSync } from "node:fs";
import { join } from "node:path";
import { type Browser, type BrowserContext, chromium, type Page } from "playwright-core";

/**
 * The browser globals that functions passed to `page.evaluate` use: they run in Chromium, not in
 * Node, and the tests compile without the DOM library. Each file declares what it uses with these.
 */
interface BrowserElement {
  textContent: string | null;
}
export interface BrowserDocument {
  documentElement: { scrollWidth: number };
  activeElement: BrowserElement | null;
  querySelector(selector: string): BrowserElement | null;
  querySelectorAll(selector: string): { length: number };
}
export interface BrowserStorage {
  length: number;
}
declare const document: BrowserDocument;
declare const window: { innerWidth: number };

/** The browser: CHROMIUM_PATH, or Debian's package. */
export const CHROMIUM = process.env.CHROMIUM_PATH ?? "/usr/bin/chromium";

/** Where the test saves its screenshots (git-ignored): test-output/ui under the checkout. */
export const OUTPUT_DIR = join(process.cwd(), "test-output", "ui");

/** Why the browser test cannot run here, or null. */
export function unavailable(): string | null {
  return existsSync(CHROMIUM)
    ? null
    : `no Chromium at ${CHROMIUM} (apt-get install chromium, or set CHROMIUM_PATH)`;
}

/** Launches headless Chromium (no sandbox: CI runs as root). */
export async function launch(): Promise<Browser> {
  mkdirSync(OUTPUT_DIR, { recursive: true });
  return chromium.launch({ executablePath: CHROMIUM, headless: true, args: ["--no-sandbox"] });
}

/** A page at `width` × `height` that records console errors, page errors and failed requests in `problems`. */
export async function openPage(
  browser: Browser,
  width: number,
  height: number,
  problems: string[],
): Promise<{ context: BrowserContext; page: Page }> {
  const context = await browser.newContext({ viewport: { width, height } });
  const page = await context.newPage();
  page.setDefaultTimeout(20_000);
  page.on("console", (message) => {
    if (message.type() === "error") problems.push(`console error at ${page.url()}: ${message.text()}`);
  });
  page.on("pageerror", (error) => problems.push(`page error at ${page.url()}: ${error.message}`));
  page.on("requestfailed", (request) => {
    // A navigation away cancels the page's polls in flight: not a failure of the page.
    if (request.failure()?.errorText !== "net::ERR_ABORTED")
      problems.push(`request failed: ${request.url()} ${request.failure()?.errorText}`);
  });
  return { context, page };
}

/**
 * Waits until the dashboard shows `route` (its fragment, e.g. `#/jobs?status=done`) with its first
 * read from the server done: the router marks the view `data-route` and `aria-busy="false"`, so a
 * test never reads the rows of the page it navigated away from.
 */
export async function routeShown(page: Page, route: string): Promise<void> {
  await page.locator(`#view[data-route="${route}"][aria-busy="false"]`).waitFor();
}

/** Saves a full-page screenshot as OUTPUT_DIR/`name`.png. */
export async function screenshot(page: Page, name: string): Promise<void> {
  await page.screenshot({ path: join(OUTPUT_DIR, `${name}.png`), fullPage: true });
}

/** Fails if the page is wider than its viewport (content that scrolls sideways on a phone). */
export async function assertNoSidewaysScroll(page: Page): Promise<void> {
  const { scroll, viewport } = await page.evaluate(() => ({
    scroll: document.documentElement.scrollWidth,
    viewport: window.innerWidth,
  }));
  assert.ok(scroll <= viewport, `${page.url()}: ${scroll} px wide in a ${viewport}-px viewport`);
}

/** The number a depth card shows for `status`. */
export async function depthShown(page: Page, status: string): Promise<number> {
  const text = await page.locator(`[data-status="${status}"]`).textContent();
  return Number((text ?? "").replaceAll(",", ""));
}

/** Confirms the open confirmation dialog with the keyboard (focus starts on its confirm button). */
export async function confirmWithKeyboard(page: Page): Promise<void> {
  const button = page.locator("dialog[open] [data-confirm]");
  await button.waitFor();
  assert.equal(
    await button.evaluate((el) => el === document.activeElement),
    true,
    "the dialog focuses its confirm button",
  );
  await page.keyboard.press("Enter");
  await page.locator("dialog[open]").waitFor({ state: "detached" });
}
