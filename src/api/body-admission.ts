/**
 * What the API checks of a request body before it reads it:
 *
 * - `Content-Encoding`: only identity. A gzipped body would otherwise be read as JSON text and
 *   refused as "not valid UTF-8"; it is answered 415 naming the header, unread.
 * - The in-flight body budget (`apiMaxInflightBodyBytes`): the bytes of every request body being
 *   read or handled at once are counted against one budget, so that concurrent large bodies
 *   cannot take the process's memory (each body is held as bytes, text and parsed values until its
 *   request ends). A request whose `Content-Length` would take the total past the budget is
 *   answered 503 with `Retry-After` before a byte of its body is read; a body without a length
 *   (chunked) is counted as it arrives and cut off with the same 503 when it goes past. Bytes go
 *   back to the budget when the request ends, however it ends (answered, failed, or its connection
 *   lost).
 * - A body is charged what handling it costs, not only its size: while its request is handled the
 *   process holds the body several times over (bytes, text, parsed values, the payloads' JSON
 *   texts, the insert's parameter and the driver's message), measured at about
 *   {@link HANDLING_COST_FACTOR} times its size for a large batch (docs/benchmarks.md,
 *   `npm run bench:api-memory`). So a body with a `Content-Length` is charged its size up to
 *   {@link FACE_VALUE_BYTES} and that factor times every byte past it ({@link chargedBytes}):
 *   small requests, whose copies are short-lived, still run many at a time, and large ones are
 *   admitted by what they will cost. A body whose charge exceeds the budget on its own is taken
 *   when nothing else is held (it is within the body limit), so the largest bodies run one at a
 *   time instead of never.
 *
 * Both refusals close the connection (`Connection: close`), so that the client stops sending a
 * body nobody reads.
 */
import { EventEmitter } from "node:events";
import { Transform } from "node:stream";
import type { FastifyInstance, FastifyReply, FastifyRequest } from "fastify";
import { HttpProblem, PROBLEM_TYPES, problemFor, sendProblem } from "./problem.js";

/** Bytes of a body charged at their size (see the top of this file). */
export const FACE_VALUE_BYTES = 1024 * 1024;

/**
 * Bytes of process memory that one body byte past {@link FACE_VALUE_BYTES} costs while its request
 * is handled, as measured for a 32 MiB batch of 10,000 jobs (docs/benchmarks.md).
 */
export const HANDLING_COST_FACTOR = 5;

/**
 * What a body of `bytes` (its Content-Length) is charged against the budget: `bytes` up to
 * {@link FACE_VALUE_BYTES}, plus {@link HANDLING_COST_FACTOR} times each byte past it. Bytes.
 */
export function chargedBytes(bytes: number): number {
  if (bytes <= FACE_VALUE_BYTES) return bytes;
  return FACE_VALUE_BYTES + (bytes - FACE_VALUE_BYTES) * HANDLING_COST_FACTOR;
}

/** A count of bytes against a fixed budget. Emits `change` (bytes held now) on every take and give. */
export class ByteBudget extends EventEmitter<{ change: [heldBytes: number] }> {
  private held = 0;

  /** @param maxBytes the budget, bytes (> 0). */
  constructor(readonly maxBytes: number) {
    super();
  }

  /** Bytes held now. */
  get heldBytes(): number {
    return this.held;
  }

  /**
   * Takes `bytes` if the total stays within the budget, or, with `evenAlone`, if nothing is held
   * now (a charge larger than the whole budget then runs alone); false (nothing taken) otherwise.
   */
  tryTake(bytes: number, evenAlone = false): boolean {
    if (this.held + bytes > this.maxBytes && !(evenAlone && this.held === 0)) return false;
    this.held += bytes;
    this.emit("change", this.held);
    return true;
  }

  /** Gives back `bytes` taken before. */
  give(bytes: number): void {
    this.held -= bytes;
    this.emit("change", this.held);
  }
}

/** Bytes of one request held against the budget, given back once when it ends. */
interface Held {
  bytes: number;
}

const HELD = Symbol("taskqueue.bodyBytesHeld");
type WithHeld = FastifyRequest & { [HELD]?: Held };

