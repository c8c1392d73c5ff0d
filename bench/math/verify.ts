/**
 * Independent re-derivation of the math handlers' results (DESIGN.md §7), for `npm run
 * bench:math`. Nothing here may import src/worker/handlers: every result is recomputed by a different
 * algorithm or a different implementation, so that a bug in a handler cannot hide itself.
 *
 * - `is_prime`: the handler does trial division. Here primality is deterministic Miller–Rabin over
 *   BigInt, and `divisors_checked` (the number of trial candidates 2, 3, 5, 7, … the handler tries)
 *   follows arithmetically from ⌊√n⌋ (for a prime) or from the smallest prime factor p, found by
 *   trial division by the primes below 1000 and then Pollard's rho (for a composite).
 * - `collatz`: the handler steps one term at a time reducing the checksum as it goes. Here odd terms
 *   take one 3n+1 step, even runs are shifted off bit by bit, and the exact sum is reduced once.
 * - `sha256_chain`: the handler uses node:crypto `createHash`. Here WebCrypto
 *   (`crypto.subtle.digest`) chains the raw digests, and hex is encoded by hand.
 */
import type { JsonValue } from "../../src/queue/types.js";

/** The three verifiable job types. */
export const MATH_TYPES = ["is_prime", "collatz", "sha256_chain"] as const;
export type MathType = (typeof MATH_TYPES)[number];

/** Result of `is_prime` as the handler stores it. */
export interface IsPrimeResult {
  n: number;
  is_prime: boolean;
  divisors_checked: number;
}

/** Result of `collatz` as the handler stores it. */
export interface CollatzResult {
  n: number;
  steps: number;
  checksum: number;
}

/** Result of `sha256_chain` as the handler stores it. */
export interface Sha256ChainResult {
  digest: string;
}

/** Collatz checksums are taken modulo this prime (DESIGN.md §7). */
export const COLLATZ_CHECKSUM_MODULUS = 1_000_000_007n;

/** Miller–Rabin with these bases is deterministic for every n below this bound (Sorenson & Webster). */
export const MILLER_RABIN_DETERMINISTIC_BELOW = 3_317_044_064_679_887_385_961_981n;
const MILLER_RABIN_BASES = [2n, 3n, 5n, 7n, 11n, 13n, 17n, 19n, 23n, 29n, 31n, 37n] as const;

/** Odd primes below 1000 (sieve of Eratosthenes), tried before Pollard's rho. */
const SMALL_ODD_PRIMES: readonly bigint[] = (() => {
  const limit = 1000;
  const composite = new Uint8Array(limit);
  const primes: bigint[] = [];
  for (let i = 3; i < limit; i += 2) {
    if (composite[i]) continue;
    primes.push(BigInt(i));
    for (let j = i * i; j < limit; j += 2 * i) composite[j] = 1;
  }
  return primes;
})();

/** base^exponent mod modulus by square-and-multiply (modulus > 1). */
function modPow(base: bigint, exponent: bigint, modulus: bigint): bigint {
  let result = 1n;
  let b = base % modulus;
  let e = exponent;
  while (e > 0n) {
    if (e & 1n) result = (result * b) % modulus;
    b = (b * b) % modulus;
    e >>= 1n;
  }
  return result;
}

function gcd(a: bigint, b: bigint): bigint {
  let x = a < 0n ? -a : a;
  let y = b < 0n ? -b : b;
  while (y !== 0n) [x, y] = [y, x % y];
  return x;
}

/**
 * Primality by Miller–Rabin with the first twelve prime bases: deterministic (no false answer) for
 * n < 3.3·10^24, far beyond the handlers' 2^53 − 1.
 * @throws {RangeError} for n at or above {@link MILLER_RABIN_DETERMINISTIC_BELOW}.
 */
export function isPrimeMillerRabin(n: bigint): boolean {
  if (n >= MILLER_RABIN_DETERMINISTIC_BELOW)
    throw new RangeError("Miller–Rabin with 12 bases is only deterministic below 3.3e24");
  if (n < 2n) return false;
  for (const p of MILLER_RABIN_BASES) {
    if (n === p) return true;
    if (n % p === 0n) return false;
  }
  let d = n - 1n;
  let s = 0;
  while ((d & 1n) === 0n) {
    d >>= 1n;
    s++;
  }
  witness: for (const a of MILLER_RABIN_BASES) {
    let x = modPow(a, d, n);
    if (x === 1n || x === n - 1n) continue;
    for (let r = 1; r < s; r++) {
      x = (x * x) % n;
      if (x === n - 1n) continue witness;
    }
    return false;
  }
  return true;
}

/** ⌊√n⌋ for n ≥ 0 by Newton's iteration on BigInt (no floating point). */
export function integerSqrt(n: bigint): bigint {
  if (n < 0n) throw new RangeError("square root of a negative number");
  if (n < 2n) return n;
  // Start above the root: 2^⌈bits/2⌉ > √n; Newton then decreases monotonically to ⌊√n⌋.
  let x = 1n << BigInt(Math.ceil(n.toString(2).length / 2));
  for (;;) {
    const y = (x + n / x) >> 1n;
    if (y >= x) return x;
    x = y;
  }
}

/** A nontrivial factor of an odd composite n that is not a prime power of a small prime (Brent's rho). */
function pollardRhoFactor(n: bigint): bigint {
  for (let c = 1n; ; c++) {
    const f = (v: bigint) => (v * v + c) % n;
    let y = 2n;
    let r = 1;
    let q = 1n;
    let g = 1n;
    let x = y;
    let ys = y;
    const batch = 64;
    while (g === 1n) {
      x = y;
      for (let i = 0; i < r; i++) y = f(y);
      for (let k = 0; k < r && g === 1n; k += batch) {
        ys = y;
        for (let i = 0; i < Math.min(batch, r - k); i++) {
          y = f(y);
          q = (q * (x > y ? x - y : y - x)) % n;
        }
        g = gcd(q, n);
      }
      r *= 2;
    }
    if (g === n) {
      // The batch overshot: redo its steps one by one.
      do {
        ys = f(ys);
        g = gcd(x > ys ? x - ys : ys - x, n);
      } while (g === 1n);
    }
    if (g !== n) return g;
    // This polynomial cycled without separating the factors; try the next constant.
  }
}

