/**
 * Architecture rules (docs/architecture.md, "Layout"), read from the TypeScript sources in src/
 * with the TypeScript parser (static `import`/`export … from` and dynamic `import(…)` with
 * relative paths; string and template literals):
 * - no source file over 400 lines;
 * - no import cycle between the folders of src/ (api, cli, db, queue, worker; the shared root
 *   modules config.ts, errors.ts, log.ts as one node; src/index.ts, the package's entry point that
 *   re-exports every folder, as a node of its own);
 * - layers: `db` imports nothing from `queue`; `queue` nothing from `worker`, `api` or `cli`;
 *   `api` nothing from `worker`;
 * - SQL text only under src/queue and src/db/migrations (a heuristic on string literals: text
 *   starting SELECT, UPDATE … SET, INSERT INTO, DELETE FROM, WITH x AS (, DDL; or one short
 *   LISTEN/UNLISTEN/NOTIFY/BEGIN/COMMIT/ROLLBACK statement).
 * Each rule is a test listing every violation, one per line.
 */
import assert from "node:assert/strict";
import { readdirSync, readFileSync } from "node:fs";
import { dirname, join, normalize, relative } from "node:path";
import { describe, it } from "node:test";
import ts from "typescript";

const SRC = "src";
const MAX_LINES = 400;
const ROOT = "(root)";
/** The package's entry point: it may import every folder (it is what the package exports). */
const ENTRY = "(entry)";
const ENTRY_FILE = `${SRC}/index.ts`;

/** Imports a folder must not make: folder → folders it may not import from. */
const FORBIDDEN: Record<string, readonly string[]> = {
  [ROOT]: ["api", "cli", "db", "queue", "worker"],
  db: ["queue"],
  queue: ["worker", "api", "cli"],
  api: ["worker"],
};

/** Where SQL text may live: paths starting with these (relative to the repository). */
const SQL_HOMES = ["src/queue/", "src/db/migrations/"];

/**
 * Literal text that starts like a SQL statement (upper-case keywords, as this code base writes
 * them): SELECT, UPDATE … SET, INSERT INTO, DELETE FROM, WITH name AS (, and DDL.
 */
