/**
 * The common shape of a queue system's adapter: a system supplies three primitives (insert a batch,
 * insert one job, start workers whose handler calls a sink) plus setup/seed/clear/close, and this
 * class turns them into the measurements of {@link SystemAdapter}, identically for every system.
 */
import {
  Countdown,
  drainPayloads,
  inBatches,
  PickupProbe,
  runConcurrently,
  sleep,
  untilAborted,
  warmUp,
  within,
} from "./harness.js";
import type {
  BenchContext,
  BenchPayload,
  JobSink,
  Phase,
  PickupResult,
  SystemAdapter,
  SystemName,
} from "./types.js";

/** Idle time given to a freshly started worker before and after the warm-up jobs. */
const IDLE_MS = 500;
/** Jobs sent (and waited for) before a pickup measurement; not measured. */
const WARM_UP_JOBS = 20;
/** Longest wait for workers to stop. */
const STOP_TIMEOUT_MS = 30_000;

/** Stops the workers that {@link QueueAdapter.startWorkers} started. */
export type StopWorkers = () => Promise<void>;

export abstract class QueueAdapter implements SystemAdapter {
  abstract readonly system: SystemName;
  abstract readonly settings: string;
  abstract readonly backend: string;
  readonly unsupported: Partial<Record<Phase, string>> = {};
  readonly notes: string[] = [];
  private stopRunning: StopWorkers | null = null;

  constructor(protected readonly ctx: BenchContext) {}

  abstract setup(): Promise<void>;
  abstract seedFinished(count: number, signal: AbortSignal): Promise<void>;
  abstract clear(): Promise<void>;
  /** Closes the system's connections and drops its schema or keys. */
  protected abstract close(): Promise<void>;

  /** One bulk call with these payloads. */
  protected abstract insertBatch(payloads: BenchPayload[]): Promise<unknown>;
  /** One single-job enqueue call. */
  protected abstract insertOne(payload: BenchPayload): Promise<unknown>;
  /**
   * Starts the system's workers with a noop handler whose first statement is `sink(payload)`,
   * once per job. Resolves when they run; returns how to stop them (gracefully).
   */
  protected abstract startWorkers(sink: JobSink, purpose: "drain" | "pickup"): Promise<StopWorkers>;

  /** Adds a note once. */
  protected note(text: string): void {
    if (!this.notes.includes(text)) this.notes.push(text);
  }

  enqueueBulk(count: number, batchSize: number, signal: AbortSignal): Promise<void> {
    return inBatches(count, batchSize, signal, (_, size) => this.insertBatch(drainPayloads(size)));
  }

  enqueueSingle(count: number, inFlight: number, signal: AbortSignal): Promise<void> {
    return runConcurrently(count, inFlight, signal, () => this.insertOne({ i: -1 }));
  }

  async drain(count: number, signal: AbortSignal, drained?: () => Promise<void>): Promise<number> {
    const countdown = new Countdown(count);
    const started = performance.now();
    await this.start(() => countdown.hit(), "drain");
    try {
      await untilAborted(countdown.done, signal);
      await drained?.();
    } finally {
      await this.stopWorkers();
    }
    return countdown.lastAt - started;
  }

  async pickup(samples: number, intervalMs: number, signal: AbortSignal): Promise<PickupResult> {
    const probe = new PickupProbe(samples);
    let handled = 0;
    await this.start((payload) => {
      probe.record(payload);
      handled++;
    }, "pickup");
    try {
      await sleep(IDLE_MS, signal);
      await warmUp(
        WARM_UP_JOBS,
        (p) => this.insertOne(p),
        () => handled,
        signal,
      );
      await sleep(IDLE_MS, signal);
      return await probe.drive(intervalMs, (p) => this.insertOne(p), signal);
    } finally {
      await this.stopWorkers();
    }
  }

  async abort(): Promise<void> {
    await this.stopWorkers();
  }

  async teardown(): Promise<void> {
    await this.stopWorkers();
    try {
      await within(this.close(), STOP_TIMEOUT_MS, `${this.system} close`);
    } catch (error) {
      this.note(`teardown: ${error instanceof Error ? error.message : String(error)}`);
    }
  }

  private async start(sink: JobSink, purpose: "drain" | "pickup"): Promise<void> {
    await this.stopWorkers();
    this.stopRunning = await this.startWorkers(sink, purpose);
  }

  /** Stops running workers, if any; idempotent, bounded, never throws. */
  protected async stopWorkers(): Promise<void> {
    const stop = this.stopRunning;
    this.stopRunning = null;
    if (!stop) return;
    try {
      await within(stop(), STOP_TIMEOUT_MS, `${this.system} worker stop`);
    } catch (error) {
      this.note(`worker stop: ${error instanceof Error ? error.message : String(error)}`);
    }
  }
}
