/**
 * `taskqueue/prisma`: enqueue inside a Prisma interactive transaction (Prisma 7 with
 * `@prisma/adapter-pg`, or any PostgreSQL setup where `$queryRawUnsafe` is available).
 *
 * ```ts
 * import { prismaClient } from "taskqueue/prisma";
 * await prisma.$transaction(async (tx) => {
 *   await tx.order.create({ data: order });
 *   await queue.addJob({ type: "send_receipt", payload: { orderId: order.id } }, { client: prismaClient(tx) });
 * }); // the job exists only if this commits
 * ```
 */
import type { Queryable } from "../db/pool.js";
import { rawClient } from "./raw-client.js";

/** What the adapter needs of a Prisma client or transaction client. */
export interface PrismaRaw {
  // biome-ignore lint/suspicious/noExplicitAny: Prisma's own signature
  $queryRawUnsafe<T = unknown>(query: string, ...values: any[]): PromiseLike<T>;
}

/**
 * A client for `addJob`/`addJobs` (`{ client }`) that runs the insert on `db`: the `tx` of
 * `prisma.$transaction(async (tx) => …)` to enqueue atomically with it, or the client (autocommit).
 */
export function prismaClient(db: PrismaRaw): Queryable {
  return rawClient(async (text, values) => db.$queryRawUnsafe<Record<string, unknown>[]>(text, ...values));
}
