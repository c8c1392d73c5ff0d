/**
 * The migration guides (docs/from-pg-boss.md, docs/from-graphile-worker.md, docs/from-bullmq.md)
 * show code that compiles. Every fenced block opened with ```` ```ts taskqueue ```` is type-checked
 * against this package's own types, imported as `"taskqueue"` and resolved through package.json
 * `exports` to dist/src as a user's code would be (so `npm run build` comes first, as `npm test`
 * does). Every block tagged with the peer's name (```` ```ts pg-boss ````, ```` ```ts graphile-worker ````,
 * ```` ```ts bullmq ````) is type-checked against that peer's installed types (the devDependencies
 * the comparison benchmark runs), so the "before" half of each pair is real API too.
 *
 * A guide's first block of a tag is its set-up: it is put before each later block of that tag,
 * which may use what it declares. {@link PRELUDE} declares the application's own objects the
 * guides take as given (`mailer`, `pool`). Nothing is written to disk: the blocks are virtual
 * files of one TypeScript program, compiled with the options of tsconfig.json.
 */
import assert from "node:assert/strict";
import { readFileSync } from "node:fs";
import { join } from "node:path";
import { describe, it } from "node:test";
import { fileURLToPath } from "node:url";
import ts from "typescript";

const ROOT = fileURLToPath(new URL("../../../", import.meta.url));

/** The guides, each with the tag of its peer's blocks; each holds at least {@link MIN_BLOCKS} of both tags. */
const GUIDES = [
  { file: "docs/from-pg-boss.md", peer: "pg-boss" },
  { file: "docs/from-graphile-worker.md", peer: "graphile-worker" },
  { file: "docs/from-bullmq.md", peer: "bullmq" },
] as const;
const MIN_BLOCKS = 8;

/** The application's own objects, as the guides' text introduces them (a global script). */
const PRELUDE = `
declare const mailer: {
  send(
    message: { to: string; template: string },
    options?: { signal?: AbortSignal; idempotencyKey?: string },
  ): Promise<void>;
};
declare const pool: import("pg").Pool;
`;

interface Block {
  guide: string;
  tag: string;
  /** 1-based line of the block's first code line in the guide. */
  line: number;
  code: string;
}

/** The ```` ```ts <tag> ```` blocks of a guide, in order. */
function blocksOf(file: string): Block[] {
  const text = readFileSync(join(ROOT, file), "utf8");
  const blocks: Block[] = [];
  const lines = text.split("\n");
  for (let i = 0; i < lines.length; i++) {
    const open = /^```ts ([a-z-]+)\s*$/.exec(lines[i] ?? "");
    if (!open) continue;
    const start = i + 1;
    let end = start;
    while (end < lines.length && lines[end] !== "```") end++;
    assert.ok(end < lines.length, `${file}:${start}: the block is not closed`);
    blocks.push({
      guide: file,
      tag: open[1] ?? "",
      line: start + 1,
      code: lines.slice(start, end).join("\n"),
    });
    i = end;
  }
  return blocks;
}

interface Snippet {
  /** Absolute virtual path (under docs/, so that `"taskqueue"` resolves to this package). */
  path: string;
  text: string;
  /** Lines of the set-up put before the block (0 for a set-up itself). */
  offset: number;
  block: Block;
}