/** Prime factors of n > 1 (with repetition, unordered), for n with no prime factor below 1000. */
function largePrimeFactors(n: bigint, out: bigint[]): void {
  if (n === 1n) return;
  if (isPrimeMillerRabin(n)) {
    out.push(n);
    return;
  }
  const root = integerSqrt(n);
  if (root * root === n) {
    largePrimeFactors(root, out);
    largePrimeFactors(root, out);
    return;
  }
  const d = pollardRhoFactor(n);
  largePrimeFactors(d, out);
  largePrimeFactors(n / d, out);
}

/**
 * The smallest prime factor of n ≥ 2 (n itself when n is prime): trial division by the primes
 * below 1000, then a full factorisation by Pollard's rho and Miller–Rabin.
 * @throws {RangeError} for n < 2.
 */
export function smallestPrimeFactor(n: bigint): bigint {
  if (n < 2n) throw new RangeError("n must be at least 2");
  if ((n & 1n) === 0n) return 2n;
  for (const p of SMALL_ODD_PRIMES) {
    if (p * p > n) return n;
    if (n % p === 0n) return p;
  }
  if (isPrimeMillerRabin(n)) return n;
  const factors: bigint[] = [];
  largePrimeFactors(n, factors);
  // BigInt: no Math.min.
  let smallest = n;
  for (const f of factors) if (f < smallest) smallest = f;
  return smallest;
}

function assertSafeInteger(name: string, value: number, min: number): void {
  if (!Number.isSafeInteger(value) || value < min)
    throw new RangeError(`${name} must be an integer from ${min} to 2^53 - 1, got ${value}`);
}

/**
 * What `is_prime` must return for n. `divisors_checked` counts the trial candidates 2, 3, 5, 7, …
 * up to r = ⌊√n⌋ that the specification tries, stopping at the first divisor:
 * n < 2 → 0; n prime → r < 2 ? 0 : 1 + ⌊(r − 1) / 2⌋ (2 and every odd number up to r);
 * n composite with smallest prime factor p → p = 2 ? 1 : (p + 1) / 2 (2, then 3 … p; p ≤ r always).
 */
export function expectedIsPrime(n: number): IsPrimeResult {
  assertSafeInteger("n", n, 0);
  const big = BigInt(n);
  if (big < 2n) return { n, is_prime: false, divisors_checked: 0 };
  if (isPrimeMillerRabin(big)) {
    const r = integerSqrt(big);
    return { n, is_prime: true, divisors_checked: r < 2n ? 0 : Number(1n + (r - 1n) / 2n) };
  }
  const p = smallestPrimeFactor(big);
  return { n, is_prime: false, divisors_checked: p === 2n ? 1 : Number((p + 1n) / 2n) };
}

/**
 * What `collatz` must return for n ≥ 1: `steps` to reach 1 and `checksum`, the sum of every term
 * (n and the final 1 included) modulo 1,000,000,007. Odd terms take one 3n+1 step; runs of halvings
 * are shifted off bit by bit; the exact BigInt sum is reduced once at the end.
 */
export function expectedCollatz(n: number): CollatzResult {
  assertSafeInteger("n", n, 1);
  let term = BigInt(n);
  let total = term;
  let steps = 0;
  while (term !== 1n) {
    if (term & 1n) {
      term = (term << 1n) + term + 1n;
      steps++;
      total += term;
    }
    while ((term & 1n) === 0n) {
      term >>= 1n;
      steps++;
      total += term;
    }
  }
  return { n, steps, checksum: Number(total % COLLATZ_CHECKSUM_MODULUS) };
}

const HEX = Array.from({ length: 256 }, (_, i) => i.toString(16).padStart(2, "0"));

/**
 * What `sha256_chain` must return: h = UTF-8 bytes of `seed`, then `rounds` times h = SHA-256(h)
 * over the raw 32-byte digest, by WebCrypto (`crypto.subtle.digest`); lowercase hex of the last h.
 * Async: each WebCrypto digest is a promise (about 10 µs per round).
 */
export async function expectedSha256Chain(seed: string, rounds: number): Promise<Sha256ChainResult> {
  assertSafeInteger("rounds", rounds, 1);
  let h: Uint8Array = new TextEncoder().encode(seed);
  for (let i = 0; i < rounds; i++) h = new Uint8Array(await crypto.subtle.digest("SHA-256", h));
  let digest = "";
  for (const byte of h) digest += HEX[byte];
  return { digest };
}

/** A math job's payload, as the benchmark generates it. */
export type MathPayload = { n: number } | { seed: string; rounds: number };

/**
 * The result a job of this type and payload must have.
 * @throws {TypeError} on a payload that does not fit the type.
 */
export async function expectedResult(type: MathType, payload: MathPayload): Promise<JsonValue> {
  if (type === "sha256_chain") {
    if (!("seed" in payload)) throw new TypeError("sha256_chain needs {seed, rounds}");
    return { ...(await expectedSha256Chain(payload.seed, payload.rounds)) };
  }
  if (!("n" in payload)) throw new TypeError(`${type} needs {n}`);
  return type === "is_prime" ? { ...expectedIsPrime(payload.n) } : { ...expectedCollatz(payload.n) };
}
