/** A small JSON-over-HTTP client with a keep-alive agent the benchmark closes when done. */
import http from "node:http";

/** An HTTP answer with its parsed JSON body. */
export interface JsonResponse {
  status: number;
  body: unknown;
}

/** Keep-alive JSON client for one base URL. Call {@link HttpJsonClient.close} when done. */
export class HttpJsonClient {
  private readonly agent: http.Agent;

  /** @param baseUrl e.g. `http://127.0.0.1:41234`. @param maxSockets connections kept open at most. */
  constructor(
    private readonly baseUrl: string,
    maxSockets: number,
  ) {
    this.agent = new http.Agent({ keepAlive: true, maxSockets });
  }

  /** POSTs `body` as JSON to `path`; resolves with status and parsed body (rejects on network errors). */
  postJson(path: string, body: unknown): Promise<JsonResponse> {
    const data = Buffer.from(JSON.stringify(body), "utf8");
    return new Promise((resolve, reject) => {
      const request = http.request(
        new URL(path, this.baseUrl),
        {
          method: "POST",
          agent: this.agent,
          headers: { "content-type": "application/json", "content-length": data.length },
        },
        (response) => {
          const chunks: Buffer[] = [];
          response.on("data", (chunk: Buffer) => chunks.push(chunk));
          response.on("error", reject);
          response.on("end", () => {
            const text = Buffer.concat(chunks).toString("utf8");
            let parsed: unknown = text;
            try {
              parsed = JSON.parse(text);
            } catch {
              // not JSON: keep the text for the error message
            }
            resolve({ status: response.statusCode ?? 0, body: parsed });
          });
        },
      );
      request.on("error", reject);
      request.end(data);
    });
  }

  /** Closes every kept-alive connection. */
  close(): void {
    this.agent.destroy();
  }
}
