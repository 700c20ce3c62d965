// Durable parking on the real services: parked keys and their records' positions
// live in PostgreSQL, survive a consumer restart, do not hold the partition's commit, and a
// release (requested the CLI's way) re-reads the records from Kafka by position and runs the
// dead-lettered head before its successors.

import { randomUUID } from "node:crypto"
import { PgClient } from "@effect/sql-pg"
import { assert, describe, it } from "@effect/vitest"
import * as KafkaOutbox from "@effect-outbox/adapter-kafka/KafkaOutbox"
import * as PgOutbox from "@effect-outbox/adapter-pg/PgOutbox"
import { BrokerAdmin } from "@effect-outbox/core/BrokerAdmin"
import * as Consumer from "@effect-outbox/core/Consumer"
import * as Inbox from "@effect-outbox/core/Inbox"
import { jsonPayload, makeEventId } from "@effect-outbox/core/OutboxMessage"
import { ParkedStore } from "@effect-outbox/core/ParkedStore"
import { Publisher } from "@effect-outbox/core/Publisher"
import * as RealServices from "@effect-outbox/testing/RealServices"
import * as Effect from "effect/Effect"
import * as Exit from "effect/Exit"
import * as Layer from "effect/Layer"
import * as Redacted from "effect/Redacted"
import * as Schema from "effect/Schema"
import * as Scope from "effect/Scope"
import * as SqlClient from "effect/sql/SqlClient"

const Order = Schema.Struct({ n: Schema.Number })

class Broken extends Schema.TaggedError<Broken>()("Broken", { retriable: Schema.Boolean }) {}

const waitUntil = <E, R>(label: string, check: Effect.Effect<boolean, E, R>) =>
  Effect.gen(function* () {
    const deadline = Date.now() + 60_000
    while (Date.now() < deadline) {
      if (yield* check) return
      yield* Effect.sleep("200 millis")
    }
    assert.fail(`timed out waiting until ${label}`)
  })

describe("durable parking on PostgreSQL and Kafka (M10)", () => {
  it.live(
    "parked keys survive a restart and a release replays the head first",
    () => {
      const runId = randomUUID().replaceAll("-", "").slice(0, 10)
      const schema = `parking_${runId}`
      const topic = `parking-${runId}.orders`
      const groupId = `parking-${runId}`
      return Effect.gen(function* () {
        const services = yield* RealServices.RealServices
        const kafka = KafkaOutbox.layer({ brokers: services.kafkaBrokers, clientId: "parking-test" })
        const storage = PgOutbox.layer({ schema }).pipe(
          Layer.provideMerge(PgClient.layer({ url: Redacted.make(services.databaseUrl), maxConnections: 4 }))
        )
        const stack = Inbox.Inbox.layer.pipe(Layer.provideMerge(Layer.merge(storage, kafka)))
        yield* Effect.gen(function* () {
          yield* BrokerAdmin.use((admin) =>
            Effect.andThen(
              admin.ensureTopic({ topic, partitions: 1 }),
              admin.ensureTopic({ topic: `${topic}.DLT`, partitions: 1 })
            )
          )
          const publish = (n: number, key: string) =>
            Effect.gen(function* () {
              const id = yield* makeEventId
              const [outcome] = yield* (yield* Publisher).publish([
                { id, topic, key, partition: 0, headers: { "event-id": id }, payload: jsonPayload({ n }) }
              ])
              assert.strictEqual(outcome!._tag, "Success")
            })
          let broken = true
          const handled: Array<number> = []
          const options = {
            groupId,
            topics: [topic],
            schema: Order,
            lifecycle: false,
            parking: true,
            maxAttempts: 1,
            parkedReleaseInterval: "1 second",
            handler: (m: Consumer.Message<typeof Order.Type>) =>
              broken && m.payload.n === 1
                ? Effect.fail(new Broken({ retriable: false }))
                : Effect.sync(() => void handled.push(m.payload.n))
          } as const
          const store = yield* ParkedStore
          const parkedOffsets = Effect.map(store.list({ consumer: groupId }), (keys) =>
            keys.map((k) => `${k.key}:${k.offsets.join(",")}`)
          )

          yield* publish(1, "k")
          yield* publish(2, "k")
          yield* publish(3, "other")
          yield* publish(4, "k")
          const first = yield* Scope.make()
          yield* Consumer.make(options).pipe(Scope.provide(first))
          yield* waitUntil(
            "the key is parked behind its dead-lettered head",
            Effect.map(parkedOffsets, (p) => p.join() === "k:0,1,3" && handled.length === 1)
          )
          assert.deepStrictEqual(handled, [3])
          yield* Scope.close(first, Exit.void)

          // Restarted: the key is still parked; a new record of it parks behind the others.
          broken = false
          yield* Consumer.make(options)
          yield* publish(5, "k")
          yield* waitUntil(
            "record 5 is parked too",
            Effect.map(parkedOffsets, (p) => p.join() === "k:0,1,3,4")
          )
          assert.deepStrictEqual(handled, [3])

          // Released the CLI's way: the owning member runs the head, then its successors, in order.
          yield* store.requestRelease({ consumer: groupId, topic, partition: 0, key: "k" })
          yield* waitUntil(
            "the parked records ran",
            Effect.sync(() => handled.length === 5)
          )
          assert.deepStrictEqual(handled, [3, 1, 2, 4, 5])
          assert.deepStrictEqual(yield* parkedOffsets, [])
          yield* publish(6, "k")
          yield* waitUntil(
            "record 6 runs at once",
            Effect.sync(() => handled.length === 6)
          )
        }).pipe(
          Effect.ensuring(
            Effect.flatMap(Effect.service(SqlClient.SqlClient), (sql) =>
              sql.unsafe(`DROP SCHEMA IF EXISTS "${schema}" CASCADE`)
            ).pipe(Effect.ignore)
          ),
          Effect.scoped,
          Effect.provide(stack)
        )
      }).pipe(Effect.provide(RealServices.layer))
    },
    180_000
  )
})
