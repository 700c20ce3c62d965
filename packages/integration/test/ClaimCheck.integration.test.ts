// The claim check on the real services: a 5 MB payload (five times Kafka's default record limit)
// is stored aside in PostgreSQL at enqueue, crosses Kafka as an empty record with a reference
// header, reaches the handler whole, survives a dead letter and its replay, and is deleted with
// its event by retention; a record whose stored payload is gone is dead-lettered saying so.

import { randomUUID } from "node:crypto"
import { PgClient } from "@effect/sql-pg"
import { assert, describe, it } from "@effect/vitest"
import * as KafkaOutbox from "@effect-outbox/adapter-kafka/KafkaOutbox"
import * as PgClaimCheck from "@effect-outbox/adapter-pg/PgClaimCheck"
import * as PgOutbox from "@effect-outbox/adapter-pg/PgOutbox"
import { BrokerAdmin } from "@effect-outbox/core/BrokerAdmin"
import * as ClaimCheck from "@effect-outbox/core/ClaimCheck"
import * as DeadLetter from "@effect-outbox/core/DeadLetter"
import * as Outbox from "@effect-outbox/core/Outbox"
import * as OutboxRuntime from "@effect-outbox/core/OutboxRuntime"
import { OutboxStore } from "@effect-outbox/core/OutboxStore"
import * as Topic from "@effect-outbox/core/Topic"
import { TopicReader } from "@effect-outbox/core/TopicReader"
import * as RealServices from "@effect-outbox/testing/RealServices"
import * as Duration from "effect/Duration"
import * as Effect from "effect/Effect"
import * as Layer from "effect/Layer"
import * as Queue from "effect/Queue"
import * as Redacted from "effect/Redacted"
import * as References from "effect/References"
import * as Schedule from "effect/Schedule"
import * as Schema from "effect/Schema"
import * as Stream from "effect/Stream"
import * as SqlClient from "effect/sql/SqlClient"
import Kafkajs from "kafkajs"

const Document = Schema.Struct({ documentId: Schema.String, body: Schema.String })
const FIVE_MB = 5 * 1024 * 1024

/** The first try of `refuse` ids fails permanently (dead-lettered at once); later ones succeed. */
const Refused = { _tag: "Refused", kind: "permanent", message: "refused once" } as const

const setup = (runId: string, refuse: Set<string>) =>
  Effect.gen(function* () {
    const services = yield* RealServices.RealServices
    const schema = `claim_${runId}`
    const Documents = Topic.make({ name: `claim-${runId}.documents`, schema: Document, key: (d) => d.documentId })
    const handled = yield* Queue.unbounded<{ readonly documentId: string; readonly bytes: number }>()
    const kafka = KafkaOutbox.layer({ brokers: services.kafkaBrokers, clientId: "claim-check-test" })
    const sql = PgClient.layer({ url: Redacted.make(services.databaseUrl), maxConnections: 4 })
    const storage = Layer.provideMerge(
      PgClaimCheck.layer({ thresholdBytes: 64 * 1024 }),
      PgOutbox.layer({ schema })
    ).pipe(Layer.provideMerge(sql))
    const runtime = OutboxRuntime.layer({
      relay: { instances: 1, pollInterval: Duration.millis(100) },
      consumers: [
        OutboxRuntime.consumer(
          Topic.consumer(Documents, {
            groupId: `claim-${runId}`,
            maxAttempts: 1,
            handler: (message) =>
              refuse.delete(message.payload.documentId)
                ? Effect.fail(Refused)
                : Queue.offer(handled, { documentId: message.payload.documentId, bytes: message.payload.body.length })
          })
        )
      ]
    }).pipe(Layer.provideMerge(Layer.merge(storage, kafka)))
    yield* BrokerAdmin.use((admin) =>
      Effect.andThen(
        admin.ensureTopic({ topic: Documents.name, partitions: 1 }),
        admin.ensureTopic({ topic: Documents.deadLetterTopic, partitions: 1 })
      )
    ).pipe(Effect.provide(kafka))
    const cleanup = Effect.andThen(
      Effect.flatMap(
        Effect.service(SqlClient.SqlClient),
        (c) => c.unsafe(`DROP SCHEMA "${schema}" CASCADE`).unprepared
      ).pipe(Effect.provide(sql), Effect.ignore),
      Effect.promise(async () => {
        const admin = new Kafkajs.Kafka({
          brokers: [...services.kafkaBrokers],
          logLevel: Kafkajs.logLevel.NOTHING
        }).admin()
        await admin.connect()
        await admin
          .deleteTopics({ topics: [Documents.name, Documents.deadLetterTopic] })
          .catch(() => undefined)
          .finally(() => admin.disconnect())
      })
    )
    return { schema, Documents, handled, storage, runtime, cleanup }
  })

const rows = (query: string) =>
  Effect.flatMap(Effect.service(SqlClient.SqlClient), (c) => c.unsafe<Record<string, unknown>>(query).withoutTransform)

/** Polls until `check` holds (a condition, not a sleep), at most 60 s. */
const until = <A, E, R>(effect: Effect.Effect<A, E, R>, check: (a: A) => boolean) =>
  effect.pipe(Effect.repeat({ schedule: Schedule.spaced("100 millis"), until: check }), Effect.timeout("60 seconds"))

