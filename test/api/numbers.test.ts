/**
 * Lossless numbers (src/api/json-numbers.ts): a number in a body is stored with the decimal value
 * it was sent with, or refused with 422 naming its field; never altered. Checked against a slow
 * reference (exact rational arithmetic with BigInt) by property, and through the API. Also: a body
 * with a Content-Encoding other than identity is answered 415 naming the header.
 */
import assert from "node:assert/strict";
import { describe, it } from "node:test";
import fc from "fast-check";
import { fieldPaths, findInexactNumbers, isExactNumber } from "../../src/api/json-numbers.js";
import { assertProblem, JSON_HEADERS, useApi } from "./support.js";

/** A decimal numeral as an exact rational n × 10^e (BigInt), or null if it is not one. */
function rational(numeral: string): { n: bigint; e: bigint } | null {
  const m = /^(-?)(\d+)(?:\.(\d+))?(?:[eE]([+-]?\d+))?$/.exec(numeral);
  if (!m) return null;
  const [, sign = "", int = "", frac = "", exp = "0"] = m;
  return { n: BigInt(`${sign}${int}${frac}`), e: BigInt(exp) - BigInt(frac.length) };
}

/** Slow reference of the rule: the token's value equals the value of what its double prints, exactly. */
function referenceExact(token: string): boolean {
  const value = Number(token);
  if (!Number.isFinite(value)) return false;
  const a = rational(token);
  const b = rational(String(value));
  assert.ok(a && b, `not numerals: ${token}, ${String(value)}`);
  let low = a.e;
  if (b.e < low) low = b.e;
  return a.n * 10n ** (a.e - low) === b.n * 10n ** (b.e - low);
}

const digits = (min: number, max: number) =>
  fc.string({ unit: fc.constantFrom(..."0123456789"), minLength: min, maxLength: max });

/** JSON number tokens of every spelling: long and short, with and without fraction and exponent. */
const numberToken = fc.oneof(
  fc
    .tuple(
      fc.boolean(),
      fc.oneof(
        fc.constant("0"),
        fc.tuple(fc.constantFrom(..."123456789"), digits(0, 32)).map(([a, b]) => a + b),
      ),
      fc.option(digits(1, 32), { nil: undefined }),
      fc.option(
        fc.tuple(
          fc.constantFrom("e", "E"),
          fc.constantFrom("", "+", "-"),
          fc.integer({ min: 0, max: 420 }),
          fc.boolean(),
        ),
        { nil: undefined },
      ),
    )
    .map(
      ([negative, int, frac, exp]) =>
        `${negative ? "-" : ""}${int}${frac === undefined ? "" : `.${frac}`}${
          exp === undefined ? "" : `${exp[0]}${exp[1]}${exp[3] ? "00" : ""}${exp[2]}`
        }`,
    ),
  fc
    .double({ noNaN: true, noDefaultInfinity: true })
    .chain((x) =>
      fc.constantFrom(
        String(x),
        x.toExponential(),
        x.toPrecision(17),
        x.toPrecision(21),
        x.toExponential(20),
        String(x).includes("e") ? String(x) : `${String(x)}e0`,
      ),
    )
    .filter((token) => rational(token) !== null),
  fc.bigInt({ min: 2n ** 53n - 50n, max: 2n ** 53n + 50n }).map(String),
  fc.bigInt({ min: -(10n ** 40n), max: 10n ** 40n }).map(String),
);

describe("the number rule against a slow reference", () => {
  it("agrees with exact rational arithmetic on every spelling", () => {
    fc.assert(
      fc.property(numberToken, (token) => isExactNumber(token) === referenceExact(token)),
      { numRuns: 20_000 },
    );
  });

  it("the fast path is sound: a token of at most 15 characters without exponent is always exact", () => {
    const short = numberToken.filter((token) => token.length <= 15 && !/[eE]/.test(token));
    fc.assert(
      fc.property(short, (token) => referenceExact(token)),
      { numRuns: 20_000 },
    );
  });

  it("what a double prints is always kept, in any exact spelling", () => {
    fc.assert(
      fc.property(fc.double({ noNaN: true, noDefaultInfinity: true }), (x) => {
        const printed = String(x);
        const exponent = printed.includes("e") ? printed : `${printed}E+00`;
        return isExactNumber(printed) && isExactNumber(exponent) && isExactNumber(JSON.stringify(x));
      }),
      { numRuns: 20_000 },
    );
  });

  it("examples: 1.0, 1E2, 0.1, -0 and 5e-324 kept; 2^53+1, 30 digits, 1e-400 and 1e400 refused", () => {
    for (const token of [
      "1.0",
      "1E2",
      "0.1",
      "-0",
      "-0.0e7",
      "5e-324",
      "9007199254740992",
      "1e21",
      "0e99999",
    ])
      assert.equal(isExactNumber(token), true, token);
    for (const token of [
      "9007199254740993",
      "123456789012345678901234567890",
      "1e-400",
      "1e400",
      "0.1000000000000000055511151231257827",
      "5.000000000000001e-324",
    ])
      assert.equal(isExactNumber(token), false, token);
  });
});

/** A JSON value written out by hand, so that its number tokens keep their spelling. */
type Tree = { number: string } | { string: string } | { array: Tree[] } | { object: [string, Tree][] };

