/**
 * `BrokerAdmin` over the in-memory broker.
 *
 * @internal
 */
import type { BrokerAdmin, GroupOffsets } from "@effect-outbox/core/BrokerAdmin"
import { BrokerAdminError } from "@effect-outbox/core/Errors"
import * as Effect from "effect/Effect"
import * as Option from "effect/Option"
import { type BrokerEngine, tp } from "./brokerEngine.ts"

export const make = (engine: BrokerEngine): BrokerAdmin["Service"] => {
  const { createOrGrow, groups, operationFault, topics } = engine
  const adminFault = (operation: string, topic: string) =>
    operationFault("admin")
      ? Effect.fail(new BrokerAdminError({ operation, topic, reason: "injected admin fault" }))
      : Effect.void

  return {
    partitionCount: (topic) =>
      Effect.andThen(
        adminFault("partitionCount", topic),
        Effect.sync(() => Option.fromUndefinedOr(topics.get(topic)?.length))
      ),
    ensureTopic: (request) =>
      Effect.andThen(
        adminFault("ensureTopic", request.topic),
        Effect.suspend(() => {
          if (!Number.isInteger(request.partitions) || request.partitions < 1) {
            return Effect.fail(
              new BrokerAdminError({
                operation: "ensureTopic",
                topic: request.topic,
                reason: `a topic needs at least one partition (asked for ${request.partitions})`
              })
            )
          }
          if (!topics.has(request.topic)) createOrGrow(request.topic, request.partitions)
          return Effect.void
        })
      ),
    growPartitions: (topic, partitions) =>
      Effect.andThen(
        adminFault("growPartitions", topic),
        Effect.suspend(() => {
          const logs = topics.get(topic)
          if (logs === undefined) {
            return Effect.fail(
              new BrokerAdminError({
                operation: "growPartitions",
                topic,
                reason: "the topic does not exist: create it with ensureTopic first"
              })
            )
          }
          if (partitions > logs.length) createOrGrow(topic, partitions)
          return Effect.succeed(topics.get(topic)!.length)
        })
      ),
    groupOffsets: ({ groupId, topics: wanted }) =>
      Effect.andThen(
        adminFault("groupOffsets", wanted.join(",")),
        Effect.sync(() => {
          const committed = groups.get(groupId)?.committed
          const out: Array<GroupOffsets> = []
          for (const topic of wanted) {
            const logs = topics.get(topic)
            if (logs === undefined) continue
            logs.forEach((log, partition) => {
              const offset = committed?.get(tp(topic, partition))
              out.push({
                topic,
                partition,
                committed: offset === undefined ? null : String(offset),
                // Nothing is ever removed from an in-memory log.
                start: "0",
                end: String(log.length)
              })
            })
          }
          return out
        })
      ),
    commitGroupOffsets: ({ groupId, partitions, topic }) =>
      Effect.andThen(
        adminFault("commitGroupOffsets", topic),
        Effect.sync(() => {
          let group = groups.get(groupId)
          if (group === undefined) {
            group = { committed: new Map(), members: [], known: new Map(), refreshedAt: 0 }
            groups.set(groupId, group)
          }
          for (const p of partitions) group.committed.set(tp(topic, p.partition), Number(p.offset))
        })
      )
  }
}
