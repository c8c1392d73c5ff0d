/**
 * The math benchmark's independent verifiers (bench/math/verify.ts) against the handlers they
 * check (src/worker/handlers/math.ts): known values, edge cases, and random inputs across the
 * benchmark's documented ranges. The handlers are imported here only, never by the benchmark.
 */
import assert from "node:assert/strict";
import { describe, test } from "node:test";
import fc from "fast-check";
import { KNOWN_PRIMES, MATH_RANGES, mathJobs, nextPrime, Prng } from "../../bench/math/payloads.js";
import {
  expectedCollatz,
  expectedIsPrime,
  expectedResult,
  expectedSha256Chain,
  integerSqrt,
  isPrimeMillerRabin,
  smallestPrimeFactor,
} from "../../bench/math/verify.js";
import { percentile, summarizeMs } from "../../bench/shared/stats.js";
import { renderTable } from "../../bench/shared/table.js";
import { collatz, isPrime, sha256Chain } from "../../src/worker/handlers/math.js";

const ABC_DIGEST = "ba7816bf8f01cfea414140de5dae2223b00361a396177a9cb410ff61f20015ad";

describe("known values", () => {
  test("is_prime: 97 is prime after 5 candidates, and the handler agrees", () => {
    assert.deepEqual(expectedIsPrime(97), { n: 97, is_prime: true, divisors_checked: 5 });
    assert.deepEqual(isPrime({ n: 97 }), expectedIsPrime(97));
  });

  test("collatz: 27 takes 111 steps with checksum 101440, and the handler agrees", () => {
    assert.deepEqual(expectedCollatz(27), { n: 27, steps: 111, checksum: 101440 });
    assert.deepEqual(collatz({ n: 27 }), expectedCollatz(27));
  });

  test('sha256_chain: "abc", 1 round is the FIPS 180-2 test vector, and the handler agrees', async () => {
    assert.deepEqual(await expectedSha256Chain("abc", 1), { digest: ABC_DIGEST });
    assert.deepEqual(sha256Chain({ seed: "abc", rounds: 1 }), { digest: ABC_DIGEST });
  });

  test("is_prime edge cases: 0..200, squares of primes, 2^53 - 1", () => {
    for (let n = 0; n <= 200; n++) assert.deepEqual(expectedIsPrime(n), isPrime({ n }), `n = ${n}`);
    for (const n of [25, 49, 121, 10_201, 1_018_081, 999_966_000_289, Number.MAX_SAFE_INTEGER])
      assert.deepEqual(expectedIsPrime(n), isPrime({ n }), `n = ${n}`);
  });

  test("is_prime of the largest prime below 2^53 (arithmetic only: trial division would take a second)", () => {
    // ⌊√9007199254740881⌋ = 94906265, so 2 and the 47,453,132 odd numbers 3..94906265 are tried.
    assert.deepEqual(expectedIsPrime(9_007_199_254_740_881), {
      n: 9_007_199_254_740_881,
      is_prime: true,
      divisors_checked: 47_453_133,
    });
  });

  test("collatz edge cases: 1 and 2, and the largest safe integer", () => {
    assert.deepEqual(expectedCollatz(1), { n: 1, steps: 0, checksum: 1 });
    assert.deepEqual(expectedCollatz(2), { n: 2, steps: 1, checksum: 3 });
    assert.deepEqual(expectedCollatz(Number.MAX_SAFE_INTEGER), collatz({ n: Number.MAX_SAFE_INTEGER }));
  });

  test("the verifiers reject inputs outside the handlers' domain", async () => {
    assert.throws(() => expectedIsPrime(-1), RangeError);
    assert.throws(() => expectedIsPrime(2 ** 53), RangeError);
    assert.throws(() => expectedCollatz(0), RangeError);
    await assert.rejects(expectedSha256Chain("x", 0), RangeError);
  });
});

