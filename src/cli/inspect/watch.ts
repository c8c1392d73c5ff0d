/**
 * `taskqueue inspect`: a terminal view of the queue read from the database (snapshot.ts, drawn by
 * render.ts). `--watch` redraws every interval until Ctrl-C, each frame fitted to the terminal so
 * that its title stays on the first row; a query that fails shows as an error line and the watch
 * goes on.
 */
import type { Ledger } from "../../queue/ledger.js";
import { renderSnapshot, type ScreenSize } from "./render.js";
import { takeSnapshot } from "./snapshot.js";

/** Clears the screen and puts the cursor home. */
const CLEAR = "\x1b[H\x1b[2J";

/** The terminal's size, or null when stdout is not a terminal. */
function screenSize(): ScreenSize {
  const { isTTY, columns, rows } = process.stdout;
  return isTTY ? { columns: columns || 80, rows: rows || 24 } : null;
}

/**
 * Prints one snapshot, or (`watchSeconds` set) redraws one every `watchSeconds` until the process
 * is stopped. Never throws for a failing query: it is shown.
 * @param livenessSeconds a worker counts as live if its heartbeat is younger than this.
 */
export async function inspect(
  ledger: Ledger,
  livenessSeconds: number,
  watchSeconds: number | null,
): Promise<void> {
  if (watchSeconds === null) {
    const size = screenSize();
    // One snapshot scrolls like any output: only the width is fitted.
    const lines = renderSnapshot(
      await takeSnapshot(ledger, livenessSeconds),
      size && { ...size, rows: 1000 },
    );
    process.stdout.write(`${lines.join("\n")}\n`);
    return;
  }
  for (;;) {
    const snapshot = await takeSnapshot(ledger, livenessSeconds);
    const size = screenSize() ?? { columns: 80, rows: 24 };
    const lines = renderSnapshot(snapshot, size, `every ${watchSeconds} s`);
    // No newline after the last row: on the terminal's last row it would scroll the title away.
    process.stdout.write(`${CLEAR}${lines.join("\n")}`);
    await new Promise((resolve) => setTimeout(resolve, watchSeconds * 1000));
  }
}
