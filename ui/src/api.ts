/**
 * The dashboard's only way to the server: the public HTTP API, same origin, with the bearer token
 * the operator typed in (kept in sessionStorage: gone when the tab closes, never in localStorage or
 * a cookie). Errors are RFC 9457 problems; their detail is shown as it is.
 */

const TOKEN_KEY = "taskqueue.token";

/** An answer other than 2xx: its status and the problem's detail (or title). */
export class ApiError extends Error {
  constructor(
    readonly status: number,
    message: string,
  ) {
    super(message);
  }
}

/** The token of this tab's session, or null. */
export function token(): string | null {
  return sessionStorage.getItem(TOKEN_KEY);
}

/** Keeps `value` for this tab's session (null: forgets it). */
export function setToken(value: string | null): void {
  if (value === null) sessionStorage.removeItem(TOKEN_KEY);
  else sessionStorage.setItem(TOKEN_KEY, value);
}

/** Called when the server answers 401: the page shows the login form. */
let onUnauthorized: () => void = () => {};
export function whenUnauthorized(handler: () => void): void {
  onUnauthorized = handler;
}

/**
 * Calls `path` (relative to the API's root, e.g. `jobs?status=dead`) with `method` and an optional
 * JSON body; resolves with the parsed answer. @throws {ApiError} for any non-2xx answer.
 */
export async function call<T>(path: string, method = "GET", body?: unknown): Promise<T> {
  const headers: Record<string, string> = { accept: "application/json" };
  const bearer = token();
  if (bearer) headers.authorization = `Bearer ${bearer}`;
  if (body !== undefined) headers["content-type"] = "application/json";
  // The page is served at <root>/ui: the API's routes are its siblings.
  const url = new URL(path, new URL(".", location.href));
  const res = await fetch(url, {
    method,
    headers,
    body: body === undefined ? null : JSON.stringify(body),
    cache: "no-store",
  });
  const text = await res.text();
  const parsed: unknown =
    text.length > 0 && /json/.test(res.headers.get("content-type") ?? "") ? JSON.parse(text) : null;
  if (res.ok) return parsed as T;
  if (res.status === 401) onUnauthorized();
  const problem = (parsed ?? {}) as {
    detail?: string;
    title?: string;
    errors?: { field: string; message: string }[];
  };
  const fields = (problem.errors ?? []).map((e) => `${e.field}: ${e.message}`).join("; ");
  throw new ApiError(
    res.status,
    [problem.detail ?? problem.title ?? `HTTP ${res.status}`, fields].filter(Boolean).join(" — "),
  );
}

/** Routes this server offers (from its OpenAPI document), to enable the actions it supports. */
let routes: Set<string> | null = null;

/** Loads the server's route list once (GET /docs/json). */
export async function loadRoutes(): Promise<void> {
  const doc = await call<{ paths?: Record<string, Record<string, unknown>> }>("docs/json");
  routes = new Set();
  for (const [path, methods] of Object.entries(doc.paths ?? {}))
    for (const method of Object.keys(methods)) routes.add(`${method.toUpperCase()} ${path}`);
}

/** True if the server has `METHOD /path` (OpenAPI path syntax, e.g. `POST /jobs/{id}/cancel`). */
export function hasRoute(route: string): boolean {
  return routes?.has(route) ?? false;
}
