/**
 * GET /ui: the web dashboard (issue 12), static files built at package build time
 * (scripts/build-ui.mjs bundles ui/ into dist/ui/) and served from the package: no CDN, no runtime
 * download, works offline. The page holds no data: its script calls the public API with the
 * bearer token the operator typed in (kept in sessionStorage), so the files need no token
 * themselves. Pages are routed in the fragment (`/ui#/jobs/42`), so the server serves one page.
 */
import { readFileSync } from "node:fs";
import type { FastifyPluginAsync, FastifyReply } from "fastify";

/** The dashboard's files, as the build writes them, and their media types. */
const FILES = {
  "index.html": "text/html; charset=utf-8",
  "app.js": "text/javascript; charset=utf-8",
  "app.css": "text/css; charset=utf-8",
} as const;
type UiFile = keyof typeof FILES;

/** Where the build puts the dashboard: dist/ui, beside dist/src. */
const UI_DIR = new URL("../../../ui/", import.meta.url);

/**
 * Same origin only, no inline script or style, no framing: the page can talk to this API and
 * nothing else.
 */
const CONTENT_SECURITY_POLICY =
  "default-src 'none'; script-src 'self'; style-src 'self'; img-src 'self' data:; connect-src 'self'; " +
  "form-action 'none'; frame-ancestors 'none'; base-uri 'none'";

/** Reads the built files once; a file missing (the build did not run) is null and answered 404. */
function loadFiles(): Map<UiFile, Buffer | null> {
  const files = new Map<UiFile, Buffer | null>();
  for (const name of Object.keys(FILES) as UiFile[]) {
    try {
      files.set(name, readFileSync(new URL(name, UI_DIR)));
    } catch {
      files.set(name, null);
    }
  }
  return files;
}

/** Options of {@link uiRoutes}. */
export interface UiRoutesOptions {
  /** The API asks for a bearer token: the page shows its login form before calling it. */
  authRequired: boolean;
}

/**
 * Registers GET /ui (the page), GET /ui/app.js, GET /ui/app.css and GET /ui/config.json (whether
 * the API needs a token, so that the page asks for one instead of calling the API to be refused).
 * Hidden from the OpenAPI document.
 */
export const uiRoutes: FastifyPluginAsync<UiRoutesOptions> = async (app, { authRequired }) => {
  const files = loadFiles();
  const send = (reply: FastifyReply, name: UiFile) => {
    const body = files.get(name);
    if (!body) {
      return reply
        .code(404)
        .type("application/problem+json")
        .send({
          type: "about:blank",
          title: "Not Found",
          status: 404,
          detail: `The dashboard's ${name} was not built (npm run build writes dist/ui).`,
          instance: `/ui/${name}`,
        });
    }
    return reply
      .type(FILES[name])
      .header("cache-control", name === "index.html" ? "no-cache" : "max-age=300")
      .header("content-security-policy", CONTENT_SECURITY_POLICY)
      .header("x-content-type-options", "nosniff")
      .header("referrer-policy", "no-referrer")
      .send(body);
  };
  const schema = { hide: true };
  // The files hold no data; the page's calls carry the token (auth.ts lets these routes through).
  const config = { auth: false };
  app.get("/ui", { schema, config }, (_request, reply) => send(reply, "index.html"));
  app.get("/ui/", { schema, config }, (_request, reply) => reply.redirect("/ui", 308));
  app.get("/ui/app.js", { schema, config }, (_request, reply) => send(reply, "app.js"));
  app.get("/ui/app.css", { schema, config }, (_request, reply) => send(reply, "app.css"));
  app.get("/ui/config.json", { schema, config }, (_request, reply) =>
    reply.header("cache-control", "no-store").send({ auth_required: authRequired }),
  );
};
