/**
 * The ordering rules of the lock session, seen from outside: (a) a job's lock is released only
 * after its outcome has committed (src/queue/lock-session.ts); (b) workers are woken only after the
 * unlock (src/queue/session/unlock-queue.ts); (c) a written batch is reported before a re-claim of
 * the same job is announced or run (src/worker/dispatcher.ts, `Dispatcher.claimLoop`).
 */
import assert from "node:assert/strict";
import { after, before, describe, it } from "node:test";
import pg from "pg";
import { CLAIMED_FIELDS } from "../../src/queue/job-shape.js";
import type { Worker } from "../../src/worker/worker.js";
import { createTestDb, DATABASE_URL, type TestDb } from "../helpers/db.js";
import { waitForEvent } from "../helpers/events.js";
import { until } from "../helpers/process.js";
import { startWorker } from "../helpers/worker.js";

let db: TestDb;
before(async () => {
  db = await createTestDb();
});
after(async () => {
  await db.drop();
});

it("a worker woken by a give-back's NOTIFY claims the job at once: its lock was released first", async () => {
  const job = await db.ledger.addJob({ type: "noop" });
  const owner = await db.openLockSession("w1");
  const other = await db.openLockSession("w2");
  assert.equal((await owner.claim(["noop"], 1))[0]?.id, job.id);
  const listener = await db.pool.connect();
  try {
    await listener.query(`LISTEN "${db.config.notifyChannel}"`);
    // The claim is sent from the notification handler itself, before anything else of the owner's
    // unlock is awaited: what it finds is the state the NOTIFY announced.
    const claimedOnWake = new Promise<number[]>((resolve, reject) => {
      const timer = setTimeout(() => reject(new Error("no NOTIFY within 10 s")), 10_000);
      listener.once("notification", () => {
        clearTimeout(timer);
        other.claim(["noop"], 1).then((jobs) => resolve(jobs.map((j) => j.id)), reject);
      });
    });
    const released = await owner.writeReleases([{ id: job.id, attempt: 0 }]);
    assert.deepEqual(await claimedOnWake, [job.id], "the woken worker found the job pending and unlocked");
    await released.unlocked;
    assert.deepEqual(await other.release([{ id: job.id, attempt: 0 }]), [], "given back by the woken worker");
  } finally {
    await listener.query("UNLISTEN *");
    listener.release();
  }
});

it("a job's lock stays held while its completion waits on the job's row, with the lock connection idle", async () => {
  // No poll and no pipelined claim can queue on the lock connection: an unlock asked for before
  // the write committed would go out at once.
  let open: () => void = () => undefined;
  const opened = new Promise<void>((resolve) => {
    open = resolve;
  });
  const worker = await startWorker(db, {
    handlers: { held: () => opened.then(() => null) },
    config: { pollIntervalSeconds: 3600 },
  });
  const blocker = new pg.Client({ connectionString: DATABASE_URL });
  await blocker.connect();
  try {
    const job = await db.ledger.addJob({ type: "held" });
    await until(async () => (await db.ledger.getJob(job.id))?.status === "running", 20_000, "running");
    // Only the job's row is held: the completion waits, claims (SKIP LOCKED) would not.
    await blocker.query("BEGIN");
    await blocker.query(`SELECT 1 FROM "${db.schema}".jobs WHERE id = $1 FOR UPDATE`, [job.id]);
    const completed = waitForEvent<[{ id: number }]>(worker, "job:completed", (e) => e.id === job.id);
    open();
    await until(
      async () =>
        (
          await db.sql<{ n: number }>(
            "SELECT count(*)::int AS n FROM pg_stat_activity WHERE application_name = 'taskqueue writes ' || $1 AND wait_event_type = 'Lock'",
            [worker.id],
          )
        )[0]?.n === 1,
      20_000,
      "the completion waiting on the row lock",
    );
    // The wait above took several round trips: an unlock asked for too early has run by now.
    assert.equal((await db.ledger.getJob(job.id))?.status, "running", "the outcome has not committed");
    assert.deepEqual(
      (await db.ledger.heldJobLocks()).map((l) => l.jobKey),
      [job.id],
      "lock held until commit",
    );
    await blocker.query("COMMIT");
    await completed;
    assert.deepEqual(await db.ledger.heldJobLocks(), [], "released once the outcome committed");
  } finally {
    open();
    await blocker.query("ROLLBACK").catch(() => undefined);
    await blocker.end();
    await worker.stop();
  }
});

