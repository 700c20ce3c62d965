// The deduplication window on the real services: a consumer on PostgreSQL and Kafka whose inbox
// has forgotten the partition of an event's time does not run that event as new. With the
// default policy it is dead-lettered with InboxWindowExpiredError; with onExpired: "process" it
// runs; an event inside the window that was handled before is deduplicated either way.

import { randomUUID } from "node:crypto"
import { PgClient } from "@effect/sql-pg"
import { assert, describe, it } from "@effect/vitest"
import * as KafkaOutbox from "@effect-outbox/adapter-kafka/KafkaOutbox"
import * as PgOutbox from "@effect-outbox/adapter-pg/PgOutbox"
import { BrokerAdmin } from "@effect-outbox/core/BrokerAdmin"
import * as Consumer from "@effect-outbox/core/Consumer"
import * as DeadLetter from "@effect-outbox/core/DeadLetter"
import * as Inbox from "@effect-outbox/core/Inbox"
import { InboxStore } from "@effect-outbox/core/InboxStore"
import { type EventId, jsonPayload } from "@effect-outbox/core/OutboxMessage"
import { Publisher } from "@effect-outbox/core/Publisher"
import { TopicReader } from "@effect-outbox/core/TopicReader"
import * as RealServices from "@effect-outbox/testing/RealServices"
import * as Effect from "effect/Effect"
import * as Exit from "effect/Exit"
import * as Layer from "effect/Layer"
import * as Redacted from "effect/Redacted"
import * as Schema from "effect/Schema"
import * as Scope from "effect/Scope"
import * as Stream from "effect/Stream"
import * as SqlClient from "effect/sql/SqlClient"

const Order = Schema.Struct({ n: Schema.Number })
const DAY = 24 * 60 * 60 * 1000

/** A UUIDv7 of time `ms`: the event's time is in its id. */
const idAt = (ms: number, n: number) => {
  const hex = ms.toString(16).padStart(12, "0")
  return `${hex.slice(0, 8)}-${hex.slice(8)}-7000-8000-${n.toString(16).padStart(12, "0")}` as EventId
}

const waitUntil = <E, R>(label: string, check: Effect.Effect<boolean, E, R>) =>
  Effect.gen(function* () {
    const deadline = Date.now() + 60_000
    while (Date.now() < deadline) {
      if (yield* check) return
      yield* Effect.sleep("200 millis")
    }
    assert.fail(`timed out waiting until ${label}`)
  })

describe("the deduplication window on PostgreSQL and Kafka", () => {
  it.live(
    "an event older than the window is dead-lettered (default) or processed (onExpired: process), never silently",
    () => {
      const runId = randomUUID().replaceAll("-", "").slice(0, 10)
      const schema = `window_${runId}`
      const topic = `window-${runId}.orders`
      return Effect.gen(function* () {
        const services = yield* RealServices.RealServices
        const kafka = KafkaOutbox.layer({ brokers: services.kafkaBrokers, clientId: "window-test" })
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
          const now = Date.now()
          // Two events of ten days ago, one of now.
          const events = [idAt(now - 10 * DAY, 1), idAt(now - 10 * DAY, 2), idAt(now, 3)]
          for (const [i, id] of events.entries()) {
            const [outcome] = yield* (yield* Publisher).publish([
              { id, topic, key: `k${i}`, partition: 0, headers: { "event-id": id }, payload: jsonPayload({ n: i + 1 }) }
            ])
            assert.strictEqual(outcome!._tag, "Success")
          }
          // Both groups handled event 1 (old) and event 3 (recent) before; then a retention of one
          // day forgets the partition that holds the old events.
          for (const group of ["dead-letter", "process"]) {
            for (const id of [events[0]!, events[2]!]) {
              const key = { consumer: `${group}-${runId}`, identity: Inbox.eventIdentity(id) }
              assert.strictEqual(yield* Inbox.processOnce(key, Effect.void), "processed")
            }
          }
          const store = yield* InboxStore
          assert.strictEqual(yield* store.purge(now - DAY, 1000), 2)

          const run = (onExpired: Inbox.ExpiredPolicy) =>
            Effect.gen(function* () {
              const handled: Array<number> = []
              const groupId = `${onExpired}-${runId}`
              const scope = yield* Scope.make()
              yield* Consumer.make({
                groupId,
                topics: [topic],
                schema: Order,
                lifecycle: false,
                onExpired,
                handler: (m) => Effect.sync(() => void handled.push(m.payload.n))
              }).pipe(Scope.provide(scope))
              yield* waitUntil(
                `${groupId} committed all three`,
                BrokerAdmin.use((admin) =>
                  Effect.map(
                    admin.groupOffsets({ groupId, topics: [topic] }),
                    (offsets) => offsets[0]?.committed === "3"
                  )
                )
              )
              yield* Scope.close(scope, Exit.void)
              return handled
            })

          // Default policy: nothing runs (3 is a duplicate, 1 and 2 are expired) and both old
          // events are dead-lettered with the reason.
          assert.deepStrictEqual(yield* run("dead-letter"), [])
          const letters = yield* Stream.runCollect((yield* TopicReader).read(`${topic}.DLT`))
          const parsed = letters.flatMap((record) => {
            const letter = DeadLetter.parse(record)
            return letter._tag === "Some" ? [letter.value] : []
          })
          assert.deepStrictEqual(
            parsed.map((l) => [l.eventId, l.errorClass, l.attempts]),
            [
              [events[0], "InboxWindowExpiredError", 1],
              [events[1], "InboxWindowExpiredError", 1]
            ]
          )
          assert.include(parsed[0]!.errorMessage, "older than the inbox's deduplication window")

          // onExpired: "process": the old events run (knowingly), the recent duplicate does not.
          assert.deepStrictEqual(yield* run("process"), [1, 2])
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
