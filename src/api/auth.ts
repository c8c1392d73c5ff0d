/**
 * Token authentication of the HTTP API (DESIGN.md §10). With `apiToken` set
 * (`TASKQUEUE_API_TOKEN`, or the file named by `TASKQUEUE_API_TOKEN_FILE`), every route needs
 * the token except those whose route config says `auth: false`: `/health` and `/ready` (probes,
 * which a load balancer calls without credentials) and the dashboard's static files (`/ui`: its
 * sign-in page; they hold no data, and the page sends the token with every call it makes). The
 * token is sent as `Authorization: Bearer <token>`; `/docs` (the Swagger UI and the OpenAPI document, which a
 * person opens in a browser, which cannot add a header to a typed address) also takes it as the
 * password of HTTP Basic authentication (any user name), and offers Basic in its challenge, so that
 * the browser asks for it once and sends it with the page's own requests. A refused request is answered 401 problem+json with
 * `WWW-Authenticate` before its body is read.
 *
 * The comparison is of SHA-256 digests with `crypto.timingSafeEqual`: both sides are 32 bytes
 * whatever the token's length, so neither the length nor a matching prefix shows in the timing.
 */
import { createHash, timingSafeEqual } from "node:crypto";
import { isIP } from "node:net";
import type { FastifyInstance, FastifyReply, FastifyRequest, onRequestHookHandler } from "fastify";
import type { ResolvedConfig } from "../config.js";
import { ConfigError } from "../errors.js";
import { PROBLEM_CONTENT_TYPE } from "./problem.js";

declare module "fastify" {
  interface FastifyContextConfig {
    /** `false`: the route answers without a token (probes, the dashboard's files). Default: required. */
    auth?: boolean;
    /** `true`: a refusal also offers HTTP Basic, so that a browser asks for the token (`/docs`). */
    browserAuth?: boolean;
  }
}

/** Problem type of a 401 answer. */
export const UNAUTHORIZED_PROBLEM_TYPE = "urn:taskqueue:problem:unauthorized";

/** The `WWW-Authenticate` challenge's realm. */
const REALM = "taskqueue";

/** Name of the scheme in the OpenAPI document (`components.securitySchemes`). */
export const SECURITY_SCHEME = "bearerAuth";

/** The OpenAPI security scheme of the API's token, for `components.securitySchemes`. */
export const BEARER_SECURITY_SCHEME = {
  type: "http",
  scheme: "bearer",
  description:
    "The API token (TASKQUEUE_API_TOKEN), sent as `Authorization: Bearer <token>` (/docs also takes " +
    "it as an HTTP Basic password, for a browser). Needed by every route but /health, /ready and the " +
    "dashboard's files (/ui) when the server has a token.",
} as const;

function digest(text: string): Buffer {
  return createHash("sha256").update(text, "utf8").digest();
}

/**
 * A checker of `Authorization` header values against `token`: true only for `Bearer <token>`, or,
 * with `basic` (the routes a browser opens, `/docs`), also `Basic base64(<any user name>:<token>)`
 * (RFC 7617; what a browser sends once it has asked for the credentials). Schemes are
 * case-insensitive, as RFC 9110 has them. Constant-time in the presented token's content.
 */
export function bearerChecker(
  token: string,
): (authorization: string | undefined, basic?: boolean) => boolean {
  const expected = digest(token);
  return (authorization, basic = false) => {
    const presented = presentedToken(authorization ?? "", basic);
    return presented !== null && timingSafeEqual(digest(presented), expected);
  };
}

/** The token an `Authorization` value carries: Bearer's credentials, or (`basic`) Basic's password. */
function presentedToken(authorization: string, basic: boolean): string | null {
  const bearer = /^Bearer[ ]+([^\s]+)[ ]*$/i.exec(authorization);
  if (bearer?.[1]) return bearer[1];
  if (!basic) return null;
  const credentials = /^Basic[ ]+([A-Za-z0-9+/]+={0,2})[ ]*$/i.exec(authorization);
  if (!credentials?.[1]) return null;
  const decoded = Buffer.from(credentials[1], "base64").toString("utf8");
  const colon = decoded.indexOf(":");
  return colon < 0 || colon === decoded.length - 1 ? null : decoded.slice(colon + 1);
}

