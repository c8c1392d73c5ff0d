/**
 * `taskqueue smoke --url URL`: exercises every endpoint of a running deployment over HTTP and
 * prints PASS/FAIL per check (the seed's scripts/test_api.py). Needs a worker to run `echo` jobs.
 * Returns the number of failed checks.
 */

interface Check {
  name: string;
  run: () => Promise<void>;
}

class CheckFailure extends Error {}

function expect(condition: boolean, message: string): void {
  if (!condition) throw new CheckFailure(message);
}

/**
 * Runs every check against `baseUrl`, printing a line each; resolves with the failure count.
 * `apiToken`, when given, is sent as `Authorization: Bearer` with every request.
 */
export async function smoke(baseUrl: string, timeoutSeconds: number, apiToken?: string): Promise<number> {
  const url = (path: string) => new URL(path, baseUrl).toString();
  const auth: Record<string, string> = apiToken ? { authorization: `Bearer ${apiToken}` } : {};
  const call = async (method: string, path: string, body?: unknown) => {
    const response = await fetch(url(path), {
      method,
      headers: body === undefined ? auth : { ...auth, "content-type": "application/json" },
      body: body === undefined ? undefined : JSON.stringify(body),
      signal: AbortSignal.timeout(timeoutSeconds * 1000),
    });
    const text = await response.text();
    let json: unknown = null;
    try {
      json = JSON.parse(text);
    } catch {
      json = text;
    }
    return {
      status: response.status,
      type: response.headers.get("content-type") ?? "",
      json: json as Record<string, unknown>,
    };
  };
  let echoId = 0;
  const checks: Check[] = [
    {
      name: "GET /health is 200",
      run: async () => expect((await call("GET", "/health")).status === 200, "not 200"),
    },
    {
      name: "GET /ready is 200",
      run: async () => expect((await call("GET", "/ready")).status === 200, "not 200"),
    },
    {
      name: "POST /jobs enqueues an echo job (201)",
      run: async () => {
        const r = await call("POST", "/jobs", { type: "echo", payload: { smoke: true }, priority: 9 });
        expect(r.status === 201 && r.json.status === "pending", `got ${r.status} ${JSON.stringify(r.json)}`);
        echoId = Number(r.json.id);
      },
    },
    {
      name: "the echo job is done with its payload as result",
      run: async () => {
        const deadline = Date.now() + timeoutSeconds * 1000;
        for (;;) {
          const r = await call("GET", `/jobs/${echoId}`);
          if (r.json.status === "done") {
            expect(
              JSON.stringify(r.json.result) === '{"smoke":true}',
              `result ${JSON.stringify(r.json.result)}`,
            );
            return;
          }
          expect(
            Date.now() < deadline,
            `still ${String(r.json.status)} after ${timeoutSeconds} s (is a worker running?)`,
          );
          await new Promise((resolve) => setTimeout(resolve, 100));
        }
      },
    },
    {
      name: "GET /jobs lists jobs, filtered by status",
      run: async () => {
        const r = await call("GET", "/jobs?status=done&limit=5");
        expect(r.status === 200 && Array.isArray(r.json.jobs), `got ${r.status}`);
      },
    },
    {
      name: "DELETE /jobs/{id} cancels a scheduled job; a second DELETE is 409",
      run: async () => {
        const created = await call("POST", "/jobs", { type: "noop", run_at: "2999-01-01T00:00:00Z" });
        const first = await call("DELETE", `/jobs/${String(created.json.id)}`);
        expect(first.status === 200 && first.json.status === "cancelled", `first DELETE ${first.status}`);
        const second = await call("DELETE", `/jobs/${String(created.json.id)}`);
        expect(second.status === 409, `second DELETE ${second.status}`);
      },
    },
    {
      name: "POST /jobs/{id}/retry makes a scheduled job due now",
      run: async () => {
        const created = await call("POST", "/jobs", { type: "noop", run_at: "2999-01-01T00:00:00Z" });
        const r = await call("POST", `/jobs/${String(created.json.id)}/retry`);
        expect(
          r.status === 200 && Date.parse(String(r.json.run_at)) < Date.parse("2999-01-01T00:00:00Z"),
          `got ${r.status} ${JSON.stringify(r.json)}`,
        );
      },
    },
    {
      name: "a repeated idempotency_key answers the same job with 200",
      run: async () => {
        const body = { type: "noop", idempotency_key: `smoke-${Date.now()}-${Math.random()}` };
        const first = await call("POST", "/jobs", body);
        const second = await call("POST", "/jobs", body);
        expect(
          first.status === 201 && second.status === 200 && first.json.id === second.json.id,
          `got ${first.status} then ${second.status}`,
        );
      },
    },
    {
      name: "GET /dead-letters lists dead letters",
      run: async () => {
        const r = await call("GET", "/dead-letters?limit=5");
        expect(r.status === 200 && Array.isArray(r.json.dead_letters), `got ${r.status}`);
      },
    },
    {
      name: "GET /jobs/999999999999 is a 404 problem",
      run: async () => {
        const r = await call("GET", "/jobs/999999999999");
        expect(
          r.status === 404 && r.type.startsWith("application/problem+json"),
          `got ${r.status} ${r.type}`,
        );
      },
    },
    {
      name: "an invalid priority is a 422 naming priority",
      run: async () => {
        const r = await call("POST", "/jobs", { type: "noop", priority: 11 });
        expect(r.status === 422 && JSON.stringify(r.json.errors).includes("priority"), `got ${r.status}`);
      },
    },
    {
      name: "GET /metrics reports queue depth",
      run: async () => {
        const r = await call("GET", "/metrics");
        expect(r.status === 200 && typeof r.json.queue_depth === "object", `got ${r.status}`);
      },
    },
    {
      name: "GET /metrics/prometheus has taskqueue_queue_depth",
      run: async () => {
        const r = await call("GET", "/metrics/prometheus");
        expect(r.status === 200 && String(r.json).includes("taskqueue_queue_depth"), `got ${r.status}`);
      },
    },
    {
      name: "GET /docs serves the API docs",
      run: async () => expect((await call("GET", "/docs/json")).status === 200, "no OpenAPI document"),
    },
  ];
  let failed = 0;
  for (const check of checks) {
    try {
      await check.run();
      console.log(`PASS  ${check.name}`);
    } catch (error) {
      failed++;
      console.log(`FAIL  ${check.name}: ${error instanceof Error ? error.message : String(error)}`);
    }
  }
  console.log(`\n${checks.length - failed} passed, ${failed} failed`);
  return failed;
}
