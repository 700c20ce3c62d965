// KafkaBrokerProbe against the real broker (R3.2): a record that landed is found by its event id.

import { randomUUID } from "node:crypto"
import { assert, layer } from "@effect/vitest"
import { BrokerProbe } from "@effect-outbox/core/BrokerProbe"
import { makeEventId } from "@effect-outbox/core/OutboxMessage"
import { Publisher } from "@effect-outbox/core/Publisher"
import * as Effect from "effect/Effect"
import * as Option from "effect/Option"
import * as Result from "effect/Result"
import * as KafkaBrokerProbe from "../src/KafkaBrokerProbe.ts"
import { KafkaClient } from "../src/KafkaClient.ts"
import { freshTopic, KafkaTest, request } from "./support.ts"

layer(KafkaTest, { timeout: "90 seconds", excludeTestServices: true })("KafkaBrokerProbe", (it) => {
  it.effect("finds a published record on its partition, and on any partition when none is given", () =>
    Effect.gen(function* () {
      const topic = yield* freshTopic(3)
      const since = Date.now()
      const batch = yield* Effect.forEach([0, 1, 2, 1, 0, 2], (partition) => request(topic, { partition }))
      const outcomes = yield* (yield* Publisher).publish(batch)
      const target = batch[3]!
      const receipt = outcomes[3]!
      assert.isTrue(Result.isSuccess(receipt))
      const probe = yield* BrokerProbe
      const onPartition = yield* probe.find({ topic, partition: 1, eventId: target.id, since })
      assert.deepStrictEqual(onPartition, Option.some(Result.getOrThrow(receipt)))
      const anywhere = yield* probe.find({ topic, partition: null, eventId: target.id, since })
      assert.deepStrictEqual(anywhere, Option.some(Result.getOrThrow(receipt)))
    })
  )

  it.effect("answers None for an id that never reached the broker, a wrong partition, or records before since", () =>
    Effect.gen(function* () {
      const topic = yield* freshTopic(2)
      const since = Date.now()
      const sent = yield* request(topic, { partition: 0 })
      yield* (yield* Publisher).publish([sent, yield* request(topic, { partition: 1 })])
      const probe = yield* BrokerProbe
      const absent = yield* makeEventId
      assert.isTrue(Option.isNone(yield* probe.find({ topic, partition: null, eventId: absent, since })))
      assert.isTrue(Option.isNone(yield* probe.find({ topic, partition: 1, eventId: sent.id, since })))
      // `since` an hour ahead (beyond the clock-skew allowance): nothing that old is read.
      assert.isTrue(
        Option.isNone(yield* probe.find({ topic, partition: 0, eventId: sent.id, since: since + 3_600_000 }))
      )
    })
  )

  it.effect("an empty partition, a missing partition and a missing topic are None without reading", () =>
    Effect.gen(function* () {
      const topic = yield* freshTopic(1)
      const probe = yield* BrokerProbe
      const id = yield* makeEventId
      const started = Date.now()
      assert.isTrue(Option.isNone(yield* probe.find({ topic, partition: 0, eventId: id, since: 0 })))
      assert.isTrue(Option.isNone(yield* probe.find({ topic, partition: 7, eventId: id, since: 0 })))
      assert.isTrue(
        Option.isNone(yield* probe.find({ topic: `${topic}-missing`, partition: null, eventId: id, since: 0 }))
      )
      assert.isBelow(Date.now() - started, 3_000)
    })
  )

  it.effect("leaves no consumer group behind, whether it finds the record or not", () =>
    Effect.gen(function* () {
      const topic = yield* freshTopic(1)
      const sent = yield* request(topic, {})
      yield* (yield* Publisher).publish([sent])
      const { admin, kafka } = yield* KafkaClient
      const groupPrefix = `adapter-kafka-probe-${randomUUID()}`
      const found = yield* KafkaBrokerProbe.find(
        kafka,
        admin,
        { topic, partition: 0, eventId: sent.id, since: 0 },
        { groupPrefix }
      )
      assert.isTrue(Option.isSome(found))
      const absent = yield* KafkaBrokerProbe.find(
        kafka,
        admin,
        { topic, partition: 0, eventId: yield* makeEventId, since: 0 },
        { groupPrefix }
      )
      assert.isTrue(Option.isNone(absent))
      const { groups } = yield* Effect.promise(() => admin.listGroups())
      assert.deepStrictEqual(
        groups.filter((g) => g.groupId.startsWith(groupPrefix)),
        []
      )
    })
  )
})
