/**
 * The one-connection completion of the sql-floor row: taskqueue's own fenced completion
 * (`writeDone`, imported, never copied) plus the unlock of every job of the batch, in one statement.
 * The worker does not use it (it writes and unlocks on two connections); it is the least SQL a
 * completed batch needs from one client. test/queue/plans.test.ts checks its plan.
 */
import { writeDone } from "../../../src/queue/sql/finish.js";
import { lockKey, type Statement, statement } from "../../../src/queue/sql/statement.js";

/** The select list of `writeDone`'s last line, which the unlock count joins. */
const REFUSED_IDS = "AS refused_ids";

/**
 * {@link writeDone} and the unlock in one statement.
 * $1–$6 as writeDone, $7 lock class. Returns `refused_ids` and `unlocked`.
 * @throws Error if writeDone's text no longer ends in the `refused_ids` select this extends.
 */
export const completeJobs = (schema: string): Statement => {
  const text = writeDone(schema).text;
  const at = text.lastIndexOf(REFUSED_IDS);
  if (at < 0) throw new Error("sql-floor: writeDone no longer selects refused_ids; update completeJobs");
  const end = at + REFUSED_IDS.length;
  const unlocked = `,\n            count(pg_advisory_unlock(${lockKey("$7", "i.id")}))::int AS unlocked`;
  return statement(schema, "complete_jobs", `${text.slice(0, end)}${unlocked}${text.slice(end)}`);
};
