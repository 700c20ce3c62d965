// Typed topics: one declaration types the producer and the consumer; payloads the schema refuses
// never reach the outbox, records that do not decode never reach the handler.

import { assert, describe, it } from "@effect/vitest"
import * as InMemoryBroker from "@effect-outbox/testing/InMemoryBroker"
import * as InMemoryDatabase from "@effect-outbox/testing/InMemoryDatabase"
import * as Deferred from "effect/Deferred"
import * as Effect from "effect/Effect"
import * as Layer from "effect/Layer"
import * as Option from "effect/Option"
import * as Schema from "effect/Schema"
import * as Consumer from "../src/Consumer.ts"
import * as DeadLetter from "../src/DeadLetter.ts"
import * as Inbox from "../src/Inbox.ts"
import * as Outbox from "../src/Outbox.ts"
import { OutboxStore } from "../src/OutboxStore.ts"
import { Publisher } from "../src/Publisher.ts"
import * as Topic from "../src/Topic.ts"
import * as WakeUp from "../src/WakeUp.ts"

// The wire format is the schema's encoded side: `placedAt` travels as a string, arrives a Date.
const OrderPlaced = Schema.Struct({
  orderId: Schema.String,
  customerId: Schema.String,
  amountCents: Schema.Int.check(Schema.isGreaterThanOrEqualTo(0)),
  placedAt: Schema.DateTimeUtcFromString
})

const Orders = Topic.make({
  name: "orders",
  schema: OrderPlaced,
  key: (order) => order.customerId,
  partition: (order) => (order.amountCents > 10_000 ? 1 : null)
})

const order = (orderId: string, amountCents = 1200) =>
  Schema.decodeUnknownSync(OrderPlaced)({
    orderId,
    customerId: "customer-7",
    amountCents,
    placedAt: "2026-01-02T03:04:05.000Z"
  })

const database = Outbox.layerWith({ maxPayloadBytes: 1_000_000 }).pipe(
  Layer.provideMerge(Layer.mergeAll(InMemoryDatabase.layer, WakeUp.layerMemory))
)

