/** Waiting on events instead of sleeping. Every wait has a timeout that fails the test. */
import type { EventEmitter } from "node:events";

/**
 * Resolves with the first `event` whose arguments satisfy `match`; rejects after `timeoutMs`.
 * Attach before triggering the action to avoid missing the event.
 */
export function waitForEvent<T extends unknown[]>(
  emitter: EventEmitter,
  event: string,
  match: (...args: T) => boolean = () => true,
  timeoutMs = 30_000,
): Promise<T> {
  return new Promise((resolve, reject) => {
    const timer = setTimeout(() => {
      emitter.off(event, listener);
      reject(new Error(`timed out after ${timeoutMs} ms waiting for ${event}`));
    }, timeoutMs);
    const listener = (...args: unknown[]) => {
      if (!match(...(args as T))) return;
      clearTimeout(timer);
      emitter.off(event, listener);
      resolve(args as T);
    };
    emitter.on(event, listener);
  });
}

/** Resolves once `count` events satisfying `match` have fired. */
export function waitForEvents<T extends unknown[]>(
  emitter: EventEmitter,
  event: string,
  count: number,
  match: (...args: T) => boolean = () => true,
  timeoutMs = 30_000,
): Promise<void> {
  let seen = 0;
  return waitForEvent<T>(emitter, event, (...args) => match(...args) && ++seen >= count, timeoutMs).then(
    () => undefined,
  );
}
