/**
 * Keeps the member in its group. When a heartbeat asks for a rejoin and that rejoin fails, the
 * client emits a plain 'error' and schedules no more heartbeats: the member is out of the group
 * and its stream receives nothing more. With no 'error' listener Node throws that error from
 * the socket's close handler, an uncaught exception (seen when a consumer closes mid-rebalance).
 * Here the error starts a rejoin, retried while the broker is unreachable; a rejoin that cannot
 * succeed ends the subscription with its error, so the runner sees it.
 *
 * @internal
 */
import type { GroupTimings } from "@effect-outbox/kafka/ConsumerOptions"
import * as Effect from "effect/Effect"
import * as Queue from "effect/Queue"
import type * as Scope from "effect/Scope"
import { toConsumerError } from "../PlatformaticErrors.ts"
import { brokerCall } from "../PlatformaticRetry.ts"
import { type AnyConsumer, notify, type State } from "./handoff.ts"

export type GroupOptions = GroupTimings

/** Listens for lost membership from now until the scope closes; call before the consumer joins. */
export const keepMembership = (
  consumer: AnyConsumer,
  state: State,
  groupOptions: GroupOptions
): Effect.Effect<void, never, Scope.Scope> =>
  Effect.gen(function* () {
    // Losses that arrive while a rejoin runs coalesce into one more rejoin.
    const lost = yield* Queue.sliding<unknown>(1)
    consumer.on("error", (error: unknown) => {
      if (!state.closed) Queue.offerUnsafe(lost, error)
    })
    const rejoin = Effect.andThen(
      Queue.take(lost),
      brokerCall("consumer.rejoin", () => consumer.joinGroup({ ...groupOptions })).pipe(
        Effect.asVoid,
        Effect.catch((error) =>
          Effect.sync(() => {
            if (state.closed) return
            state.failure ??= toConsumerError("rejoin", error)
            notify(state)
          })
        )
      )
    )
    yield* Effect.forkScoped(Effect.forever(rejoin))
  })
