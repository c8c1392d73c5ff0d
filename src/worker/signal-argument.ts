/**
 * Whether a handler function can see a second argument: the job's `AbortSignal`.
 *
 * Why it matters: on Node.js 20, making an `AbortSignal` (the first read of an `AbortController`'s
 * `signal`) costs about 3–4 µs, a third of a drain's JavaScript time per job (measured; Node.js 22
 * and 24 make one in about 0.1 µs). The controller itself is cheap, and aborting it works whether or
 * not its signal was ever read. So the worker makes each job's controller, and reads the signal
 * only for a handler that can see it: as the second argument of one that can, or through
 * `job.signal` (a getter) in any handler.
 *
 * The rule is conservative: a handler is taken not to see its second argument only when that is
 * certain from its source text (`Function.prototype.toString`, as it was when this module loaded):
 * its parameter list is empty or one plain name (no default value, no rest, no destructuring, no
 * comment), and either it is an arrow function (which has no `arguments` of its own, and whose
 * `caller` and `arguments` properties throw), or it is an async function or a method whose source
 * never says `arguments` or `eval` and has no backslash (an escaped `\u0061rguments` is still
 * `arguments`). A plain `function` is never spared: in sloppy code a function it calls can read
 * `handler.arguments` through `.caller`, whatever the handler's own text says. Anything else (two
 * or more declared parameters, a bound or native function, a proxy, a generator, a method with a
 * computed name, a parameter list this does not recognise) gets the signal. A review found the
 * escape and `.caller` cases; test/worker/signal-argument.test.ts keeps them.
 */

/** One plain parameter name, or none. */
const ONE_NAME = String.raw`\(\s*(?:[A-Za-z_$][\w$]*\s*)?\)`;

/** `x =>`, `(x) =>`, `() =>`, each optionally `async`. */
const ARROW = new RegExp(String.raw`^(?:async\b\s*)?(?:[A-Za-z_$][\w$]*|${ONE_NAME})\s*=>`);

/**
 * `async function f(x) {`, `async function (x) {`, and methods `f(x) {`, `async f(x) {`; not a
 * plain `function` (see the top of the file), not a generator.
 */
const ASYNC_FUNCTION_OR_METHOD = new RegExp(
  String.raw`^(?:async\s+function\b\s*(?:[A-Za-z_$][\w$]*\s*)?|(?:async\s+)?(?!function\b)[A-Za-z_$][\w$]*\s*)${ONE_NAME}\s*\{`,
);

/** How a function whose source is not JavaScript prints (bound, proxied, built in). */
const NATIVE = /\{\s*\[native code\]\s*\}\s*$/;

/** What lets a function's own body read arguments it does not declare: the words, or an escape that may spell them. */
const READS_ARGUMENTS = /\b(?:arguments|eval)\b|\\/;

/** Taken once: a later replacement of `Function.prototype.toString` does not change the rule. */
const sourceOf = Function.prototype.toString;

const known = new WeakMap<(...args: never[]) => unknown, boolean>();

/**
 * True unless `handler` certainly cannot see a second argument (see the top of the file). Cached
 * per function. Never throws.
 */
export function seesSignalArgument(handler: (...args: never[]) => unknown): boolean {
  let sees = known.get(handler);
  if (sees === undefined) {
    sees = !certainlyOneParameter(handler);
    known.set(handler, sees);
  }
  return sees;
}

function certainlyOneParameter(handler: (...args: never[]) => unknown): boolean {
  let source: string;
  try {
    if (handler.length >= 2) return false;
    source = sourceOf.call(handler).trimStart();
  } catch {
    return false;
  }
  // A bound function, a proxy or a built-in prints as `function () { [native code] }`: its
  // parameters are not in its text.
  if (NATIVE.test(source)) return false;
  if (ARROW.test(source)) return true;
  return ASYNC_FUNCTION_OR_METHOD.test(source) && !READS_ARGUMENTS.test(source);
}
