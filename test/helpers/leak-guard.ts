/**
 * Leak guard (like graphile-worker's afterEach guard and River's goleak), loaded into
 * every test file's process by scripts/run-tests.mjs with `node --test --import`. Once a file's
 * tests and its own `after` hooks are done, it fails the file if something is still alive that
 * was not alive when the file started: a TCP socket (an unclosed pg client or pool, an HTTP
 * server), a timer that is not unref'd, a child process, a non-stdio pipe... Without it, such a
 * leak keeps the file's process alive and the suite hangs instead of failing; with it (and
 * `--test-force-exit`) the file fails within {@link SETTLE_MS}, naming what leaked.
 *
 * What is benign, found by experiment on Node 20.20 and Node 24 (test/leak-guard.test.ts):
 * - the two stdio pipes to the test runner (`PipeWrap` ×2; `TTYWrap` when run on a terminal):
 *   alive at start, so the baseline taken when this module loads subtracts them;
 * - a `CloseReq` that Node 20 has in flight at start-up (also in the baseline);
 * - unref'd timers and handles: `process.getActiveResourcesInfo()` does not list them at all;
 * - requests in flight (`FSReqCallback`, `WriteWrap`, ...) and sockets that are closing: the
 *   guard polls for up to {@link SETTLE_MS} until only the baseline is left, so they settle.
 *
 * `TEST_LEAK_STACKS=1` also records where each timer and socket was created (async_hooks), and
 * prints the stack of each one still alive. Off by default: async_hooks slows every promise.
 */
import { AsyncResource, createHook } from "node:async_hooks";
import { after, beforeEach } from "node:test";

/** How long the guard waits for closing sockets and in-flight requests to settle, in ms. */
export const SETTLE_MS = 1000;

/** Resource types (from `getActiveResourcesInfo`) in words, for the failure message. */
const MEANING: Record<string, string> = {
  TCPSocketWrap: "TCP socket (an unclosed pg client or pool? a keep-alive HTTP connection?)",
  TCPWRAP: "TCP socket (an unclosed pg client or pool? a keep-alive HTTP connection?)",
  TCPWrap: "TCP socket (an unclosed pg client or pool? a keep-alive HTTP connection?)",
  TCPServerWrap: "listening TCP server (an HTTP server not closed?)",
  Timeout: "timer that is not cleared or unref'd (setTimeout/setInterval)",
  Immediate: "setImmediate not yet run",
  ProcessWrap: "child process still running",
  PipeWrap: "pipe (a child process's stdio?)",
  TTYWrap: "terminal stream",
  UDPWrap: "UDP socket",
  FSEventWrap: "file watcher",
  StatWatcher: "file watcher (fs.watchFile)",
  SignalWrap: "signal handler",
};

type Counts = Map<string, number>;

function count(types: readonly string[]): Counts {
  const counts: Counts = new Map();
  for (const type of types) counts.set(type, (counts.get(type) ?? 0) + 1);
  return counts;
}

/** Types alive now beyond `baseline`, with how many more of each. */
function beyond(baseline: Counts): Counts {
  const extra: Counts = new Map();
  for (const [type, n] of count(process.getActiveResourcesInfo())) {
    const more = n - (baseline.get(type) ?? 0);
    if (more > 0) extra.set(type, more);
  }
  return extra;
}

/** Detail on live sockets, servers and child processes (Node's `_getActiveHandles`, if present). */
function handleDetails(): string[] {
  const getHandles = (process as unknown as { _getActiveHandles?: () => unknown[] })._getActiveHandles;
  if (typeof getHandles !== "function") return [];
  const lines: string[] = [];
  for (const handle of getHandles.call(process)) {
    const h = handle as {
      constructor?: { name?: string };
      fd?: number;
      remoteAddress?: string;
      remotePort?: number;
      localPort?: number;
      address?: () => unknown;
      listening?: boolean;
      pid?: number;
      spawnfile?: string;
    };
    const name = h.constructor?.name ?? "handle";
    if (typeof h.fd === "number" && h.fd >= 0 && h.fd <= 2) continue; // stdio
    if (name === "Socket" && h.remotePort !== undefined)
      lines.push(`socket to ${h.remoteAddress}:${h.remotePort} from local port ${h.localPort}`);
    else if (name === "Server" && typeof h.address === "function")
      lines.push(`server listening on ${JSON.stringify(h.address())}`);
    else if (name === "ChildProcess") lines.push(`child process ${h.pid} (${h.spawnfile})`);
  }
  return lines;
}

