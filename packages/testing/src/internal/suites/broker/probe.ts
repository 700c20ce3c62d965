/**
 * `BrokerProbe` cases: finding published records by event id.
 *
 * @internal
 */
import { assert } from "@effect/vitest"
import { BrokerProbe } from "@effect-outbox/core/BrokerProbe"
import { Publisher } from "@effect-outbox/core/Publisher"
import * as Effect from "effect/Effect"
import * as Option from "effect/Option"
import { publishRequest } from "../../conformance.ts"
import { type Case, receiptOf } from "./support.ts"

export const probeFindsRecord: Case = {
  name: "the probe finds a published record by event id, on its partition or across all",
  run: ({ makeTopic }) =>
    Effect.gen(function* () {
      const publisher = yield* Publisher
      const probe = yield* BrokerProbe
      const topic = yield* makeTopic(3)
      const since = Date.now() - 60_000
      const requests = yield* Effect.forEach([0, 1, 2, 1], (partition) => publishRequest(topic, { partition }))
      const receipts = (yield* publisher.publish(requests)).map(receiptOf)
      const target = requests[3]!
      const onPartition = yield* probe.find({ topic, partition: 1, eventId: target.id, since })
      assert.deepStrictEqual(onPartition, Option.some(receipts[3]!))
      const anywhere = yield* probe.find({ topic, partition: null, eventId: target.id, since })
      assert.deepStrictEqual(anywhere, Option.some(receipts[3]!))
    })
}

export const findManyWindow: Case = {
  name: "findMany returns the receipts of the published ids of a window and leaves out the others",
  run: ({ makeTopic }) =>
    Effect.gen(function* () {
      const publisher = yield* Publisher
      const probe = yield* BrokerProbe
      const topic = yield* makeTopic(3)
      const since = Date.now() - 60_000
      const requests = yield* Effect.forEach([0, 1, 2, 1, 0], (partition) => publishRequest(topic, { partition }))
      const receipts = (yield* publisher.publish(requests)).map(receiptOf)
      const never = yield* publishRequest(topic, { partition: 2 })
      assert.isDefined(probe.findMany, "the broker answers a window in one call")
      const found = yield* probe.findMany!({
        topic,
        partition: null,
        eventIds: [requests[1]!.id, never.id, requests[4]!.id],
        since
      })
      assert.deepStrictEqual(
        [...found.entries()].sort(([a], [b]) => a.localeCompare(b)),
        [
          [requests[1]!.id, receipts[1]!],
          [requests[4]!.id, receipts[4]!]
        ].sort(([a], [b]) => String(a).localeCompare(String(b)))
      )
      const none = yield* probe.findMany!({ topic, partition: null, eventIds: [never.id], since })
      assert.strictEqual(none.size, 0)
    })
}

export const probeNoneForMissing: Case = {
  name: "the probe returns None for an event id that never reached the partition",
  run: ({ makeTopic }) =>
    Effect.gen(function* () {
      const publisher = yield* Publisher
      const probe = yield* BrokerProbe
      const topic = yield* makeTopic(2)
      const since = Date.now() - 60_000
      const published = yield* publishRequest(topic, { partition: 0 })
      receiptOf((yield* publisher.publish([published]))[0])
      const never = yield* publishRequest(topic, { partition: 0 })
      assert.isTrue(Option.isNone(yield* probe.find({ topic, partition: 0, eventId: never.id, since })))
      assert.isTrue(Option.isNone(yield* probe.find({ topic, partition: null, eventId: never.id, since })))
      // Present on partition 0 does not mean present on partition 1.
      assert.isTrue(Option.isNone(yield* probe.find({ topic, partition: 1, eventId: published.id, since })))
      // An empty partition holds nothing.
      const empty = yield* makeTopic(1)
      assert.isTrue(Option.isNone(yield* probe.find({ topic: empty, partition: 0, eventId: never.id, since })))
    })
}

export const eventIdHeaderPolicy: Case = {
  name: "the event-id header is the request id, unless writeEventId is false: then the headers go out as they are",
  run: ({ makeTopic }) =>
    Effect.gen(function* () {
      const publisher = yield* Publisher
      const probe = yield* BrokerProbe
      const topic = yield* makeTopic(1)
      const since = Date.now() - 60_000
      const bare = (writeEventId: boolean, headers: Record<string, string>) =>
        Effect.map(publishRequest(topic, { partition: 0 }), (request) => ({ ...request, headers, writeEventId }))
      const original = (yield* publishRequest(topic)).id
      // A fresh event, a dead letter of a record that had no event id, and a replay of one that had.
      const fresh = yield* bare(true, {})
      const withoutId = yield* bare(false, { "dlt-original-topic": "orders" })
      const replay = yield* bare(false, { "event-id": original })
      const receipts = (yield* publisher.publish([fresh, withoutId, replay])).map(receiptOf)
      const find = (eventId: typeof original) => probe.find({ topic, partition: 0, eventId, since })
      assert.deepStrictEqual(yield* find(fresh.id), Option.some(receipts[0]!))
      assert.isTrue(Option.isNone(yield* find(withoutId.id)), "no event-id header was invented for it")
      assert.isTrue(Option.isNone(yield* find(replay.id)), "the replay kept its own event id")
      assert.deepStrictEqual(yield* find(original), Option.some(receipts[2]!))
    })
}
