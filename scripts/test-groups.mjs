// Named groups of test files for `npm test -- <group>` (scripts/run-tests.mjs): each entry is the
// start of a path under test/ (a file without its extension, or a folder ending in "/"). A group's
// name given as an argument runs its files; any other argument filters by path as before.
// test/runner.test.ts checks that every file entry names an existing test file.

/** @type {Record<string, { description: string; entries: string[] }>} */
export const TEST_GROUPS = {
  once: {
    description: "exactly-once execution: the claim protocol, contention between workers, lock sessions",
    entries: [
      "queue/claim.test",
      "worker/contention.test",
      "worker/lanes.test",
      "worker/write-connection.test",
    ],
  },
  dlq: {
    description: "dead letters: the ledger, the API, the CLI, permanent failures",
    entries: ["queue/dead-letters.test", "api/dead-letters.test", "cli/dead.test", "worker/permanent.test"],
  },
  retry: {
    description: "failed attempts: backoff, retry now, wake-ups at the due time",
    entries: ["queue/retry.test", "worker/retry-wakeups.test"],
  },
  reaper: {
    description: "the stale-job reaper and what it hands back",
    entries: ["queue/reaper.test", "worker/links-hung.test"],
  },
  external: {
    description: "tests that drive installed programs (Prometheus, PgBouncer, Chromium, tmux)",
    entries: ["external/"],
  },
};

/**
 * The test files (paths under the compiled test folder, e.g. "queue/retry.test.js") of `group`.
 * @param {string} group a key of TEST_GROUPS
 * @param {string[]} files every test file, relative to the test folder
 */
export function filesOfGroup(group, files) {
  const { entries } = TEST_GROUPS[group];
  return files.filter((file) =>
    entries.some((entry) => (entry.endsWith("/") ? file.startsWith(entry) : file === `${entry}.js`)),
  );
}