/**
 * An `onRequest` hook that answers 401 problem+json to any request without the right bearer token,
 * unless its route's config has `auth: false`. For a plugin that serves routes of its own behind
 * the API's token (e.g. a dashboard): `app.addHook("onRequest", bearerAuthHook(token))` inside it.
 */
export function bearerAuthHook(token: string): onRequestHookHandler {
  const matches = bearerChecker(token);
  return function checkBearer(request: FastifyRequest, reply: FastifyReply, done: () => void): void {
    const authorization = request.headers.authorization;
    const browser = request.routeOptions.config?.browserAuth === true;
    if (request.routeOptions.config?.auth === false || matches(authorization, browser)) {
      done();
      return;
    }
    const presented = authorization !== undefined;
    const bearer = presented ? `Bearer realm="${REALM}", error="invalid_token"` : `Bearer realm="${REALM}"`;
    reply
      .code(401)
      .header("www-authenticate", browser ? [bearer, `Basic realm="${REALM}", charset="UTF-8"`] : bearer)
      .type(PROBLEM_CONTENT_TYPE)
      .send({
        type: UNAUTHORIZED_PROBLEM_TYPE,
        title: "Unauthorized",
        status: 401,
        detail: presented
          ? "The Authorization header does not carry the API token (Authorization: Bearer <token>)."
          : "This route needs the API token: send Authorization: Bearer <token>.",
        instance: request.url,
      });
  };
}

/**
 * Installs token authentication on `app` when `token` is set: the hook of {@link bearerAuthHook}
 * on every request (unknown routes too, so a stranger learns nothing of which exist), and
 * `browserAuth` on every route registered afterwards under `/docs`, which a person opens in a
 * browser (the browser then asks for the token, as a Basic password). Call it before registering
 * routes. With no token it does nothing.
 */
export function registerBearerAuth(app: FastifyInstance, token: string | undefined): void {
  if (token === undefined) return;
  app.addHook("onRoute", (route) => {
    if (route.url === "/docs" || route.url.startsWith("/docs/"))
      route.config = { ...(route.config ?? {}), browserAuth: true };
  });
  app.addHook("onRequest", bearerAuthHook(token));
}

/** Whether `host` is a loopback interface: `localhost`, 127.0.0.0/8, `::1`. */
export function isLoopbackHost(host: string): boolean {
  const bare = host.replace(/^\[|\]$/g, "").toLowerCase();
  if (bare === "localhost") return true;
  if (isIP(bare) === 4) return bare.startsWith("127.");
  if (isIP(bare) === 6) return bare === "::1" || /^::ffff:127\./.test(bare);
  return false;
}

/**
 * Refuses to serve the API without a token on an address other machines can reach.
 * @throws {ConfigError} naming `TASKQUEUE_API_TOKEN` when `apiToken` is unset, `host` is not
 * loopback and `insecureNoAuth` is false.
 */
export function assertSafeBind(config: Pick<ResolvedConfig, "apiToken" | "host" | "insecureNoAuth">): void {
  if (config.apiToken !== undefined || config.insecureNoAuth || isLoopbackHost(config.host)) return;
  throw new ConfigError(
    "TASKQUEUE_API_TOKEN",
    `is not set, and HOST=${config.host} is not a loopback address: anyone who reaches the port could ` +
      "read and cancel jobs. Set TASKQUEUE_API_TOKEN (or TASKQUEUE_API_TOKEN_FILE), bind to 127.0.0.1, " +
      "or pass --insecure-no-auth (TASKQUEUE_INSECURE_NO_AUTH=1) if something in front authenticates",
  );
}