interface Created {
  type: string;
  stack: string;
  resource: { hasRef?: () => boolean; _destroyed?: boolean };
}
const created = new Map<number, Created>();
if (process.env.TEST_LEAK_STACKS) {
  const tracked = new Set(["Timeout", "TCPWRAP", "TCPSERVERWRAP", "PROCESSWRAP", "PIPEWRAP"]);
  createHook({
    init(asyncId, type, _trigger, resource) {
      if (!tracked.has(type)) return;
      const stack = new Error().stack?.split("\n").slice(2, 12).join("\n") ?? "";
      created.set(asyncId, { type, stack, resource: resource as Created["resource"] });
    },
    destroy(asyncId) {
      created.delete(asyncId);
    },
  }).enable();
}

function creationStacks(): string[] {
  return (
    [...created.values()]
      // A timer that fired or was cleared (destroy is emitted later), or is unref'd, is no leak;
      // nor is the guard's own polling timer.
      .filter((c) => c.type !== "Timeout" || (c.resource.hasRef?.() !== false && !c.resource._destroyed))
      .filter((c) => !c.stack.includes("assertNothingLeaked"))
      .map((c) => `${c.type} created at:\n${c.stack}`)
  );
}

/**
 * Waits up to {@link SETTLE_MS} for everything beyond `baseline` to go.
 * @throws {Error} naming each kind of resource still alive, with detail where Node gives it.
 */
export async function assertNothingLeaked(baseline: Counts, settleMs = SETTLE_MS): Promise<void> {
  const deadline = Date.now() + settleMs;
  let extra = beyond(baseline);
  while (extra.size > 0 && Date.now() < deadline) {
    // A ref'd timer: an unref'd one would let the process end while this hook waits. It has fired,
    // hence is gone, when the next look is taken.
    await new Promise((resolve) => setTimeout(resolve, 10));
    extra = beyond(baseline);
  }
  if (extra.size === 0) return;
  const lines = [...extra].map(([type, n]) => `  ${n} × ${type}: ${MEANING[type] ?? "resource"}`);
  const details = handleDetails().map((line) => `  - ${line}`);
  const stacks = creationStacks();
  throw new Error(
    [
      `leak in ${process.argv[1] ?? "this file"}: still alive ${settleMs} ms after its tests and after hooks ended:`,
      ...lines,
      ...details,
      ...(stacks.length > 0
        ? stacks
        : ["  (TEST_LEAK_STACKS=1 shows where each timer and socket was created)"]),
    ].join("\n"),
  );
}

// What is alive before the file's own code runs: the stdio pipes, Node 20's start-up CloseReq.
const baseline = count(process.getActiveResourcesInfo());

// The check must run after the file's own root `after` hooks (they close its pools), which run
// in the order they were registered, and this module loads before the file. So the guard's hook
// is registered when the file's first test starts (the file's module has run by then), from a
// root `beforeEach` (a root `before` would not do: node:test runs it at once, the root having
// "started"). node:test attaches a hook to the test whose async context calls `after` (contexts
// follow every timer and promise created inside a test or hook), so the call runs in an async
// scope made here, outside any test: then `after` attaches to the file's root.
const outsideTests = new AsyncResource("taskqueue-leak-guard");
let registered = false;
// `node --test` loads `--import` modules into its own orchestrating process too, which runs no
// test of its own (and whose children are alive by design): the guard stays out of it. The file
// processes it spawns do not have `--test` in their execArgv.
if (!process.execArgv.includes("--test"))
  beforeEach(() => {
    if (registered) return;
    registered = true;
    outsideTests.runInAsyncScope(() => after(() => assertNothingLeaked(baseline)));
  });
