/** Waiters for a lane's handlers to be idle (the graceful stop waits for them, within a bound). */
export class IdleWaiters {
  private waiters: (() => void)[] = [];

  /** Resolves at the next {@link notify}, or after `timeoutMs`. */
  async wait(timeoutMs: number): Promise<void> {
    let timer: NodeJS.Timeout | undefined;
    await Promise.race([
      new Promise<void>((resolve) => this.waiters.push(resolve)),
      new Promise<void>((resolve) => {
        timer = setTimeout(resolve, timeoutMs);
      }),
    ]);
    clearTimeout(timer);
  }

  /** Resolves every waiter. */
  notify(): void {
    for (const resolve of this.waiters.splice(0)) resolve();
  }
}
