/**
 * The database transaction port. `Outbox.enqueue` and `Inbox.processOnce` join the transaction
 * opened here, so the event or the processed-message record commits with the caller's state
 * change or not at all. Domain code opens it through `Outbox.withTransaction`, which
 * also provides the `Outbox.InTransaction` that enqueueing requires.
 *
 * @since 0.1.0
 */
import * as Context from "effect/Context"
import type * as Effect from "effect/Effect"
import type { StoreError } from "./Errors.ts"

/**
 * @since 0.1.0
 * @category services
 */
export class Transactor extends Context.Service<
  Transactor,
  {
    /**
     * Runs `effect` in one transaction: commits when it succeeds, rolls back when it fails, dies
     * or is interrupted. Nested calls join the outer transaction.
     */
    readonly withTransaction: <A, E, R>(effect: Effect.Effect<A, E, R>) => Effect.Effect<A, E | StoreError, R>
  }
>()("@effect-outbox/core/Transactor") {}