describe("number theory helpers", () => {
  test("Miller–Rabin agrees with a sieve below 100,000 and catches strong pseudoprimes", () => {
    const limit = 100_000;
    const composite = new Uint8Array(limit);
    for (let i = 2; i * i < limit; i++)
      if (!composite[i]) for (let j = i * i; j < limit; j += i) composite[j] = 1;
    for (let n = 0; n < limit; n++)
      assert.equal(isPrimeMillerRabin(BigInt(n)), n >= 2 && !composite[n], `n = ${n}`);
    // Strong pseudoprimes to several of the bases: 3215031751 (2, 3, 5, 7), 3825123056546413051 (2..23).
    assert.equal(isPrimeMillerRabin(3_215_031_751n), false);
    assert.equal(isPrimeMillerRabin(3_825_123_056_546_413_051n), false);
    assert.equal(isPrimeMillerRabin(2n ** 61n - 1n), true);
  });

  test("integerSqrt is exact around perfect squares", () => {
    fc.assert(
      fc.property(fc.bigInt({ min: 0n, max: 2n ** 80n }), (r) => {
        assert.equal(integerSqrt(r * r), r);
        if (r > 0n) assert.equal(integerSqrt(r * r - 1n), r - 1n);
        assert.equal(integerSqrt(r * r + 2n * r), r);
      }),
    );
  });

  test("smallestPrimeFactor finds the smaller of two large primes", () => {
    fc.assert(
      fc.property(
        fc.integer({ min: 1000, max: 3_000_000 }),
        fc.integer({ min: 1000, max: 3_000_000 }),
        (a, b) => {
          const p = BigInt(nextPrime(a));
          const q = BigInt(nextPrime(b));
          assert.equal(smallestPrimeFactor(p * q), p < q ? p : q);
          assert.equal(smallestPrimeFactor(p * p * q), p < q ? p : q);
        },
      ),
      { numRuns: 50 },
    );
  });

  test("percentile interpolates between closest ranks", () => {
    assert.equal(percentile([1, 2, 3, 4], 0.5), 2.5);
    assert.equal(percentile([10], 0.99), 10);
    assert.equal(percentile([0, 10], 0.25), 2.5);
    assert.ok(Number.isNaN(percentile([], 0.5)));
    const summary = summarizeMs(Array.from({ length: 101 }, (_, i) => 100 - i));
    assert.deepEqual([summary.p50Ms, summary.p99Ms, summary.maxMs, summary.count], [50, 99, 100, 101]);
  });

  test("tables are boxes of equal-width lines", () => {
    const lines = renderTable({ title: "T", sections: [[["a", "1"], "free text"]] }).split("\n");
    assert.ok(lines.every((l) => l.length === (lines[0] as string).length));
    assert.match(lines[3] as string, /^│ a {3}1 +│$/);
  });
});