const SQL_START =
  /^\s*(SELECT\s|UPDATE\s+\S+\s+SET\s|INSERT\s+INTO\s|DELETE\s+FROM\s|WITH\s+(RECURSIVE\s+)?\w+\s+AS\s*\(|(CREATE|ALTER|DROP)\s+(TABLE|INDEX|SCHEMA|FUNCTION|TRIGGER|TYPE|VIEW)\s)/;

/**
 * Whole literals (or template heads) that are one short statement: LISTEN/UNLISTEN/NOTIFY with
 * at most a channel (and a payload), or a bare transaction keyword. "LISTEN connection lost" (a
 * log message) has more words and is not SQL.
 */
const SQL_WHOLE =
  /^\s*((UN)?LISTEN(\s+[\w"$.]+)?|NOTIFY(\s+[\w"$.]+(\s*,.*)?)?|BEGIN|COMMIT|ROLLBACK)\s*;?\s*$/;

/** Whether literal text (a whole string, or the head of a template before its first `${`) is SQL. */
function looksLikeSql(text: string): boolean {
  return SQL_START.test(text) || SQL_WHOLE.test(text);
}

interface Import {
  from: string;
  to: string;
  line: number;
  specifier: string;
}

interface SourceFile {
  path: string;
  lines: number;
  imports: Import[];
  sqlLiterals: { line: number; text: string }[];
}

function sourcePaths(dir: string): string[] {
  return readdirSync(dir, { recursive: true })
    .map(String)
    .filter((f) => f.endsWith(".ts"))
    .map((f) => join(dir, f).split("\\").join("/"))
    .sort();
}

/** The folder (graph node) of a path under src/: its first directory, the entry, or the root node. */
function folderOf(path: string): string {
  if (path === ENTRY_FILE) return ENTRY;
  const parts = relative(SRC, path).split(/[\\/]/);
  return parts.length > 1 ? (parts[0] as string) : ROOT;
}

/** `./x.js` from src/a/b.ts → src/a/x.ts (the TypeScript file behind an ESM `.js` specifier). */
function resolveSpecifier(from: string, specifier: string): string {
  return normalize(join(dirname(from), specifier))
    .split("\\")
    .join("/")
    .replace(/\.js$/, ".ts");
}

function parse(path: string): SourceFile {
  const text = readFileSync(path, "utf8");
  const source = ts.createSourceFile(path, text, ts.ScriptTarget.Latest, true);
  const lineOf = (node: ts.Node) => source.getLineAndCharacterOfPosition(node.getStart(source)).line + 1;
  const imports: Import[] = [];
  const sqlLiterals: SourceFile["sqlLiterals"] = [];
  const addImport = (node: ts.Node, specifier: ts.Expression | undefined) => {
    if (!specifier || !ts.isStringLiteralLike(specifier) || !specifier.text.startsWith(".")) return;
    imports.push({
      from: path,
      to: resolveSpecifier(path, specifier.text),
      line: lineOf(node),
      specifier: specifier.text,
    });
  };
  const visit = (node: ts.Node): void => {
    if (ts.isImportDeclaration(node) || ts.isExportDeclaration(node)) addImport(node, node.moduleSpecifier);
    else if (ts.isCallExpression(node) && node.expression.kind === ts.SyntaxKind.ImportKeyword)
      addImport(node, node.arguments[0]);
    else if (ts.isStringLiteral(node) || ts.isNoSubstitutionTemplateLiteral(node)) {
      if (looksLikeSql(node.text)) sqlLiterals.push({ line: lineOf(node), text: node.text });
    } else if (ts.isTemplateExpression(node)) {
      if (looksLikeSql(node.head.text)) sqlLiterals.push({ line: lineOf(node), text: node.head.text });
    }
    ts.forEachChild(node, visit);
  };
  visit(source);
  return { path, lines: text.split("\n").length - (text.endsWith("\n") ? 1 : 0), imports, sqlLiterals };
}

const files = sourcePaths(SRC).map(parse);
const internalImports = files.flatMap((f) => f.imports).filter((i) => i.to.startsWith(`${SRC}/`));

/** The shortest path of folders from `start` to `goal` (both included), or undefined. */
function shortestPath(edges: Map<string, Set<string>>, start: string, goal: string): string[] | undefined {
  const previous = new Map<string, string>([[start, start]]);
  const queue = [start];
  while (queue.length > 0) {
    const node = queue.shift() as string;
    if (node === goal) {
      const path = [goal];
      while (path[0] !== start) path.unshift(previous.get(path[0] as string) as string);
      return path;
    }
    for (const next of [...(edges.get(node) ?? [])].sort())
      if (!previous.has(next)) {
        previous.set(next, node);
        queue.push(next);
      }
  }
  return undefined;
}

/**
 * Every cycle that an import edge A → B closes (A, B, the shortest way back from B to A),
 * once each, rotated to start at its smallest folder.
 */
function folderCycles(edges: Map<string, Set<string>>): string[][] {
  const cycles = new Map<string, string[]>();
  for (const [from, targets] of [...edges].sort())
    for (const to of [...targets].sort()) {
      const back = shortestPath(edges, to, from);
      if (!back) continue;
      const cycle = [from, ...back.slice(0, -1)];
      const first = cycle.indexOf([...cycle].sort()[0] as string);
      const rotated = [...cycle.slice(first), ...cycle.slice(0, first)];
      cycles.set(rotated.join(" → "), rotated);
    }
  return [...cycles.values()];
}

function report(title: string, violations: string[]): void {
  assert.equal(violations.length, 0, `${title} (${violations.length}):\n${violations.join("\n")}`);
}

describe("architecture", () => {
  it(`has no source file in src/ over ${MAX_LINES} lines`, () => {
    assert.ok(files.length > 10, "the sources were found");
    report(
      `source files over ${MAX_LINES} lines`,
      files.filter((f) => f.lines > MAX_LINES).map((f) => `${f.path}: ${f.lines} lines (max ${MAX_LINES})`),
    );
  });

  it("has no import cycle between the folders of src/", () => {
    const edges = new Map<string, Set<string>>();
    const examples = new Map<string, Import[]>();
    for (const i of internalImports) {
      const [from, to] = [folderOf(i.from), folderOf(i.to)];
      if (from === to) continue;
      if (!edges.has(from)) edges.set(from, new Set());
      edges.get(from)?.add(to);
      examples.set(`${from}→${to}`, [...(examples.get(`${from}→${to}`) ?? []), i]);
    }
    const hop = (from: string, to: string): string => {
      const through = examples.get(`${from}→${to}`) ?? [];
      const [first] = through;
      const more = through.length > 1 ? ` and ${through.length - 1} more` : "";
      return `${from} → ${to}: ${first?.from}:${first?.line} imports ${first?.specifier}${more}`;
    };
    const violations = folderCycles(edges).map((cycle) => {
      const hops = cycle.map((from, k) => hop(from, cycle[(k + 1) % cycle.length] as string));
      return `import cycle ${[...cycle, cycle[0]].join(" → ")} (${hops.join("; ")})`;
    });
    report("folder import cycles", violations);
  });

  it("keeps the layers: db ↛ queue; queue ↛ worker, api, cli; api ↛ worker", () => {
    const violations = internalImports
      .filter((i) => FORBIDDEN[folderOf(i.from)]?.includes(folderOf(i.to)))
      .map(
        (i) =>
          `${i.from}:${i.line}: ${folderOf(i.from)} must not import from ${folderOf(i.to)}: ${i.specifier} (${i.to})`,
      );
    report("layer violations", violations);
  });

  it("keeps SQL text under src/queue and src/db/migrations", () => {
    const violations = files
      .filter((f) => !SQL_HOMES.some((home) => f.path.startsWith(home)))
      .flatMap((f) =>
        f.sqlLiterals.map(
          (s) =>
            `${f.path}:${s.line}: SQL text outside src/queue: ${JSON.stringify(s.text.trim().slice(0, 60))}`,
        ),
      );
    report("SQL outside src/queue and src/db/migrations", violations);
  });

  it("reads imports, dynamic imports and SQL literals (the checks see what they check)", () => {
    const all = files.flatMap((f) => f.imports);
    assert.ok(
      all.some((i) => i.specifier.startsWith("..")),
      "relative imports across folders are found",
    );
    assert.ok(
      all.some((i) => i.from === "src/cli/service.ts" && i.to === "src/worker/handlers/index.ts"),
      'the dynamic import("../worker/handlers/index.js") of src/cli/service.ts is found',
    );
    assert.ok(SQL_START.test("SELECT 1 FROM x") && SQL_START.test("WITH due AS (SELECT 1)"));
    assert.ok(!looksLikeSql("Select a job type") && !looksLikeSql("UPDATE the docs"));
    assert.ok(looksLikeSql("LISTEN ") && looksLikeSql("NOTIFY job_channel, 'x'") && looksLikeSql("COMMIT"));
    assert.ok(!looksLikeSql("LISTEN connection lost; reconnecting"));
    assert.ok(
      files.some((f) => f.path.startsWith("src/queue/") && f.sqlLiterals.length > 0),
      "SQL in src/queue is seen",
    );
  });
});
