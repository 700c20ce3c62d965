/**
 * `ConsumerSource` over the in-memory broker: consumer groups with committed offsets, partitions
 * split among live members, positions that start at the committed offset (so an uncommitted
 * record is redelivered to the next member), and waits on the change signal instead of sleeps.
 * The group bookkeeping is in `brokerGroups.ts`, a member's subscription in `brokerSubscription.ts`.
 *
 * @internal
 */
import type { ConsumerSource } from "@effect-outbox/core/ConsumerSource"
import { ConsumerSourceError } from "@effect-outbox/core/Errors"
import * as Clock from "effect/Clock"
import * as Effect from "effect/Effect"
import type { BrokerEngine, Member } from "./brokerEngine.ts"
import { assignment, coordinatorWait, groupOf, syncPositions } from "./brokerGroups.ts"
import * as Outage from "./brokerOutage.ts"
import * as Subscription from "./brokerSubscription.ts"

type SubscribeOptions = Parameters<ConsumerSource["Service"]["subscribe"]>[0]

/** Adds a member to its group for the scope's lifetime; leaving rebalances its partitions at once. */
const join = (source: Subscription.Source, options: SubscribeOptions, joinedAt: number) => {
  const { engine } = source
  return Effect.acquireRelease(
    Effect.sync(() => {
      const member: Member = {
        id: source.newMemberId(),
        groupId: options.groupId,
        topics: [...new Set(options.topics)].sort(),
        fromBeginning: options.fromBeginning ?? true,
        positions: new Map(),
        assignments: new Map(),
        paused: new Set(),
        cursor: 0,
        closed: false
      }
      const group = groupOf(engine, options.groupId, joinedAt)
      group.members.push(member)
      // Positions are fixed when the member joins, as Kafka resolves them on assignment.
      syncPositions(engine, member, assignment(engine, member), source.newAssignment)
      engine.notify()
      return member
    }),
    (member) =>
      Effect.sync(() => {
        member.closed = true
        const group = groupOf(engine, member.groupId)
        group.members.splice(group.members.indexOf(member), 1)
        engine.notify()
      })
  )
}

export const make = (engine: BrokerEngine, maxBatchSize: number): ConsumerSource["Service"] => {
  let nextMemberId = 1
  let nextAssignment = 1
  const source: Subscription.Source = {
    engine,
    maxBatchSize,
    newMemberId: () => nextMemberId++,
    newAssignment: () => nextAssignment++
  }
  return {
    subscribe: (options) =>
      Effect.gen(function* () {
        yield* Outage.gate(
          engine,
          (reason) => new ConsumerSourceError({ operation: "subscribe", reason, retriable: true })
        )
        const joinedAt = yield* Clock.currentTimeMillis
        // The first group call starts the coordinator loading.
        coordinatorWait(engine, joinedAt)
        const member = yield* join(source, options, joinedAt)
        return Subscription.make(source, member)
      })
  }
}