type Query = (this: pg.Client, ...args: unknown[]) => unknown;
type Role = "writes" | "lock session";

/** One watched statement: its answer's arrival in Node, and whether the answer is held there. */
interface Watch {
  role: Role;
  statement: string;
  match: (rows: readonly unknown[]) => boolean;
  hold: boolean;
  arrived: () => void;
  released: Promise<void>;
}

/**
 * Watches, in Node, the answers of statements named `taskqueue_<statement>_…` that a taskqueue
 * connection of `role` (application name `taskqueue <role> <worker id>`) sends, and can hold one
 * back: the statement runs and commits on the server as usual; only the promise its caller gets is
 * held until `release()`. A delay on the client side of a real connection, not a mock of the
 * database: `pg.Client.prototype.query` is wrapped in this test file's process until `restore()`.
 */
function interceptAnswers() {
  const proto = pg.Client.prototype as unknown as { query: Query };
  const original = proto.query;
  const watches: Watch[] = [];
  const releases: (() => void)[] = [];
  proto.query = function (this: pg.Client, ...args: unknown[]): unknown {
    const result = original.apply(this, args);
    const config = args[0];
    const name =
      typeof config === "object" && config !== null ? (config as { name?: unknown }).name : undefined;
    const application =
      (this as unknown as { connectionParameters?: { application_name?: string } }).connectionParameters
        ?.application_name ?? "";
    const candidates = watches.filter(
      (w) =>
        typeof name === "string" &&
        name.startsWith(`taskqueue_${w.statement}_`) &&
        application.startsWith(`taskqueue ${w.role} `),
    );
    if (candidates.length === 0 || !(result instanceof Promise)) return result;
    return result.then(async (value: unknown) => {
      const rows = (value as { rows?: unknown[] }).rows ?? [];
      for (const w of candidates) {
        if (!watches.includes(w) || !w.match(rows)) continue;
        watches.splice(watches.indexOf(w), 1);
        w.arrived();
        if (w.hold) await w.released;
      }
      return value;
    });
  };
  const watch = (role: Role, statement: string, hold: boolean, match: Watch["match"]) => {
    let arrived: () => void = () => undefined;
    const seen = new Promise<void>((resolve) => {
      arrived = resolve;
    });
    let release: () => void = () => undefined;
    const released = new Promise<void>((resolve) => {
      release = resolve;
    });
    releases.push(release);
    watches.push({ role, statement, match, hold, arrived, released });
    return { arrived: seen, release };
  };
  return {
    /** Holds the next answer of `statement` on a `role` connection; `arrived`: it reached Node. */
    hold: (role: Role, statement: string) => watch(role, statement, true, () => true),
    /** Resolves once an answer of `statement` on a `role` connection with rows matching has reached Node. */
    seen: (role: Role, statement: string, match: Watch["match"]) =>
      watch(role, statement, false, match).arrived,
    restore: () => {
      proto.query = original;
      for (const release of releases) release();
    },
  };
}

/** A claim answer with attempt 1 of job `id` in it. */
/** A claim's answer (rows in array mode: CLAIMED_FIELDS in order, sql/claim.ts) holds attempt 1 of `id`. */
const hasRetryOf = (id: number) => (rows: readonly unknown[]) =>
  rows.some((row) => {
    const fields = row as unknown[];
    return fields[CLAIMED_FIELDS.indexOf("id")] === id && fields[CLAIMED_FIELDS.indexOf("attempt")] === 1;
  });

/** Lets every callback of the current turn run (an answer's handling is a chain of microtasks). */
const nextTurn = () => new Promise<void>((resolve) => setImmediate(resolve));

/** A worker whose `fail-once` jobs fail their attempt 0, retried at once; records what it does. */
async function failOnceWorker(lockSessions: number): Promise<{ worker: Worker; order: string[] }> {
  const order: string[] = [];
  const worker = await startWorker(db, {
    // No poll: only the claims the test asks for (and those the worker pipelines) go out.
    config: {
      backoffBaseSeconds: 0,
      backoffMaxSeconds: 0,
      pollIntervalSeconds: 3600,
      workerCount: lockSessions,
      lockSessions,
    },
    handlers: {
      "fail-once": async (job) => {
        order.push(`run ${job.id}/${job.attempt}`);
        if (job.attempt === 0) throw new Error("first attempt fails");
        return null;
      },
    },
  });
  worker.on("job:claimed", ({ jobs }) => {
    for (const j of jobs) order.push(`claimed ${j.id}/${j.attempt}`);
  });
  worker.on("job:failed", ({ id }) => order.push(`failed ${id}`));
  worker.on("job:completed", ({ id }) => order.push(`completed ${id}`));
  return { worker, order };
}

