// OUTBOX_ENGINE=log on the real services: the README's composition (OutboxRuntime.layer on
// PgOutbox.layerConfig and KafkaOutbox.layerConfig), unchanged, switched to the log engine by
// the environment alone. A PostgreSQL with wal_level = logical (LOGICAL_DATABASE_URL, started by
// scripts/test) and the real Kafka broker. Its readiness includes the slot's lag.
import { PgClient } from "@effect/sql-pg"
import { assert, describe, it } from "@effect/vitest"
import * as KafkaOutbox from "@effect-outbox/adapter-kafka/KafkaOutbox"
import * as PgEngine from "@effect-outbox/adapter-pg/PgEngine"
import * as PgLogSource from "@effect-outbox/adapter-pg/PgLogSource"
import * as PgOutbox from "@effect-outbox/adapter-pg/PgOutbox"
import * as OutboxRuntime from "@effect-outbox/core/OutboxRuntime"
import * as Topic from "@effect-outbox/core/Topic"
import * as ConfigProvider from "effect/ConfigProvider"
import * as Deferred from "effect/Deferred"
import * as Effect from "effect/Effect"
import * as Layer from "effect/Layer"
import * as Redacted from "effect/Redacted"
import * as Schema from "effect/Schema"
import * as SqlClient from "effect/sql/SqlClient"
import * as Support from "./faults/support.ts"

const logicalUrl = process.env.LOGICAL_DATABASE_URL ?? "postgres://postgres@127.0.0.1:25433/postgres"

const Greeting = Schema.Struct({ to: Schema.String, n: Schema.Int })

describe("OutboxRuntime on OUTBOX_ENGINE=log", () => {
  it.live(
    "an enqueued event is relayed from the slot to Kafka and processed by a consumer of the same runtime",
    () => {
      const schema = Support.uniqueName("engine_log")
        .toLowerCase()
        .replace(/[^a-z0-9_]/g, "_")
      const slot = PgEngine.defaultSlot(schema)
      return Effect.gen(function* () {
        const topicName = Support.uniqueName("engine-log")
        yield* Effect.promise(() => Support.createTopics(Support.sharedBrokers, [topicName, `${topicName}.DLT`], 2))
        const Greetings = Topic.make({ name: topicName, schema: Greeting, key: (greeting) => greeting.to })

        const seen: Array<string> = []
        const allSeen = yield* Deferred.make<void>()
        const greeter = OutboxRuntime.consumer(
          Topic.consumer(Greetings, {
            groupId: Support.uniqueName("engine-log-greeter"),
            handler: (message) =>
              Effect.sync(() => {
                seen.push(`${message.payload.to}#${message.payload.n}`)
                if (seen.length === 3) Deferred.doneUnsafe(allSeen, Effect.void)
              })
          })
        )
        const env = ConfigProvider.layer(
          ConfigProvider.fromEnv({
            env: {
              DATABASE_URL: logicalUrl,
              KAFKA_BROKERS: Support.sharedBrokers.join(","),
              OUTBOX_SCHEMA: schema,
              OUTBOX_ENGINE: "log"
            }
          })
        )
        // The README's composition, as is.
        const runtime = OutboxRuntime.layer({ consumers: [greeter] }).pipe(
          Layer.provide(KafkaOutbox.layerConfig()),
          Layer.provideMerge(PgOutbox.layerConfig),
          Layer.provide(env)
        )

        const result = yield* Effect.scoped(
          Effect.gen(function* () {
            const info = yield* OutboxRuntime.OutboxRuntime
            yield* Topic.enqueueAutocommit(Greetings, { to: "ada", n: 1 })
            yield* Topic.enqueueAutocommit(Greetings, { to: "ada", n: 2 })
            yield* Topic.enqueueAutocommit(Greetings, { to: "bob", n: 1 })
            yield* Deferred.await(allSeen).pipe(Effect.timeout("60 seconds"))
            const sql = yield* SqlClient.SqlClient
            const slots = yield* sql<{ slot_name: string }>`
              SELECT slot_name FROM pg_replication_slots WHERE slot_name = ${slot}`
            const rows = yield* sql.unsafe<{ n: number }>(`SELECT count(*)::int AS n FROM "${schema}".outbox_message`)
            const ready = yield* info.health.ready
            return {
              info,
              slots: slots.length,
              outboxRows: rows[0]!.n,
              slotCheck: ready.checks.find((c) => c.name === "log slot")
            }
          })
        ).pipe(Effect.provide(runtime))

        // After the runtime closed (the relay let the slot go): what reached the topic.
        const records = yield* Effect.promise(() => Support.readTopic(Support.sharedBrokers, topicName))
        yield* Effect.addFinalizer(() =>
          Effect.promise(() => Support.deleteTopics(Support.sharedBrokers, [topicName, `${topicName}.DLT`]))
        )

        assert.strictEqual(result.info.settings.engine, "log")
        assert.deepStrictEqual(result.info.relays, ["log-relay"])
        assert.deepStrictEqual(
          seen.filter((s) => s.startsWith("ada")),
          ["ada#1", "ada#2"]
        )
        assert.sameMembers(seen, ["ada#1", "ada#2", "bob#1"])
        assert.strictEqual(records.length, 3, "each event on the topic once")
        // The slot is the one derived from the schema; the claim table stays empty.
        assert.strictEqual(result.slots, 1)
        assert.strictEqual(result.outboxRows, 0)
        // The relay runs here, so readiness asks the slot how far behind it is (limit: 1 GiB).
        assert.isTrue(result.slotCheck?.ok, JSON.stringify(result.slotCheck))
        assert.match(result.slotCheck?.detail ?? "", /^lag \d+\.\d MiB \(limit 1024\.0 MiB\)$/)
      }).pipe(
        Effect.ensuring(
          Effect.gen(function* () {
            const sql = yield* SqlClient.SqlClient
            yield* Effect.ignore(PgLogSource.dropSlot({ slot }))
            yield* sql.unsafe(`DROP SCHEMA IF EXISTS "${schema}" CASCADE`).unprepared.pipe(Effect.ignore)
          }).pipe(Effect.provide(PgClient.layer({ url: Redacted.make(logicalUrl) })), Effect.ignore)
        ),
        Effect.scoped
      )
    },
    90_000
  )
})
