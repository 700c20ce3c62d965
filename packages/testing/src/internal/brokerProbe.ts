/**
 * `BrokerProbe` over the in-memory broker: scans a partition (or all) for the `event-id` header.
 *
 * @internal
 */
import type { BrokerProbe } from "@effect-outbox/core/BrokerProbe"
import { ProbeError } from "@effect-outbox/core/Errors"
import { EVENT_ID_HEADER, type EventId, type PublishReceipt } from "@effect-outbox/core/OutboxMessage"
import * as Effect from "effect/Effect"
import * as Option from "effect/Option"
import type { BrokerEngine } from "./brokerEngine.ts"

export const make = (engine: BrokerEngine): BrokerProbe["Service"] => {
  const { operationFault, topics } = engine
  const find: BrokerProbe["Service"]["find"] = (request) =>
    Effect.suspend(() => {
      if (operationFault("probe")) {
        return Effect.fail(new ProbeError({ topic: request.topic, reason: "injected probe fault" }))
      }
      const logs = topics.get(request.topic)
      if (logs === undefined) return Effect.succeed(Option.none<PublishReceipt>())
      if (request.partition !== null && (request.partition < 0 || request.partition >= logs.length)) {
        return Effect.fail(
          new ProbeError({
            topic: request.topic,
            reason: `partition ${request.partition} does not exist (the topic has ${logs.length})`
          })
        )
      }
      const partitions = request.partition === null ? logs.map((_, p) => p) : [request.partition]
      for (const partition of partitions) {
        const log = logs[partition]!
        for (let offset = 0; offset < log.length; offset++) {
          const record = log[offset]!
          if (record.timestamp >= request.since && record.headers[EVENT_ID_HEADER] === request.eventId) {
            return Effect.succeed(Option.some({ topic: request.topic, partition, offset: String(offset) }))
          }
        }
      }
      return Effect.succeed(Option.none<PublishReceipt>())
    })
  return {
    find,
    // The same scan per id: the memory log is small.
    findMany: (request) =>
      Effect.forEach(request.eventIds, (eventId) =>
        Effect.map(
          find({ topic: request.topic, partition: request.partition, eventId, since: request.since }),
          (found) => [eventId, found] as const
        )
      ).pipe(
        Effect.map((pairs) => {
          const out = new Map<EventId, PublishReceipt>()
          for (const [id, found] of pairs) if (Option.isSome(found)) out.set(id, found.value)
          return out
        })
      )
  }
}