const keyOrString = fc.oneof(
  fc.string(),
  fc.constantFrom('1e400"', '\\"9007199254740993', "12345678901234567890", "\\", '"', ", 1e999]"),
);

const tree = fc.letrec<{ tree: Tree }>((tie) => ({
  tree: fc.oneof(
    { depthSize: "small", withCrossShrink: true },
    numberToken.map((number) => ({ number })),
    keyOrString.map((string) => ({ string })),
    fc.array(tie("tree"), { maxLength: 5 }).map((array) => ({ array })),
    fc
      .uniqueArray(fc.tuple(keyOrString, tie("tree")), { maxLength: 5, selector: ([key]) => key })
      .map((object) => ({ object })),
  ),
})).tree;

/** The JSON text of `value`, and the paths and tokens of its inexact numbers by the reference. */
function write(value: Tree, path: string[], out: { path: string; token: string }[]): string {
  if ("number" in value) {
    if (!referenceExact(value.number)) out.push({ path: path.join("/"), token: value.number });
    return value.number;
  }
  if ("string" in value) return JSON.stringify(value.string);
  if ("array" in value)
    return ` [ ${value.array.map((item, i) => write(item, [...path, String(i)], out)).join(" , ")}]`;
  return `{${value.object.map(([key, item]) => `${JSON.stringify(key)} :${write(item, [...path, key], out)}`).join(",")} } `;
}

describe("the scanner finds every inexact number outside strings, and names its field", () => {
  it("matches the reference on random JSON texts", () => {
    fc.assert(
      fc.property(tree, (value) => {
        const expected: { path: string; token: string }[] = [];
        const text = write(value, [], expected);
        JSON.parse(text); // valid JSON, as the scanner requires
        const found = findInexactNumbers(text, 1000);
        const paths = fieldPaths(
          text,
          found.map((token) => token.start),
        );
        assert.deepEqual(
          found.map((token, i) => ({ path: paths[i], token: text.slice(token.start, token.end) })),
          expected,
        );
      }),
      { numRuns: 3000 },
    );
  });
});

describe("the API stores numbers as sent or refuses them", () => {
  const api = useApi();
  const post = (url: string, text: string, headers: Record<string, string> = JSON_HEADERS) =>
    api.app.inject({ method: "POST", url, payload: text, headers });

  it("refuses 2^53+1, a 30-digit integer, 1e-400 and 1e400 with 422 naming the field", async () => {
    for (const token of ["9007199254740993", "123456789012345678901234567890", "1e-400", "1e400"]) {
      const body = assertProblem(await post("/jobs", `{"type":"t","payload":{"n":${token}}}`), 422, [
        "payload/n",
      ]);
      assert.match(body.errors?.[0]?.message ?? "", /send it as a string/);
      assert.ok(body.errors?.[0]?.message.includes(token.slice(0, 30)), body.errors?.[0]?.message);
    }
    assertProblem(await post("/jobs", '{"type":"t","priority":5.0000000000000001}'), 422, ["priority"]);
    assert.equal((await api.db.sql("SELECT 1 FROM jobs")).length, 0, "nothing was written");
  });

  it("keeps 1.0, 1E2, 0.1, -0, 2^53 and 5e-324 with their decimal values", async () => {
    const res = await post(
      "/jobs",
      '{"type":"t","payload":{"a":1.0,"b":1E2,"c":0.1,"d":-0,"e":9007199254740992,"f":5e-324,"g":"9007199254740993"}}',
    );
    assert.equal(res.statusCode, 201, res.body);
    // jsonb compares numbers by value: each stored value is exactly the one sent.
    const [row] = await api.db.sql<{ same: boolean }>(
      `SELECT payload = '{"a":1.0,"b":1E2,"c":0.1,"d":-0,"e":9007199254740992,"f":5e-324,"g":"9007199254740993"}'::jsonb
         AS same FROM jobs WHERE id = $1`,
      [res.json().id],
    );
    assert.equal(row?.same, true);
  });

  it("names the field in a batch as jobs/<index>/..., every bad number listed", async () => {
    const jobs = Array.from({ length: 5 }, (_, i) =>
      i === 3
        ? '{"type":"t","payload":{"a":[1,2,1e999,"x"],"b":{"c":-18446744073709551617}}}'
        : '{"type":"t"}',
    );
    assertProblem(await post("/jobs/batch", `{"jobs":[${jobs.join(",")}]}`), 422, [
      "jobs/3/payload/a/2",
      "jobs/3/payload/b/c",
    ]);
  });

  it("answers 415 naming Content-Encoding for anything but identity", async () => {
    for (const encoding of ["gzip", "deflate", "br", "gzip, identity"]) {
      const body = assertProblem(
        await post("/jobs", '{"type":"t"}', { ...JSON_HEADERS, "content-encoding": encoding }),
        415,
        ["content-encoding"],
      );
      assert.match(body.detail ?? "", /Content-Encoding/);
    }
    const ok = await post("/jobs", '{"type":"t"}', { ...JSON_HEADERS, "content-encoding": "identity" });
    assert.equal(ok.statusCode, 201, ok.body);
  });
});