/**
 * The second half of the rule (c) tests, once a failure's answer is held and the job due again:
 * a claim takes the job again (`retryClaimed`), yet neither announces nor runs attempt 1 before
 * the held answer is released and the failure reported; then the events come in attempt order.
 */
async function expectReportBeforeRetry(p: {
  worker: Worker;
  order: string[];
  jobId: number;
  held: { release(): void };
  retryClaimed: Promise<unknown>;
  completed: Promise<unknown>;
}): Promise<void> {
  const { order, jobId } = p;
  p.worker.wake();
  await p.retryClaimed;
  await nextTurn();
  assert.deepEqual(order, [`claimed ${jobId}/0`, `run ${jobId}/0`], "attempt 1 neither announced nor run");
  p.held.release();
  await p.completed;
  assert.deepEqual(order, [
    `claimed ${jobId}/0`,
    `run ${jobId}/0`,
    `failed ${jobId}`,
    `claimed ${jobId}/1`,
    `run ${jobId}/1`,
    `completed ${jobId}`,
  ]);
  await until(async () => (await db.ledger.heldJobLocks()).length === 0, 20_000, "every lock released");
}

describe("rule (c): a written batch is reported before a re-claim of the same job is announced or run", () => {
  it("one lock session: a failure committed but not yet answered in Node, re-claimed through the session's own advisory lock", {
    timeout: 30_000,
  }, async () => {
    const answers = interceptAnswers();
    const held = answers.hold("writes", "write_failures");
    let worker: Worker | undefined;
    try {
      const started = await failOnceWorker(1);
      worker = started.worker;
      const { order } = started;
      const job = await db.ledger.addJob({ type: "fail-once" });
      const completed = waitForEvent<[{ id: number }]>(worker, "job:completed", (e) => e.id === job.id);
      completed.catch(() => undefined); // awaited below; a failure before that fails the test alone
      const retryClaimed = answers.seen("lock session", "claim_jobs", hasRetryOf(job.id));
      await held.arrived;
      // The failure has committed: the job is pending and due, and its lock is still held (the
      // unlock is asked for only once the write's answer is handled).
      const row = await db.ledger.getJob(job.id);
      assert.deepEqual([row?.status, row?.attempt], ["pending", 1]);
      assert.deepEqual(
        (await db.ledger.heldJobLocks()).map((l) => l.jobKey),
        [job.id],
      );
      // A claim on the lock connection takes it again: pg_try_advisory_lock succeeds for the
      // session that already holds the lock.
      await expectReportBeforeRetry({ worker, order, jobId: job.id, held, retryClaimed, completed });
    } finally {
      answers.restore();
      await worker?.stop();
    }
  });

  it("two lock sessions: a failure unlocked on the server but not yet answered in Node, re-claimed by the other lane", {
    timeout: 30_000,
  }, async () => {
    const answers = interceptAnswers();
    const held = answers.hold("lock session", "unlock_jobs");
    let worker: Worker | undefined;
    try {
      const started = await failOnceWorker(2);
      worker = started.worker;
      const { order } = started;
      const job = await db.ledger.addJob({ type: "fail-once" });
      const completed = waitForEvent<[{ id: number }]>(worker, "job:completed", (e) => e.id === job.id);
      completed.catch(() => undefined); // awaited below; a failure before that fails the test alone
      const retryClaimed = answers.seen("lock session", "claim_jobs", hasRetryOf(job.id));
      await held.arrived;
      // The unlock (and its NOTIFY) has committed: the job is due and unlocked. The lane that
      // failed it cannot claim (its lock connection waits for the held answer); the other lane,
      // woken by the NOTIFY (or by the wake below), can, and may already have.
      await expectReportBeforeRetry({ worker, order, jobId: job.id, held, retryClaimed, completed });
    } finally {
      answers.restore();
      await worker?.stop();
    }
  });
});
