import { assert, describe, it } from "@effect/vitest"
import * as InMemoryBroker from "@effect-outbox/testing/InMemoryBroker"
import * as InMemoryDatabase from "@effect-outbox/testing/InMemoryDatabase"
import * as InMemoryParkedStore from "@effect-outbox/testing/InMemoryParkedStore"
import * as InMemoryTopicReader from "@effect-outbox/testing/InMemoryTopicReader"
import * as Deferred from "effect/Deferred"
import * as Effect from "effect/Effect"
import * as Fiber from "effect/Fiber"
import * as Layer from "effect/Layer"
import * as Option from "effect/Option"
import * as Ref from "effect/Ref"
import * as Schedule from "effect/Schedule"
import * as Schema from "effect/Schema"
import * as Consumer from "../src/Consumer.ts"
import * as Inbox from "../src/Inbox.ts"
import type { EventId } from "../src/OutboxMessage.ts"
import { jsonPayload } from "../src/OutboxMessage.ts"
import { ParkedStore } from "../src/ParkedStore.ts"
import { Publisher } from "../src/Publisher.ts"
import { committedOffset, eventually } from "./support/consumerTest.ts"

// A release of a parked key holds only that key: the partition's other keys keep flowing, and the
// key's records that arrive during the release run after its parked ones.

const Order = Schema.Struct({ n: Schema.Number })

const id = (n: number) => `0190a0a0-0000-7000-8000-${n.toString(16).padStart(12, "0")}` as EventId

class HandlerFailed extends Schema.TaggedError<HandlerFailed>()("HandlerFailed", { n: Schema.Number }) {}

const brokerLayer = Layer.mergeAll(
  Inbox.Inbox.layer.pipe(Layer.provideMerge(InMemoryDatabase.layer)),
  InMemoryTopicReader.layer.pipe(Layer.provideMerge(InMemoryBroker.layer({ topics: { orders: 1, "orders.DLT": 1 } })))
)

/** Publishes record `n` with `key` to partition 0 of `orders`. */
const send = (n: number, key: string) =>
  Effect.gen(function* () {
    const publisher = yield* Publisher
    const [outcome] = yield* publisher.publish([
      { id: id(n), topic: "orders", key, partition: 0, headers: { "event-id": id(n) }, payload: jsonPayload({ n }) }
    ])
    assert.strictEqual(outcome!._tag, "Success")
  })

const modes = [
  { parking: "in memory", layer: brokerLayer },
  { parking: "durable", layer: Layer.merge(brokerLayer, InMemoryParkedStore.layer()) }
] as const

describe("Consumer release of a parked key", () => {
  for (const mode of modes) {
    for (const transaction of ["per-record", "per-batch"] as const) {
      it.effect(
        `holds only its key: another key of the partition runs while it is blocked, and the key's later records run after its parked ones (${mode.parking}, ${transaction})`,
        () =>
          Effect.gen(function* () {
            const broken = yield* Ref.make(true)
            const ran = yield* Ref.make<ReadonlyArray<number>>([])
            // The first record the release runs waits for `gate`, once `blockNext` is set.
            const blockNext = yield* Ref.make(false)
            const blocked = yield* Deferred.make<void>()
            const gate = yield* Deferred.make<void>()
            const ns = Ref.get(ran)
            yield* send(1, "k") // offset 0: poison while broken
            yield* send(2, "k") // offset 1: parked behind it
            const consumer = yield* Consumer.make({
              groupId: "billing",
              topics: ["orders"],
              schema: Order,
              fromBeginning: true,
              retrySchedule: Schedule.spaced("1 second"),
              transaction,
              parking: true,
              maxAttempts: 1,
              handler: (m) =>
                Effect.gen(function* () {
                  if (m.payload.n === 1 && (yield* Ref.get(broken))) return yield* new HandlerFailed({ n: 1 })
                  if (yield* Ref.getAndSet(blockNext, false)) {
                    yield* Deferred.succeed(blocked, undefined)
                    yield* Deferred.await(gate)
                  }
                  yield* Ref.update(ran, (all) => [...all, m.payload.n])
                })
            })
            yield* eventually(
              "record 2 is parked behind the dead-lettered record 1",
              Effect.map(consumer.parked, (keys) => keys.some((k) => k.key === "k" && k.offsets.includes("1")))
            )
            assert.deepStrictEqual(yield* ns, [])

            yield* Ref.set(broken, false)
            yield* Ref.set(blockNext, true)
            const release = yield* Effect.forkChild(consumer.release({ topic: "orders", partition: 0, key: "k" }))
            yield* eventually("the release is blocked in the handler", Deferred.isDone(blocked))

            // The release is in progress: another key of the same partition is handled, and a
            // later record of the released key waits behind the release.
            yield* send(3, "other") // offset 2
            yield* send(4, "k") // offset 3
            yield* eventually(
              "record 3 (another key) ran during the release",
              Effect.map(ns, (all) => all.includes(3))
            )
            assert.deepStrictEqual(yield* ns, [3])
            assert.isUndefined(release.pollUnsafe(), "the release is still blocked")

            yield* Deferred.succeed(gate, undefined)
            yield* eventually(
              "the release finished",
              Effect.sync(() => release.pollUnsafe() !== undefined)
            )
            // In memory the dead-lettered head stays in the dead-letter topic (it parks only what
            // followed it); durably the release runs the head again first.
            const parkedOnes = mode.parking === "durable" ? [1, 2] : [2]
            assert.strictEqual(yield* Fiber.join(release), parkedOnes.length + 1)
            assert.deepStrictEqual(yield* ns, [3, ...parkedOnes, 4])
            assert.deepStrictEqual(yield* consumer.parked, [])
            yield* eventually(
              "everything is committed",
              Effect.map(committedOffset(), (offset) => offset === "4")
            )
            const store = yield* Effect.serviceOption(ParkedStore)
            if (Option.isSome(store)) assert.deepStrictEqual(yield* store.value.list({ consumer: "billing" }), [])
            // The key is no longer parked: its next record runs at once.
            yield* send(5, "k")
            yield* eventually(
              "record 5 ran",
              Effect.map(ns, (all) => all.includes(5))
            )
          }).pipe(Effect.scoped, Effect.provide(mode.layer))
      )
    }
  }
})
