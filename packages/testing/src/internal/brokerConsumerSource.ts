/**
 * `ConsumerSource` over the in-memory broker: consumer groups with committed offsets, partitions
 * split among live members, positions that start at the committed offset (so an uncommitted
 * record is redelivered to the next member), and waits on the change signal instead of sleeps.
 *
 * @internal
 */
import type { ConsumerBatch, ConsumerRecord, ConsumerSource, Subscription } from "@effect-outbox/core/ConsumerSource"
import { ConsumerSourceError } from "@effect-outbox/core/Errors"
import * as Cause from "effect/Cause"
import * as Deferred from "effect/Deferred"
import * as Effect from "effect/Effect"
import * as Stream from "effect/Stream"
import { type BrokerEngine, type Group, type Member, toConsumerRecord, tp } from "./brokerEngine.ts"

export const make = (engine: BrokerEngine, maxBatchSize: number): ConsumerSource["Service"] => {
  const { groups, notify, operationFault, topics } = engine
  let nextMemberId = 1

  const groupOf = (groupId: string): Group => {
    let group = groups.get(groupId)
    if (group === undefined) {
      group = { committed: new Map(), members: [] }
      groups.set(groupId, group)
    }
    return group
  }

  /**
   * The partitions a member owns now: per topic, partition `p` goes to the `p mod n`-th live
   * member subscribed to it, in join order. Recomputed on every fetch, so joins, leaves and
   * partition growth rebalance at once.
   */
  const assignment = (member: Member): Array<{ topic: string; partition: number }> => {
    const group = groupOf(member.groupId)
    const owned: Array<{ topic: string; partition: number }> = []
    for (const topic of member.topics) {
      const logs = topics.get(topic)
      if (logs === undefined) continue
      const subscribers = group.members.filter((m) => m.topics.includes(topic))
      const index = subscribers.indexOf(member)
      for (let partition = 0; partition < logs.length; partition++) {
        if (partition % subscribers.length === index) owned.push({ topic, partition })
      }
    }
    return owned
  }

  /** Positions start at the group's committed offset, else the beginning or the end. */
  const syncPositions = (member: Member, owned: ReadonlyArray<{ topic: string; partition: number }>) => {
    const group = groupOf(member.groupId)
    const keys = new Set(owned.map((o) => tp(o.topic, o.partition)))
    for (const key of member.positions.keys()) if (!keys.has(key)) member.positions.delete(key)
    for (const { partition, topic } of owned) {
      const key = tp(topic, partition)
      if (member.positions.has(key)) continue
      const committed = group.committed.get(key)
      const end = topics.get(topic)![partition]!.length
      member.positions.set(key, committed ?? (member.fromBeginning ? 0 : end))
    }
  }

  const nextBatch = (member: Member): ConsumerBatch | undefined => {
    const owned = assignment(member)
    syncPositions(member, owned)
    for (let i = 0; i < owned.length; i++) {
      const index = (member.cursor + i) % owned.length
      const { partition, topic } = owned[index]!
      const key = tp(topic, partition)
      const position = member.positions.get(key)!
      const log = topics.get(topic)![partition]!
      if (position >= log.length) continue
      const upTo = Math.min(log.length, position + maxBatchSize)
      const records: Array<ConsumerRecord> = []
      for (let offset = position; offset < upTo; offset++) {
        records.push(toConsumerRecord(topic, partition, offset, log[offset]!))
      }
      member.positions.set(key, upTo)
      member.cursor = index + 1
      return { topic, partition, records }
    }
    return undefined
  }

  return {
    subscribe: (options) =>
      Effect.gen(function* () {
        const member = yield* Effect.acquireRelease(
          Effect.sync(() => {
            const member: Member = {
              id: nextMemberId++,
              groupId: options.groupId,
              topics: [...new Set(options.topics)].sort(),
              fromBeginning: options.fromBeginning ?? true,
              positions: new Map(),
              cursor: 0,
              closed: false
            }
            const group = groupOf(options.groupId)
            group.members.push(member)
            // Positions are fixed when the member joins, as Kafka resolves them on assignment.
            syncPositions(member, assignment(member))
            notify()
            return member
          }),
          (member) =>
            Effect.sync(() => {
              member.closed = true
              const group = groupOf(member.groupId)
              group.members.splice(group.members.indexOf(member), 1)
              notify()
            })
        )
        const pull: Effect.Effect<readonly [ConsumerBatch], Cause.Done | ConsumerSourceError> = Effect.gen(
          function* () {
            while (true) {
              if (member.closed) return yield* Cause.done()
              if (operationFault("poll")) {
                return yield* new ConsumerSourceError({
                  operation: "poll",
                  reason: "injected poll fault",
                  retriable: true
                })
              }
              const waitFor = engine.signal()
              const batch = nextBatch(member)
              if (batch !== undefined) return [batch] as const
              yield* Deferred.await(waitFor)
            }
          }
        )
        const subscription: Subscription = {
          batches: Stream.fromPull(Effect.succeed(pull)),
          commit: (offsets) =>
            Effect.suspend(() => {
              if (operationFault("commit")) {
                return Effect.fail(
                  new ConsumerSourceError({ operation: "commit", reason: "injected commit fault", retriable: true })
                )
              }
              if (member.closed) {
                return Effect.fail(
                  new ConsumerSourceError({
                    operation: "commit",
                    reason: "the subscription was closed; its uncommitted records go to the next member",
                    retriable: false
                  })
                )
              }
              const group = groupOf(member.groupId)
              for (const commit of offsets) {
                const offset = Number(commit.offset)
                if (!Number.isSafeInteger(offset) || offset < 0) {
                  return Effect.fail(
                    new ConsumerSourceError({
                      operation: "commit",
                      reason: `offset ${commit.offset} of ${commit.topic}/${commit.partition} is not a valid offset`,
                      retriable: false
                    })
                  )
                }
              }
              for (const commit of offsets)
                group.committed.set(tp(commit.topic, commit.partition), Number(commit.offset))
              return Effect.void
            })
        }
        return subscription
      })
  }
}