describe("random inputs across the documented ranges (fast-check)", () => {
  test("is_prime: uniform n in [1e11, 1e12]", () => {
    fc.assert(
      fc.property(fc.integer(MATH_RANGES.isPrime), (n) => {
        assert.deepEqual(expectedIsPrime(n), isPrime({ n }));
      }),
      { numRuns: 200 },
    );
  });

  test("is_prime: primes and semiprimes p·q with p, q ≥ 1e5 in [1e11, 1e12]", () => {
    fc.assert(
      fc.property(
        fc.integer({ min: 316_228, max: 999_000 }),
        fc.double({ min: 0, max: 1, noNaN: true }),
        (a, t) => {
          const p = nextPrime(a);
          const low = Math.ceil(MATH_RANGES.isPrime.min / p);
          const high = Math.floor(MATH_RANGES.isPrime.max / p) - 200;
          const n = p * nextPrime(low + Math.floor(t * (high - low)));
          assert.deepEqual(expectedIsPrime(n), isPrime({ n }));
          const prime = nextPrime(Math.floor(MATH_RANGES.isPrime.min + t * 8e11));
          assert.deepEqual(expectedIsPrime(prime), isPrime({ n: prime }));
        },
      ),
      { numRuns: 25 },
    );
  });

  test("is_prime: small n in [0, 1e6]", () => {
    fc.assert(
      fc.property(fc.integer({ min: 0, max: 1_000_000 }), (n) => {
        assert.deepEqual(expectedIsPrime(n), isPrime({ n }));
      }),
      { numRuns: 500 },
    );
  });

  test("collatz: n in [1, 1e12] and up to 2^53 - 1", () => {
    fc.assert(
      fc.property(fc.integer(MATH_RANGES.collatz), (n) => {
        assert.deepEqual(expectedCollatz(n), collatz({ n }));
      }),
      { numRuns: 300 },
    );
    fc.assert(
      fc.property(fc.integer({ min: 1, max: Number.MAX_SAFE_INTEGER }), (n) => {
        assert.deepEqual(expectedCollatz(n), collatz({ n }));
      }),
      { numRuns: 100 },
    );
  });

  test("sha256_chain: any Unicode seed, few rounds", async () => {
    await fc.assert(
      fc.asyncProperty(
        fc.string({ unit: "binary", maxLength: 40 }),
        fc.integer({ min: 1, max: 20 }),
        async (seed, rounds) => {
          assert.deepEqual(await expectedSha256Chain(seed, rounds), sha256Chain({ seed, rounds }));
        },
      ),
      { numRuns: 100 },
    );
  });

  test("sha256_chain: seeds seed-<i> with rounds in [1000, 4000]", async () => {
    await fc.assert(
      fc.asyncProperty(fc.nat({ max: 100_000 }), fc.integer(MATH_RANGES.sha256Rounds), async (i, rounds) => {
        const seed = `seed-${i}`;
        assert.deepEqual(await expectedSha256Chain(seed, rounds), sha256Chain({ seed, rounds }));
      }),
      { numRuns: 8 },
    );
  });
});

describe("the benchmark's payloads", () => {
  test("are deterministic, interleaved, within the documented ranges, and mix primes and composites", () => {
    const jobs = mathJobs(600);
    assert.deepEqual(mathJobs(600), jobs);
    assert.notDeepEqual(mathJobs(600, 1), jobs);
    const types = ["is_prime", "collatz", "sha256_chain"];
    for (const job of jobs) assert.equal(job.type, types[job.index % 3]);
    let primes = 0;
    for (const job of jobs) {
      const p = job.payload;
      if (job.type === "sha256_chain") {
        assert.ok("seed" in p && p.seed === `seed-${job.index}`);
        assert.ok(p.rounds >= MATH_RANGES.sha256Rounds.min && p.rounds <= MATH_RANGES.sha256Rounds.max);
        continue;
      }
      assert.ok("n" in p);
      const range = job.type === "is_prime" ? MATH_RANGES.isPrime : MATH_RANGES.collatz;
      assert.ok(p.n >= range.min && p.n <= range.max, `${job.type} n = ${p.n}`);
      if (job.type === "is_prime" && isPrimeMillerRabin(BigInt(p.n))) primes++;
    }
    const isPrimeNs = jobs
      .filter((j) => j.type === "is_prime")
      .map((j) => ("n" in j.payload ? j.payload.n : 0));
    for (const known of KNOWN_PRIMES) assert.ok(isPrimeNs.includes(known));
    assert.ok(primes >= 50 && primes < 100, `${primes} primes of 200`);
  });

  test("every job of a run verifies against the handler that will run it", async () => {
    for (const job of mathJobs(90, 7)) {
      const actual =
        job.type === "is_prime"
          ? isPrime(job.payload)
          : job.type === "collatz"
            ? collatz(job.payload)
            : sha256Chain(job.payload);
      assert.deepEqual(await expectedResult(job.type, job.payload), actual, `job ${job.index}`);
    }
  });

  test("the PRNG is uniform enough and stays in range", () => {
    const prng = new Prng(1);
    let sum = 0;
    for (let i = 0; i < 10_000; i++) {
      const v = prng.nextInt(1, 1_000_000_000_000);
      assert.ok(v >= 1 && v <= 1_000_000_000_000);
      sum += v / 1e12;
    }
    assert.ok(Math.abs(sum / 10_000 - 0.5) < 0.02);
  });
});
