/**
 * The three verifiable computations (DESIGN.md §7). The math benchmark re-derives each result
 * with independent code, so these must match the specification exactly.
 */
import { createHash } from "node:crypto";
import { PayloadError } from "../../errors.js";
import type { JsonValue } from "../../queue/types.js";
import { integerField, payloadObject } from "./payload.js";

const MAX_SAFE = Number.MAX_SAFE_INTEGER; // 2^53 - 1
const CHECKSUM_MODULUS = 1_000_000_007n;

/**
 * Trial division, O(√n): candidates 2, then 3, 5, 7, ... up to ⌊√n⌋; `divisors_checked` counts the
 * candidates tried, stopping at the first that divides n. n < 2 is not prime with 0 checked.
 * Payload `{n}`: integer 0 ≤ n ≤ 2^53 − 1.
 */
export function isPrime(payload: JsonValue): { n: number; is_prime: boolean; divisors_checked: number } {
  const n = integerField("is_prime", payload, "n", 0, MAX_SAFE);
  if (n < 2) return { n, is_prime: false, divisors_checked: 0 };
  const limit = integerSquareRoot(n);
  let checked = 0;
  for (let d = 2; d <= limit; d = d === 2 ? 3 : d + 2) {
    checked++;
    if (n % d === 0) return { n, is_prime: false, divisors_checked: checked };
  }
  return { n, is_prime: true, divisors_checked: checked };
}

/** ⌊√n⌋ exactly: the float estimate corrected with BigInt arithmetic (it can be off by one near 2^53). */
export function integerSquareRoot(n: number): number {
  let root = Math.floor(Math.sqrt(n));
  const big = BigInt(n);
  while (BigInt(root) * BigInt(root) > big) root--;
  while (BigInt(root + 1) * BigInt(root + 1) <= big) root++;
  return root;
}

/**
 * Collatz walk to 1 in exact BigInt arithmetic: `steps` to reach 1 (n = 1 → 0) and `checksum`, the
 * sum of every term including n and the final 1, modulo 1,000,000,007.
 * Payload `{n}`: integer 1 ≤ n ≤ 2^53 − 1.
 */
export function collatz(payload: JsonValue): { n: number; steps: number; checksum: number } {
  const n = integerField("collatz", payload, "n", 1, MAX_SAFE);
  let term = BigInt(n);
  let steps = 0;
  let sum = term % CHECKSUM_MODULUS;
  while (term !== 1n) {
    term = term % 2n === 0n ? term / 2n : 3n * term + 1n;
    steps++;
    sum = (sum + term) % CHECKSUM_MODULUS;
  }
  return { n, steps, checksum: Number(sum) };
}

/**
 * h = UTF-8 bytes of `seed`; `rounds` times h = SHA-256(h) over the raw 32-byte digest; returns the
 * lowercase hex of the last h. Payload `{seed: string, rounds}`: 1 ≤ rounds ≤ 10,000,000.
 */
export function sha256Chain(payload: JsonValue): { digest: string } {
  const seed = payloadObject("sha256_chain", payload).seed;
  if (typeof seed !== "string") throw new PayloadError("sha256_chain: payload.seed must be a string");
  const rounds = integerField("sha256_chain", payload, "rounds", 1, 10_000_000);
  let h: Buffer = Buffer.from(seed, "utf8");
  for (let i = 0; i < rounds; i++) h = createHash("sha256").update(h).digest();
  return { digest: h.toString("hex") };
}