/** One virtual module per block: the tag's set-up, then the block. */
function snippetsOf(blocks: Block[]): Snippet[] {
  const setups = new Map<string, Block>();
  return blocks.map((block, i) => {
    const setup = setups.get(`${block.guide} ${block.tag}`);
    if (!setup) setups.set(`${block.guide} ${block.tag}`, block);
    const head = setup ? `${setup.code}\n` : "";
    const name = block.guide.replace(/^docs\//, "").replace(/\.md$/, "");
    return {
      path: join(ROOT, "docs", `__${name}.${block.tag}.${i}.mts`),
      text: `${head}${block.code}\n`,
      offset: setup ? setup.code.split("\n").length : 0,
      block,
    };
  });
}

/** Type-checks the snippets as one program; answers the diagnostics of each, formatted. */
function typeCheck(snippets: Snippet[]): Map<Snippet, string[]> {
  const preludePath = join(ROOT, "docs", "__prelude.d.ts");
  const virtual = new Map<string, string>([
    [preludePath, PRELUDE],
    ...snippets.map((s) => [s.path, s.text] as const),
  ]);
  const { options, errors } = ts.convertCompilerOptionsFromJson(
    {
      target: "ES2022",
      module: "NodeNext",
      moduleResolution: "NodeNext",
      lib: ["ES2024"],
      types: ["node"],
      strict: true,
      noUncheckedIndexedAccess: true,
      skipLibCheck: true,
      noEmit: true,
    },
    ROOT,
  );
  assert.deepEqual(errors, []);
  const host = ts.createCompilerHost(options);
  const { fileExists, readFile, getSourceFile } = host;
  host.getCurrentDirectory = () => ROOT;
  host.fileExists = (path) => virtual.has(path) || fileExists.call(host, path);
  host.readFile = (path) => virtual.get(path) ?? readFile.call(host, path);
  host.getSourceFile = (path, language, ...rest) => {
    const text = virtual.get(path);
    return text === undefined
      ? getSourceFile.call(host, path, language, ...rest)
      : ts.createSourceFile(path, text, language, true);
  };
  const program = ts.createProgram([preludePath, ...virtual.keys()], options, host);
  const bySnippet = new Map<Snippet, string[]>(snippets.map((s) => [s, []]));
  for (const diagnostic of ts.getPreEmitDiagnostics(program)) {
    const message = ts.flattenDiagnosticMessageText(diagnostic.messageText, "\n");
    const snippet = snippets.find((s) => s.path === diagnostic.file?.fileName);
    if (!snippet || diagnostic.file === undefined || diagnostic.start === undefined) {
      assert.fail(`${diagnostic.file?.fileName ?? "(no file)"}: ${message}`);
    }
    const { line } = diagnostic.file.getLineAndCharacterOfPosition(diagnostic.start);
    const where =
      line < snippet.offset
        ? `its set-up, line ${line + 1}`
        : `${snippet.block.guide}:${snippet.block.line + line - snippet.offset}`;
    bySnippet.get(snippet)?.push(`${where}: ${message}`);
  }
  return bySnippet;
}

describe("migration guides: every code block compiles", () => {
  const blocks = GUIDES.flatMap((guide) => blocksOf(guide.file));
  const snippets = snippetsOf(blocks);
  // The control: the pg-boss guide's taskqueue set-up, then a job type its job map does not have.
  const setup = blocks.find((block) => block.tag === "taskqueue" && block.guide === GUIDES[0].file);
  assert.ok(setup, "the pg-boss guide has a taskqueue set-up block");
  const control: Snippet = {
    path: join(ROOT, "docs", "__control.mts"),
    text: `${setup.code}\nawait queue.addJob({ type: "welcome_emial", payload: { userId: 1, email: "a@example.com" } });\n`,
    offset: setup.code.split("\n").length,
    block: { ...setup, tag: "control" },
  };
  const diagnostics = typeCheck([...snippets, control]);

  for (const guide of GUIDES) {
    it(`${guide.file} has at least ${MIN_BLOCKS} blocks of taskqueue and of ${guide.peer}, and nothing else`, () => {
      const own = blocks.filter((b) => b.guide === guide.file);
      assert.ok(own.filter((b) => b.tag === "taskqueue").length >= MIN_BLOCKS);
      assert.ok(own.filter((b) => b.tag === guide.peer).length >= MIN_BLOCKS);
      assert.deepEqual(
        own
          .filter((b) => b.tag !== "taskqueue" && b.tag !== guide.peer)
          .map((b) => `${b.tag} at line ${b.line}`),
        [],
      );
    });
    it(`${guide.file}: the taskqueue and ${guide.peer} blocks type-check`, () => {
      const problems = snippets
        .filter((s) => s.block.guide === guide.file)
        .flatMap((s) => diagnostics.get(s) ?? []);
      assert.deepEqual(problems, []);
    });
  }

  it("a block that misspells a job type does not compile (the check can fail)", () => {
    const problems = diagnostics.get(control) ?? [];
    assert.ok(
      problems.some((p) => p.includes('"welcome_emial"')),
      problems.join("\n"),
    );
  });
});
