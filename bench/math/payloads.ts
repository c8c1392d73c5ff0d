/**
 * The math benchmark's workload: fixed, documented, deterministic payloads from a seeded PRNG, so
 * that every run with the same `--jobs` and `--seed` submits exactly the same jobs.
 *
 * Jobs are interleaved is_prime, collatz, sha256_chain, is_prime, … (job i has type i mod 3); k is
 * the job's index within its type. Ranges ({@link MATH_RANGES}):
 * - is_prime: n in [10^11, 10^12]. k ≡ 0 (mod 4): a prime — k = 0 is 100,000,000,003 (the
 *   smallest prime above 10^11), k = 4 is 999,999,999,989 (the largest below 10^12), others the
 *   next prime after a uniform draw. k ≡ 1: a semiprime p·q of two primes ≥ 10^5 (trial division
 *   must run as far as for a prime). k ≡ 2, 3: uniform (mostly composites with a small factor).
 * - collatz: n uniform in [1, 10^12]; k = 0 is 27 (111 steps), k = 1 is 1 (0 steps).
 * - sha256_chain: seed `"seed-<i>"` (i the job's overall index), rounds uniform in [1000, 4000].
 *
 * With 600 jobs the workers spend about 3–4 CPU-seconds in handlers (mostly SHA-256), so a run
 * takes a few seconds on 2 cores.
 */
import { isPrimeMillerRabin, type MathPayload, type MathType } from "./verify.js";

/** Documented payload ranges of the math benchmark (inclusive). */
export const MATH_RANGES = {
  isPrime: { min: 100_000_000_000, max: 1_000_000_000_000 },
  collatz: { min: 1, max: 1_000_000_000_000 },
  sha256Rounds: { min: 1000, max: 4000 },
} as const;

/** Default PRNG seed of the math benchmark. */
export const DEFAULT_MATH_SEED = 20_240_607;

/** Known primes at the ends of the is_prime range, used as the first two prime slots. */
export const KNOWN_PRIMES = [100_000_000_003, 999_999_999_989] as const;

/** Bounds of the semiprimes' first factor: p ≥ 316,228 > √10^11 keeps q ≥ 10^5 too. */
const SEMIPRIME_P = { min: 316_228, max: 999_000 } as const;

/** A deterministic PRNG (mulberry32, 32-bit state). Not for cryptography. */
export class Prng {
  private state: number;

  constructor(seed: number) {
    this.state = seed >>> 0;
  }

  /** Uniform 32-bit unsigned integer. */
  nextUint32(): number {
    this.state = (this.state + 0x6d2b79f5) >>> 0;
    let t = this.state;
    t = Math.imul(t ^ (t >>> 15), t | 1);
    t ^= t + Math.imul(t ^ (t >>> 7), t | 61);
    return (t ^ (t >>> 14)) >>> 0;
  }

  /** Uniform in [0, 1) with 53 random bits. */
  nextFloat(): number {
    const high = this.nextUint32() >>> 5; // 27 bits
    const low = this.nextUint32() >>> 6; // 26 bits
    return (high * 67_108_864 + low) / 9_007_199_254_740_992;
  }

  /** Uniform integer in [min, max] (both safe integers, max − min < 2^53). */
  nextInt(min: number, max: number): number {
    return min + Math.floor(this.nextFloat() * (max - min + 1));
  }
}

/** The smallest prime ≥ n (n a safe integer). */
export function nextPrime(n: number): number {
  let candidate = Math.max(2, n);
  while (!isPrimeMillerRabin(BigInt(candidate))) candidate++;
  return candidate;
}

/** One job of the math benchmark. */
export interface MathJobSpec {
  /** Overall index, 0-based, in submission order. */
  index: number;
  type: MathType;
  payload: MathPayload;
}

function isPrimePayload(k: number, prng: Prng): { n: number } {
  const { min, max } = MATH_RANGES.isPrime;
  if (k % 4 === 0) {
    const known = KNOWN_PRIMES[k / 4];
    if (known !== undefined) return { n: known };
    // Prime gaps below 10^12 are under 600, so the next prime stays within the range.
    return { n: nextPrime(prng.nextInt(min, max - 1000)) };
  }
  if (k % 4 === 1) {
    const p = nextPrime(prng.nextInt(SEMIPRIME_P.min, SEMIPRIME_P.max));
    // Gaps below 10^7 are under 200: q·p stays within [10^11, 10^12].
    const q = nextPrime(prng.nextInt(Math.ceil(min / p), Math.floor(max / p) - 200));
    return { n: p * q };
  }
  return { n: prng.nextInt(min, max) };
}

function collatzPayload(k: number, prng: Prng): { n: number } {
  if (k === 0) return { n: 27 };
  if (k === 1) return { n: 1 };
  return { n: prng.nextInt(MATH_RANGES.collatz.min, MATH_RANGES.collatz.max) };
}

/**
 * The benchmark's `count` jobs for `seed`, interleaved by type (job i has type
 * is_prime/collatz/sha256_chain for i mod 3 = 0/1/2). Deterministic: same arguments, same jobs.
 */
export function mathJobs(count: number, seed = DEFAULT_MATH_SEED): MathJobSpec[] {
  const prng = new Prng(seed);
  const perType = [0, 0, 0];
  const jobs: MathJobSpec[] = [];
  for (let index = 0; index < count; index++) {
    const slot = index % 3;
    const k = perType[slot] ?? 0;
    perType[slot] = k + 1;
    if (slot === 0) jobs.push({ index, type: "is_prime", payload: isPrimePayload(k, prng) });
    else if (slot === 1) jobs.push({ index, type: "collatz", payload: collatzPayload(k, prng) });
    else {
      const rounds = prng.nextInt(MATH_RANGES.sha256Rounds.min, MATH_RANGES.sha256Rounds.max);
      jobs.push({ index, type: "sha256_chain", payload: { seed: `seed-${index}`, rounds } });
    }
  }
  return jobs;
}

/** The ranges as one line each, for `--help` and the JSON record. */
export function describeMathRanges(): string[] {
  const r = MATH_RANGES;
  return [
    `is_prime      n in [1e11, 1e12]: every 4th a prime (the first two ${KNOWN_PRIMES.join(" and ")}),`,
    "              every 4th a semiprime p·q of primes p, q ≥ 1e5, the rest uniform",
    `collatz       n uniform in [${r.collatz.min}, 1e12] (the first two: 27 and 1)`,
    `sha256_chain  seed "seed-<i>", rounds uniform in [${r.sha256Rounds.min}, ${r.sha256Rounds.max}]`,
  ];
}
