/**
 * The graceful stop of one lane (DESIGN.md §6): stop claiming, give back claimed jobs not started,
 * let running handlers finish within the grace period (heartbeating them and the worker row all
 * along), then abort the rest and give them back to pending; release every lock, delete the worker
 * row last, close connections.
 */
import type { Logger } from "../log.js";
import type { Dispatcher } from "./dispatcher.js";
import type { StopReport } from "./events.js";
import type { NotifyListener } from "./listener.js";
import type { OutcomeWriter } from "./outcome-writer.js";
import type { HistoryPruner } from "./retention.js";
import type { SessionSupervisor } from "./session-supervisor.js";

/** The parts of a lane its stop goes through, in this order. */
export interface DrainingLane {
  /** Clears the poll and reaper timers. */
  stopClaimTimers(): void;
  /** Clears the heartbeat timer. */
  stopHeartbeat(): void;
  supervisor: SessionSupervisor;
  listener: NotifyListener | null;
  dispatcher: Dispatcher;
  writer: OutcomeWriter;
  /** The reaper pass in flight, if any. */
  reaping: Promise<void> | null;
  /** The retention passes (lane 1), stopped with the claim timers. */
  pruner: HistoryPruner | null;
  logger: Logger;
}

/**
 * Drains a lane that has entered `draining` (so it claims nothing more) and closes it. Never
 * throws. `graceSeconds` 0 aborts running handlers at once.
 */
export async function drainLane(lane: DrainingLane, graceSeconds: number): Promise<StopReport> {
  const { supervisor, dispatcher, writer } = lane;
  // The heartbeat goes on until the last outcome is written (below): a handler may run for the
  // whole grace period, and its job and the worker row must stay fresh for the reaper meanwhile.
  lane.stopClaimTimers();
  // A pruning pass in flight ends after its current batch.
  const pruned = lane.pruner?.stop();
  // A reconnect in flight ends first: its session, if it opened, is closed below.
  await supervisor.halt();
  dispatcher.cancelRetryWake();
  await lane.listener?.stop();
  await dispatcher.claimInFlight;
  const unstarted = dispatcher.takeUnstarted();
  const releasedJobIds = [...dispatcher.claimedWhileDraining, ...unstarted.map((job) => job.id)];
  for (const job of unstarted) writer.release(job);
  writer.scheduleFlush();

  await dispatcher.waitIdle(graceSeconds * 1000);
  const abandoned = dispatcher.abandonRunning();
  // Sandboxed handlers' processes end (aborted, SIGKILLed past the kill grace) before their jobs
  // are given back, so a given-back job no longer runs here when another worker claims it.
  await dispatcher.closeSandbox();
  const abandonedJobIds = abandoned.map((job) => job.id);
  for (const job of abandoned) writer.release(job);
  if (abandonedJobIds.length > 0)
    lane.logger.warn({ jobIds: abandonedJobIds }, "jobs still running at the grace deadline were given back");
  writer.scheduleFlush();
  await writer.drain();
  lane.stopHeartbeat();
  await lane.reaping;
  await pruned;
  // A failure in the last flush may have armed a retry wake-up; nothing is left to wake.
  dispatcher.cancelRetryWake();
  await supervisor.close(true);
  return { releasedJobIds, abandonedJobIds };
}