/** The 503 of a body that does not fit the budget now. */
function overBudget(budget: ByteBudget, bytes: number | null): HttpProblem {
  const mib = (n: number) => `${(n / 1024 / 1024).toFixed(1)} MiB`;
  return new HttpProblem(
    503,
    PROBLEM_TYPES.serverBusy,
    "Server busy",
    `${bytes === null ? "This body" : `A body of ${mib(bytes)} (charged ${mib(chargedBytes(bytes))} for handling)`} does not fit the API's budget of request bodies in flight ` +
      `(${mib(budget.maxBytes)}, API_MAX_INFLIGHT_BODY_BYTES; ${mib(budget.heldBytes)} held now): retry later.`,
  );
}

/** Holds `bytes` more for `request` and, the first time, gives them all back when its response closes. */
function hold(request: WithHeld, reply: FastifyReply, budget: ByteBudget, bytes: number): void {
  let held = request[HELD];
  if (!held) {
    const entry: Held = { bytes: 0 };
    held = entry;
    request[HELD] = entry;
    // 'close' follows every response: sent, failed, or its connection lost before the end.
    reply.raw.once("close", () => {
      budget.give(entry.bytes);
      entry.bytes = 0;
    });
  }
  held.bytes += bytes;
}

/**
 * Answers `problem` at once, unread body and all, and closes the connection after the answer so
 * that the client stops sending. Not logged as a failure: a refusal is the budget working.
 */
function refuse(request: FastifyRequest, reply: FastifyReply, problem: HttpProblem): FastifyReply {
  reply.header("connection", "close");
  return sendProblem(reply, problemFor(problem, request));
}

/** True when the request carries a body (a non-zero length, or a transfer coding such as chunked). */
function hasBody(request: FastifyRequest): boolean {
  const length = request.headers["content-length"];
  if (length !== undefined) return length !== "0";
  return request.headers["transfer-encoding"] !== undefined;
}

/**
 * Installs both checks on `app` (see the top of this file). `budgetBytes` 0 leaves bodies
 * uncounted; `bodyLimitBytes` is the app's body limit (a longer `Content-Length` is left to its
 * 413).
 */
export function registerBodyAdmission(
  app: FastifyInstance,
  budgetBytes: number,
  bodyLimitBytes: number,
): void {
  const budget = budgetBytes > 0 ? new ByteBudget(budgetBytes) : null;
  app.decorate("bodyBudget", budget);

  app.addHook("onRequest", async (request, reply) => {
    if (!hasBody(request)) return;
    const encoding = request.headers["content-encoding"];
    if (encoding !== undefined && !/^\s*(identity)?\s*$/i.test(encoding)) {
      return refuse(
        request,
        reply,
        new HttpProblem(
          415,
          PROBLEM_TYPES.unsupportedMediaType,
          "Unsupported Media Type",
          `Content-Encoding ${JSON.stringify(encoding)} is not supported: send the JSON body unencoded (identity).`,
          [{ field: "content-encoding", message: "must be identity (or absent)" }],
        ),
      );
    }
    if (!budget) return;
    const length = request.headers["content-length"];
    if (length === undefined) return; // counted as it arrives (preParsing below)
    const bytes = Number(length);
    // Not a length (Fastify refuses it) or over the body limit (413 before it is read): nothing to hold.
    if (!(bytes > 0) || bytes > bodyLimitBytes) return;
    const charge = chargedBytes(bytes);
    if (!budget.tryTake(charge, true)) return refuse(request, reply, overBudget(budget, bytes));
    hold(request as WithHeld, reply, budget, charge);
  });

  if (!budget) return;
  app.addHook("preParsing", async (request, reply, payload) => {
    if (request.headers["content-length"] !== undefined || !hasBody(request)) return payload;
    let cut = false;
    const counted = new Transform({
      transform(chunk: Buffer, _encoding, callback) {
        if (cut) return callback();
        if (!budget.tryTake(chunk.length)) {
          cut = true;
          reply.header("connection", "close");
          callback(overBudget(budget, null));
          return;
        }
        hold(request as WithHeld, reply, budget, chunk.length);
        callback(null, chunk);
      },
    });
    payload.on("error", (error) => counted.destroy(error));
    return payload.pipe(counted);
  });
}

declare module "fastify" {
  interface FastifyInstance {
    /** The in-flight body budget (body-admission.ts); null when `apiMaxInflightBodyBytes` is 0. */
    bodyBudget: ByteBudget | null;
  }
}
