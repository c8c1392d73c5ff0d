/**
 * Which build a row measured: the library file of a checkout, and its git revision for the notes
 * and the .meta.json (a commit, not a path of the machine the run was on).
 */
import { execFileSync } from "node:child_process";
import { join } from "node:path";

/** The library file of a checkout built with `npm run build`, relative to the checkout. */
export const BASELINE_ENTRY = join("dist", "src", "index.js");

/**
 * `git describe --always --dirty` of the checkout in `dir` (e.g. `172bd35` or `172bd35-dirty`), or
 * "revision unknown" when it is not a git checkout or git does not answer within 5 s.
 */
export function buildRevision(dir: string): string {
  try {
    return execFileSync("git", ["-C", dir, "describe", "--always", "--dirty"], {
      encoding: "utf8",
      timeout: 5000,
      stdio: ["ignore", "pipe", "ignore"],
    }).trim();
  } catch {
    return "revision unknown";
  }
}
