/**
 * Offset commits of a @platformatic/kafka subscription through the Kafka layer's `CommitFilter`.
 *
 * @internal
 */
import type { OffsetCommit } from "@effect-outbox/core/ConsumerSource"
import type { ConsumerSourceError } from "@effect-outbox/core/Errors"
import * as CommitFilter from "@effect-outbox/kafka/CommitFilter"
import type * as Effect from "effect/Effect"
import { protocol } from "../PlatformaticErrors.ts"
import { type AnyConsumer, owns, type State } from "./handoff.ts"

export const commit = (
  consumer: AnyConsumer,
  state: State,
  options: { readonly groupId: string; readonly timeoutMillis: number }
): ((offsets: ReadonlyArray<OffsetCommit>) => Effect.Effect<void, ConsumerSourceError>) =>
  CommitFilter.commit(
    protocol,
    {
      isClosed: () => state.closed,
      owns: (topic, partition) => owns(consumer, topic, partition),
      committed: state.committed,
      send: (commits) =>
        consumer.commit({
          offsets: commits.map((o) => ({
            topic: o.topic,
            partition: o.partition,
            offset: BigInt(o.offset),
            leaderEpoch: -1
          }))
        })
    },
    options
  )
