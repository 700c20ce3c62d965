/**
 * The outbox table on PostgreSQL: the core `OutboxStore` port over `<prefix>message`.
 *
 * - `insert` runs on the ambient `SqlClient` transaction: one statement for the batch
 *   (`unnest` of typed arrays), `seq` assigned in the batch's order. It trusts core's one
 *   validation (`Outbox.prepare`). With `notify` on (the in-transaction wake-up mode), the same
 *   statement queues the wake-up `pg_notify` (delivered on commit, dropped on rollback) and
 *   reports it (`wakeUpQueued`), so `Outbox.enqueue` does not call `WakeUp.notify` as well.
 * - `claim` is one round trip to the `<prefix>claim` PL/pgSQL function: per-key advisory locks
 *   then a fresh snapshot, so two relays never split a key (see `docs/postgres.md`).
 * - `transition` is one statement per batch: lock the rows, decide each compare-and-set, update,
 *   report outcomes in request order.
 * - `purge` deletes in bounded batches, skips locked rows and lets one cleaner run at a time; the
 *   recorded transitions (`<prefix>transition`) of the rows it deletes go in the same statement.
 *
 * @since 0.1.0
 */

import { StoreError } from "@effect-outbox/core/Errors"
import { OutboxStore } from "@effect-outbox/core/OutboxStore"
import * as Duration from "effect/Duration"
import * as Effect from "effect/Effect"
import * as Layer from "effect/Layer"
import * as SqlClient from "effect/sql/SqlClient"
import { run } from "./internal/errors.ts"
import { insert } from "./internal/insert.ts"
import { ts } from "./internal/params.ts"
import { purge } from "./internal/purge.ts"
import { get, list, stats } from "./internal/reads.ts"
import { acquireRecoveryLease, findStale, relayHeartbeat, releaseRecoveryLease } from "./internal/recovery.ts"
import { bySeq, type MessageRow, toMessage } from "./internal/rows.ts"
import { makeTransition } from "./internal/transitionBatch.ts"
import { PgTables } from "./PgTables.ts"

/**
 * @since 0.1.0
 * @category models
 */
export interface Options {
  /**
   * Queue the wake-up `NOTIFY` inside the insert statement when it stores `PENDING` rows (the
   * in-transaction mode; it serialises concurrent commits). Default `false`; `PgOutbox.layer`
   * turns it on with `wakeUp.notifyInTransaction`.
   */
  readonly notify?: boolean | undefined
  /** Append every applied transition to `<prefix>transition` in the same statement. Default `false`. */
  readonly recordTransitions?: boolean | undefined
  /**
   * The relay's calls (`claim`, `transition`, `findStale`) give up after this long with a
   * retriable `StoreError` and cancel their statement, so a half-open connection or a
   * stuck lock cannot hang a relay; the relay retries at its next poll. Default 30 s.
   */
  readonly callTimeout?: Duration.Input | undefined
}

/**
 * @since 0.1.0
 * @category constructors
 */
export const make = (options: Options = {}) =>
  Effect.gen(function* () {
    const sql = yield* SqlClient.SqlClient
    const t = yield* PgTables
    const callTimeout = Duration.fromInputUnsafe(options.callTimeout ?? Duration.seconds(30))
    const bounded =
      (operation: string) =>
      <A, R>(effect: Effect.Effect<A, StoreError, R>) =>
        Effect.timeoutOrElse(effect, {
          duration: callTimeout,
          orElse: () =>
            Effect.fail(
              new StoreError({
                operation,
                reason:
                  `no answer from PostgreSQL within ${Duration.format(callTimeout)} (a half-open connection, ` +
                  `or a lock held elsewhere); the statement was cancelled, retry`,
                kind: "unavailable"
              })
            )
        })
    const transition = makeTransition(sql, t, options.recordTransitions ?? false)

    return OutboxStore.of({
      insert: insert(sql, t, options.notify ?? false),
      claim: (request) =>
        request.limit <= 0
          ? Effect.succeed([])
          : sql<MessageRow>`SELECT * FROM ${sql.literal(t.claimFunction)}(
              ${request.owner}::text, ${Math.trunc(request.limit)}::int4, ${Math.max(1, Math.trunc(request.maxPerKey))}::int4,
              ${ts(request.now)}, ${Math.max(0, Math.trunc(request.leaseMillis))}::int8,
              ${(request.failedHead ?? "block") === "block"}::bool)`.withoutTransform.pipe(
              Effect.map((rows) => rows.map(toMessage).sort(bySeq)),
              run("outbox.claim"),
              bounded("outbox.claim")
            ),
      transition: (requests) =>
        requests.length === 0
          ? Effect.succeed([])
          : transition(requests).pipe(run("outbox.transition"), bounded("outbox.transition")),
      findStale: (request) => findStale(sql, t)(request).pipe(run("outbox.findStale"), bounded("outbox.findStale")),
      acquireRecoveryLease: (request) => acquireRecoveryLease(sql, t)(request).pipe(run("outbox.acquireRecoveryLease")),
      releaseRecoveryLease: (owner) => releaseRecoveryLease(sql, t)(owner).pipe(run("outbox.releaseRecoveryLease")),
      relayHeartbeat: (request) => relayHeartbeat(sql, t)(request).pipe(run("outbox.relayHeartbeat")),
      get: (id) => get(sql, t)(id).pipe(run("outbox.get")),
      list: (filter) => list(sql, t)(filter).pipe(run("outbox.list")),
      stats: (now) => stats(sql, t)(now).pipe(run("outbox.stats")),
      purge: (request) => purge(sql, t)(request).pipe(run("outbox.purge"))
    })
  })

/**
 * The store over the ambient `SqlClient`, in the tables of {@link PgTables}.
 *
 * @since 0.1.0
 * @category layers
 */
export const layer = (options: Options = {}): Layer.Layer<OutboxStore, never, SqlClient.SqlClient | PgTables> =>
  Layer.effect(OutboxStore)(make(options))