describe("Topic", () => {
  it.effect("a declaration names the dead-letter topic after the topic by default", () =>
    Effect.sync(() => {
      assert.strictEqual(Orders.deadLetterTopic, "orders.DLT")
      assert.strictEqual(
        Topic.make({ name: "a", schema: Schema.String, deadLetterTopic: "a-dead" }).deadLetterTopic,
        "a-dead"
      )
    })
  )

  it.effect("enqueue stores the encoded payload with the topic's key and partition", () =>
    Effect.gen(function* () {
      const small = yield* Topic.enqueueAutocommit(Orders, order("o-1"))
      const large = yield* Topic.enqueueAutocommit(Orders, order("o-2", 20_000))
      const pinned = yield* Topic.enqueueAutocommit(Orders, order("o-3", 20_000), { partition: 3 })
      const store = yield* OutboxStore
      const rows = yield* Effect.forEach([small, large, pinned], (id) => Effect.map(store.get(id), Option.getOrThrow))
      assert.deepStrictEqual(
        rows.map((row) => [row.topic, row.key, row.partition, row.status]),
        [
          ["orders", "customer-7", null, "PENDING"],
          ["orders", "customer-7", 1, "PENDING"],
          ["orders", "customer-7", 3, "PENDING"]
        ]
      )
      assert.deepStrictEqual(JSON.parse(new TextDecoder().decode(rows[0]!.payload)), {
        orderId: "o-1",
        customerId: "customer-7",
        amountCents: 1200,
        placedAt: "2026-01-02T03:04:05.000Z"
      })
    }).pipe(Effect.provide(database))
  )

  it.effect("a payload the schema refuses fails typed and writes nothing", () =>
    Effect.gen(function* () {
      const error = yield* Effect.flip(Topic.enqueueAutocommit(Orders, { ...order("o-1"), amountCents: -5 }))
      assert.strictEqual(error._tag, "OutboxValidationError")
      assert.strictEqual(error._tag === "OutboxValidationError" && error.field, "payload")
      const store = yield* OutboxStore
      const stats = yield* store.stats(0)
      assert.deepStrictEqual(stats.byStatus, {})
    }).pipe(Effect.provide(database))
  )

  it.effect("enqueue joins the caller's transaction: a rollback leaves no event behind", () =>
    Effect.gen(function* () {
      const ids = yield* Outbox.withTransaction(Topic.enqueueAll(Orders, [order("o-1"), order("o-2")]))
      const failed = yield* Effect.flip(
        Outbox.withTransaction(Effect.andThen(Topic.enqueue(Orders, order("o-3")), Effect.fail("declined" as const)))
      )
      assert.strictEqual(failed, "declined")
      const store = yield* OutboxStore
      const stats = yield* store.stats(0)
      assert.strictEqual(ids.length, 2)
      assert.deepStrictEqual(stats.byStatus, { PENDING: 2 })
    }).pipe(Effect.provide(database))
  )

  it.live("the consumer's handler receives the decoded payload; an undecodable record is dead-lettered", () =>
    Effect.gen(function* () {
      const publisher = yield* Publisher
      const broker = yield* InMemoryBroker.InMemoryBroker
      const received: Array<typeof OrderPlaced.Type> = []
      const done = yield* Deferred.make<void>()
      const encoded = (payload: unknown) => new TextEncoder().encode(JSON.stringify(payload))
      yield* publisher.publish([
        {
          id: "0190a0a0-0000-7000-8000-000000000001" as never,
          topic: "orders",
          key: "customer-7",
          partition: 0,
          headers: {},
          payload: encoded({
            orderId: "o-1",
            customerId: "customer-7",
            amountCents: 5,
            placedAt: "2026-01-02T03:04:05.000Z"
          })
        },
        {
          id: "0190a0a0-0000-7000-8000-000000000002" as never,
          topic: "orders",
          key: "customer-7",
          partition: 0,
          headers: {},
          payload: encoded({ orderId: "o-2", customerId: "customer-7", amountCents: "five", placedAt: "yesterday" })
        },
        {
          id: "0190a0a0-0000-7000-8000-000000000003" as never,
          topic: "orders",
          key: "customer-7",
          partition: 0,
          headers: {},
          payload: encoded({
            orderId: "o-3",
            customerId: "customer-7",
            amountCents: 7,
            placedAt: "2026-01-02T03:04:05.000Z"
          })
        }
      ])
      yield* Effect.scoped(
        Effect.gen(function* () {
          yield* Consumer.make(
            Topic.consumer(Orders, {
              groupId: "billing",
              fromBeginning: true,
              handler: (message) =>
                Effect.sync(() => {
                  // Typed: a DateTime, not the string on the wire.
                  received.push(message.payload)
                  if (received.length === 2) Deferred.doneUnsafe(done, Effect.void)
                })
            })
          )
          yield* Deferred.await(done)
        })
      )
      assert.deepStrictEqual(
        received.map((o) => o.orderId),
        ["o-1", "o-3"]
      )
      assert.strictEqual(received[0]!.placedAt.epochMilliseconds, Date.UTC(2026, 0, 2, 3, 4, 5))
      const dead = yield* broker.records(Orders.deadLetterTopic)
      assert.strictEqual(dead.length, 1)
      const letter = Option.getOrThrow(DeadLetter.parse(dead[0]!))
      assert.strictEqual(letter.errorClass, "PayloadDecodeError")
      assert.strictEqual(letter.originalOffset, "1")
    }).pipe(
      Effect.provide(
        Inbox.Inbox.layer.pipe(
          Layer.provideMerge(InMemoryDatabase.layer),
          Layer.provideMerge(InMemoryBroker.layer({ topics: { orders: 1, "orders.DLT": 1 } }))
        )
      )
    )
  )
})
