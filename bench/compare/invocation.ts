/**
 * How a run was invoked, for the .meta.json: the command as a person would retype it, with the
 * `--baseline` directory written relative to the current directory (no absolute path of the
 * machine goes into a results file).
 */
import { readFileSync } from "node:fs";
import { isAbsolute, relative, resolve } from "node:path";
import { fileURLToPath } from "node:url";

/**
 * `argv` with the value of `--baseline DIR` / `--baseline=DIR` made relative to `cwd` ("." for
 * `cwd` itself); every other word as it was.
 */
export function shareableArgv(argv: readonly string[], cwd: string = process.cwd()): string[] {
  const rel = (dir: string) => (isAbsolute(dir) ? relative(cwd, resolve(dir)) || "." : dir);
  const out: string[] = [];
  for (let i = 0; i < argv.length; i++) {
    const word = argv[i] as string;
    if (word === "--baseline" && i + 1 < argv.length) {
      out.push(word, rel(argv[i + 1] as string));
      i++;
    } else if (word.startsWith("--baseline="))
      out.push(`--baseline=${rel(word.slice("--baseline=".length))}`);
    else out.push(word);
  }
  return out;
}

/** The command line of process `pid` (Linux /proc; words, whether NUL- or space-separated) and its parent. */
function procInfo(pid: number): { words: string[]; ppid: number } | null {
  try {
    const words = readFileSync(`/proc/${pid}/cmdline`, "utf8")
      .split(/[\0 ]+/)
      .filter(Boolean);
    const stat = readFileSync(`/proc/${pid}/stat`, "utf8");
    const ppid = Number(stat.slice(stat.lastIndexOf(")") + 2).split(" ")[1]);
    return { words, ppid };
  } catch {
    return null;
  }
}

/**
 * How this run was invoked, as a person would retype it: `npm run bench:compare -- <flags>` when an
 * ancestor process is that npm script (npx hides it from the environment), else the node command.
 */
export function commandLine(argv: string[]): string {
  let pid = process.ppid;
  for (let depth = 0; depth < 8 && pid > 1; depth++) {
    const info = procInfo(pid);
    if (!info) break;
    const at = info.words.indexOf("bench:compare");
    if (at > 0 && ["run", "run-script"].includes(info.words[at - 1] ?? ""))
      return `npm run bench:compare${argv.length > 0 ? ` -- ${argv.join(" ")}` : ""}`;
    pid = info.ppid;
  }
  return nodeCommand(argv);
}

/** `node dist/bench/compare/run.js <argv>`, the path relative to the current directory. */
export function nodeCommand(argv: string[]): string {
  const script = fileURLToPath(new URL("./run.js", import.meta.url));
  return ["node", relative(process.cwd(), script), ...argv].join(" ");
}
