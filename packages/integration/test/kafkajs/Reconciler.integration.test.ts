// R4.4 on PostgreSQL and Kafka, lifecycle on: rows a lifecycle consumer left UNDER_PROCESSING
// after its group's offsets moved past their records (nothing will deliver them again). The
// runtime with that consumer declared runs the reconciler: the processed row ends SUCCESS without
// its work running again; the unprocessed one is reported stuck (gauge) and left as it is.

import { randomUUID } from "node:crypto"
import { assert, describe, it } from "@effect/vitest"
import { KafkaClient } from "@effect-outbox/adapter-kafka/KafkaClient"
import * as PgOutbox from "@effect-outbox/adapter-pg/PgOutbox"
import * as Inbox from "@effect-outbox/core/Inbox"
import * as Outbox from "@effect-outbox/core/Outbox"
import { jsonPayload } from "@effect-outbox/core/OutboxMessage"
import * as OutboxRuntime from "@effect-outbox/core/OutboxRuntime"
import { OutboxStore } from "@effect-outbox/core/OutboxStore"
import * as Relay from "@effect-outbox/core/Relay"
import * as Telemetry from "@effect-outbox/core/Telemetry"
import { Transactor } from "@effect-outbox/core/Transactor"
import * as Transition from "@effect-outbox/core/Transition"
import * as Duration from "effect/Duration"
import * as Effect from "effect/Effect"
import * as Layer from "effect/Layer"
import * as Metric from "effect/Metric"
import * as Option from "effect/Option"
import * as Schema from "effect/Schema"
import * as SqlClient from "effect/sql/SqlClient"
import { freshSchema, pgClient } from "../pg.ts"
import { KafkaTest, namedTopic } from "./support.ts"

const schema = freshSchema()
const DropSchema = Layer.effectDiscard(
  Effect.addFinalizer(() =>
    Effect.flatMap(
      SqlClient.SqlClient,
      (sql) => sql.unsafe(`DROP SCHEMA IF EXISTS "${schema}" CASCADE`).unprepared
    ).pipe(Effect.ignore)
  )
)
const Storage = Layer.mergeAll(Outbox.layerWith({ maxPayloadBytes: 1_000_000 }), Inbox.Inbox.layer, DropSchema).pipe(
  Layer.provideMerge(PgOutbox.layer({ schema })),
  Layer.provideMerge(pgClient(6)),
  Layer.provideMerge(KafkaTest)
)

const Order = Schema.Struct({ n: Schema.Int })

describe("reconciler on PostgreSQL and Kafka (lifecycle on)", () => {
  it.live(
    "a processed row left UNDER_PROCESSING ends SUCCESS without a second effect; an unprocessed one is reported stuck",
    () =>
      Effect.gen(function* () {
        const sql = yield* SqlClient.SqlClient
        const transactor = yield* Transactor
        const topic = `adapter-kafka-reconcile-${randomUUID()}`
        const groupId = `reconcile-${randomUUID()}`
        yield* namedTopic(topic, 1)
        yield* namedTopic(`${topic}.DLT`, 1)
        const effects = `"${schema}".effects`
        yield* sql.unsafe(`CREATE TABLE ${effects} (event_id uuid NOT NULL)`).unprepared
        const effect = (eventId: string) =>
          sql`INSERT INTO ${sql.literal(effects)} (event_id) VALUES (${eventId}::uuid)`.pipe(Effect.asVoid)

        // Two events, published to the real broker by a relay.
        const [done, lost] = yield* Outbox.withTransaction(
          Outbox.enqueue([
            { topic, key: "a", payload: jsonPayload({ n: 1 }) },
            { topic, key: "b", payload: jsonPayload({ n: 2 }) }
          ])
        )
        const relay = yield* Relay.make({ owner: "reconcile-relay" })
        assert.strictEqual((yield* relay.runOnce).published, 2)

        // What the driving consumer leaves when it dies after its inbox commit (`done`) and
        // before it (`lost`), its group's offsets then moved past both records.
        yield* Transition.startProcessing(done!)
        yield* Transition.startProcessing(lost!)
        const key = { consumer: groupId, identity: Inbox.eventIdentity(done!) }
        assert.strictEqual(yield* transactor.withTransaction(Inbox.processOnce(key, effect(done!))), "processed")
        const client = yield* KafkaClient
        yield* Effect.promise(() =>
          client.admin.setOffsets({ groupId, topic, partitions: [{ partition: 0, offset: "2" }] })
        )

        const runtime = OutboxRuntime.layer({
          relay: false,
          staleRecovery: false,
          retention: false,
          inboxRetention: false,
          metricsInterval: false,
          reconciler: { minAge: Duration.zero, stuckAfter: Duration.zero, interval: Duration.millis(200) },
          consumers: [
            OutboxRuntime.consumer({
              groupId,
              topics: [topic],
              schema: Order,
              handler: (message) => effect(message.eventId!)
            })
          ]
        })
        const store = yield* OutboxStore
        const statusOf = (id: string) =>
          Effect.map(store.get(id as never), (row) => Option.getOrUndefined(Option.map(row, (r) => r.status)))
        yield* Effect.gen(function* () {
          const deadline = Date.now() + 60_000
          while (Date.now() < deadline && (yield* statusOf(done!)) !== "SUCCESS") yield* Effect.sleep("200 millis")
          assert.strictEqual(yield* statusOf(done!), "SUCCESS")
          // The sweep reported the other row in the same round.
          assert.strictEqual((yield* Metric.value(Telemetry.consumerStuck)).value, 1)
          // Give a redelivery (there should be none) a moment to show up.
          yield* Effect.sleep("2 seconds")
          assert.strictEqual(yield* statusOf(lost!), "UNDER_PROCESSING")
        }).pipe(Effect.provide(runtime), Effect.scoped)

        const applied = yield* sql<{ event_id: string }>`SELECT event_id::text FROM ${sql.literal(effects)}`
        assert.deepStrictEqual(
          applied.map((r) => r.event_id),
          [done],
          "the processed event's effect once; the work is not run again"
        )
      }).pipe(Effect.scoped, Effect.provide(Storage)),
    120_000
  )
})
