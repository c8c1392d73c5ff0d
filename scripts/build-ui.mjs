// Builds the web dashboard (GET /ui): bundles ui/src/main.ts with esbuild into dist/ui/app.js,
// ui/app.css (with its imports) into dist/ui/app.css, copies ui/index.html beside them, prints each file's size and the gzipped total,
// and fails when the total is over the budget (issue 12: under 300 KB gzipped). Run by
// `npm run build`; the files are part of the package (package.json "files": dist/ui).
import { copyFileSync, mkdirSync, readFileSync } from "node:fs";
import { gzipSync } from "node:zlib";
import { build } from "esbuild";

/** Largest gzipped size of the dashboard's files together, bytes. */
const BUDGET_GZIP_BYTES = 300 * 1024;
const out = "dist/ui";

mkdirSync(out, { recursive: true });
await build({
  entryPoints: { app: "ui/src/main.ts" },
  outdir: out,
  bundle: true,
  format: "esm",
  target: "es2022",
  minify: true,
  legalComments: "none",
  logLevel: "warning",
});
await build({
  entryPoints: ["ui/app.css"],
  outfile: `${out}/app.css`,
  bundle: true,
  minify: true,
  logLevel: "warning",
});
copyFileSync("ui/index.html", `${out}/index.html`);

let total = 0;
const sizes = ["index.html", "app.js", "app.css"].map((name) => {
  const bytes = readFileSync(`${out}/${name}`);
  const gzipped = gzipSync(bytes, { level: 9 }).length;
  total += gzipped;
  return `${name} ${(bytes.length / 1024).toFixed(1)} KB (${(gzipped / 1024).toFixed(1)} KB gzipped)`;
});
console.log(`dashboard: ${sizes.join(", ")}; total ${(total / 1024).toFixed(1)} KB gzipped (budget 300 KB)`);
if (total > BUDGET_GZIP_BYTES) {
  console.error(`dashboard: ${total} bytes gzipped is over the ${BUDGET_GZIP_BYTES}-byte budget`);
  process.exit(1);
}
