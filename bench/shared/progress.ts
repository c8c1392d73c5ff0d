/** Progress bars on stderr (cli-progress), or nothing when stderr is not a terminal. */
import cliProgress from "cli-progress";

/** A progress bar; every method is a no-op when progress is disabled. */
export interface Progress {
  /** Sets the current value. */
  update(value: number): void;
  /** Adds to the current value. */
  increment(by?: number): void;
  /** Stops drawing (idempotent); the final state stays on screen. */
  stop(): void;
}

const NO_PROGRESS: Progress = { update() {}, increment() {}, stop() {} };

/**
 * A bar titled `label` counting up to `total`, drawn on stderr. Disabled (a no-op) when `enabled`
 * is false (`--no-progress`) or stderr is not a TTY, so piped output stays plain figures.
 */
export function startProgress(label: string, total: number, enabled: boolean): Progress {
  if (!enabled || !process.stderr.isTTY) return NO_PROGRESS;
  const bar = new cliProgress.SingleBar(
    {
      format: `${label.padEnd(22)} [{bar}] {percentage}% | {value}/{total} | {duration_formatted}`,
      stream: process.stderr,
      hideCursor: true,
      fps: 10,
    },
    cliProgress.Presets.shades_classic,
  );
  bar.start(total, 0);
  let stopped = false;
  return {
    update: (value) => bar.update(value),
    increment: (by = 1) => bar.increment(by),
    stop: () => {
      if (stopped) return;
      stopped = true;
      bar.stop();
    },
  };
}