const statusOf = (schema: string, id: string) =>
  Effect.map(rows(`SELECT status FROM "${schema}"."outbox_message" WHERE id = '${id}'`), (r) =>
    String(r[0]?.status ?? "")
  )

const readAll = (topic: string) => TopicReader.use((reader) => reader.read(topic).pipe(Stream.runCollect))

describe("claim check on PostgreSQL and Kafka", () => {
  it.live(
    "a 5 MB payload: stored aside, an empty record with a reference, whole in the handler after a dead letter and its replay, gone after retention",
    () =>
      Effect.gen(function* () {
        const runId = randomUUID().replaceAll("-", "").slice(0, 10)
        const refuse = new Set(["big"])
        const { schema, Documents, handled, runtime, cleanup } = yield* setup(runId, refuse)
        yield* Effect.gen(function* () {
          const id = yield* Outbox.withTransaction(
            Topic.enqueue(Documents, { documentId: "big", body: "x".repeat(FIVE_MB) })
          )
          const stored = yield* rows(`SELECT octet_length(payload) AS n FROM "${schema}"."outbox_claimed_payload"`)
          assert.deepStrictEqual(stored, [{ n: FIVE_MB + `{"documentId":"big","body":""}`.length }])

          // The first try is refused: dead-lettered with the reference, not the payload.
          yield* until(statusOf(schema, id), (s) => s === "PUSHED_FAILURE")
          const letters = yield* readAll(Documents.deadLetterTopic)
          assert.strictEqual(letters.length, 1)
          assert.strictEqual(letters[0]!.value.length, 0)
          assert.strictEqual(letters[0]!.headers[ClaimCheck.CLAIM_CHECK_HEADER], id)

          // The replay carries the reference: the handler gets the whole payload.
          const replayed = yield* DeadLetter.replay({ from: Documents.deadLetterTopic })
          assert.strictEqual(replayed.replayed.length, 1)
          const message = yield* Queue.take(handled).pipe(Effect.timeout("60 seconds"))
          assert.deepStrictEqual(message, { documentId: "big", bytes: FIVE_MB })
          const records = yield* readAll(Documents.name)
          assert.deepStrictEqual(
            records.map((r) => [r.value.length, r.headers[ClaimCheck.CLAIM_CHECK_HEADER]]),
            [
              [0, id],
              [0, id]
            ]
          )

          // Retention deletes the event (a replay leaves its row PUSHED_FAILURE), and the stored
          // payload with it.
          assert.strictEqual(yield* statusOf(schema, id), "PUSHED_FAILURE")
          const purged = yield* OutboxStore.use((store) =>
            store.purge({ statuses: ["SUCCESS", "PUSHED_FAILURE"], olderThan: Date.now() + 60_000, limit: 10 })
          )
          assert.strictEqual(purged, 1)
          assert.deepStrictEqual(yield* rows(`SELECT event_id FROM "${schema}"."outbox_claimed_payload"`), [])
        }).pipe(Effect.provide(runtime), Effect.scoped, Effect.ensuring(cleanup))
      }).pipe(Effect.provide(RealServices.layer), Effect.provideService(References.MinimumLogLevel, "Error")),
    { timeout: 180_000 }
  )

  it.live(
    "a record whose stored payload is gone is dead-lettered with a reason that says so",
    () =>
      Effect.gen(function* () {
        const runId = randomUUID().replaceAll("-", "").slice(0, 10)
        const { schema, Documents, storage, runtime, cleanup } = yield* setup(runId, new Set())
        yield* Effect.gen(function* () {
          // Enqueued before the relay runs, and its stored payload removed behind the outbox's back.
          const id = yield* Effect.gen(function* () {
            const id = yield* Outbox.withTransaction(
              Topic.enqueue(Documents, { documentId: "lost", body: "y".repeat(100_000) })
            )
            yield* rows(`DELETE FROM "${schema}"."outbox_claimed_payload"`)
            return id
          }).pipe(Effect.provide(Layer.provideMerge(Outbox.layer, storage)))
          yield* Effect.gen(function* () {
            yield* until(statusOf(schema, id), (s) => s === "PUSHED_FAILURE")
            const letters = yield* readAll(Documents.deadLetterTopic)
            assert.strictEqual(letters.length, 1)
            const headers = letters[0]!.headers
            assert.strictEqual(headers[DeadLetter.headers.errorClass], "PayloadDecodeError")
            assert.strictEqual(headers[DeadLetter.headers.classification], "permanent")
            assert.include(headers[DeadLetter.headers.errorMessage], `outbox-claim-check: ${id}`)
            assert.include(headers[DeadLetter.headers.errorMessage], "no longer holds it")
          }).pipe(Effect.provide(runtime), Effect.scoped)
        }).pipe(Effect.scoped, Effect.ensuring(cleanup))
      }).pipe(Effect.provide(RealServices.layer), Effect.provideService(References.MinimumLogLevel, "Error")),
    { timeout: 180_000 }
  )
})
