// H5 on the real services: two consumer groups of one topic in one service. A second group that
// would drive the outbox lifecycle too is refused when the runtime layer is built; with
// `lifecycle: false` on it, both groups process every event and the row ends SUCCESS once.

import { randomUUID } from "node:crypto"
import { PgClient } from "@effect/sql-pg"
import { assert, describe, it } from "@effect/vitest"
import * as KafkaOutbox from "@effect-outbox/adapter-kafka/KafkaOutbox"
import * as PgOutbox from "@effect-outbox/adapter-pg/PgOutbox"
import { BrokerAdmin } from "@effect-outbox/core/BrokerAdmin"
import * as OutboxRuntime from "@effect-outbox/core/OutboxRuntime"
import { OutboxStore } from "@effect-outbox/core/OutboxStore"
import * as Topic from "@effect-outbox/core/Topic"
import * as RealServices from "@effect-outbox/testing/RealServices"
import * as Cause from "effect/Cause"
import * as Deferred from "effect/Deferred"
import * as Duration from "effect/Duration"
import * as Effect from "effect/Effect"
import * as Exit from "effect/Exit"
import * as Layer from "effect/Layer"
import * as Option from "effect/Option"
import * as Redacted from "effect/Redacted"
import * as References from "effect/References"
import * as Schema from "effect/Schema"
import * as SqlClient from "effect/sql/SqlClient"
import Kafkajs from "kafkajs"

const Order = Schema.Struct({ orderId: Schema.String })

describe("consumer groups driving the lifecycle, on PostgreSQL and Kafka (H5)", () => {
  it.live(
    "a second lifecycle group is refused at build; with lifecycle: false both groups process and the row ends SUCCESS",
    () => {
      const runId = randomUUID().replaceAll("-", "").slice(0, 10)
      const schema = `lifecycle_${runId}`
      const Orders = Topic.make({ name: `lifecycle-${runId}.orders`, schema: Order, key: (o) => o.orderId })
      return Effect.gen(function* () {
        const services = yield* RealServices.RealServices
        const kafka = KafkaOutbox.layer({ brokers: services.kafkaBrokers, clientId: "lifecycle-test" })
        const storage = PgOutbox.layer({ schema }).pipe(
          Layer.provideMerge(PgClient.layer({ url: Redacted.make(services.databaseUrl), maxConnections: 3 }))
        )
        yield* BrokerAdmin.use((admin) =>
          Effect.andThen(
            admin.ensureTopic({ topic: Orders.name, partitions: 1 }),
            admin.ensureTopic({ topic: Orders.deadLetterTopic, partitions: 1 })
          )
        ).pipe(Effect.provide(kafka))

        const billed = yield* Deferred.make<void>()
        const shipped = yield* Deferred.make<void>()
        const declare = (group: string, done: Deferred.Deferred<void>, lifecycle?: boolean) =>
          OutboxRuntime.consumer(
            Topic.consumer(Orders, {
              groupId: `${group}-${runId}`,
              handler: () => Deferred.succeed(done, undefined),
              ...(lifecycle === undefined ? {} : { lifecycle })
            })
          )
        const runtime = (consumers: ReadonlyArray<OutboxRuntime.ConsumerDeclaration<never>>) =>
          OutboxRuntime.layer({ relay: { instances: 1, pollInterval: Duration.millis(100) }, consumers }).pipe(
            Layer.provideMerge(Layer.merge(storage, kafka))
          )

        const refused = yield* Layer.build(runtime([declare("billing", billed), declare("shipping", shipped)])).pipe(
          Effect.scoped,
          Effect.exit
        )
        const conflict = Exit.isFailure(refused)
          ? Option.getOrUndefined(Cause.findErrorOption(refused.cause))
          : undefined
        assert.instanceOf(conflict, OutboxRuntime.LifecycleGroupConflictError)
        assert.deepStrictEqual((conflict as OutboxRuntime.LifecycleGroupConflictError).topic, Orders.name)

        yield* Effect.gen(function* () {
          const id = yield* Topic.enqueueAutocommit(Orders, { orderId: "o-1" })
          yield* Deferred.await(billed).pipe(Effect.timeout("60 seconds"))
          yield* Deferred.await(shipped).pipe(Effect.timeout("60 seconds"))
          const store = yield* OutboxStore
          let status: string | undefined
          for (let i = 0; i < 100 && status !== "SUCCESS"; i++) {
            status = Option.getOrUndefined(yield* store.get(id))?.status
            if (status !== "SUCCESS") yield* Effect.sleep("100 millis")
          }
          assert.strictEqual(status, "SUCCESS")
        }).pipe(
          Effect.provide(runtime([declare("billing", billed), declare("shipping", shipped, false)])),
          Effect.scoped
        )
      }).pipe(
        Effect.ensuring(cleanUp(schema, [Orders.name, Orders.deadLetterTopic])),
        Effect.provide(RealServices.layer),
        Effect.provideService(References.MinimumLogLevel, "Warn")
      )
    },
    { timeout: 180_000 }
  )
})

/** Drops this run's schema and topics, pass or fail (once the runtime has shut down). */
const cleanUp = (schema: string, topics: ReadonlyArray<string>) =>
  Effect.gen(function* () {
    const services = yield* RealServices.RealServices
    yield* Effect.flatMap(
      Effect.service(SqlClient.SqlClient),
      (sql) => sql.unsafe(`DROP SCHEMA IF EXISTS "${schema}" CASCADE`).unprepared
    ).pipe(
      Effect.provide(PgClient.layer({ url: Redacted.make(services.databaseUrl), maxConnections: 1 })),
      Effect.ignore
    )
    yield* Effect.promise(async () => {
      const admin = new Kafkajs.Kafka({
        brokers: [...services.kafkaBrokers],
        logLevel: Kafkajs.logLevel.NOTHING
      }).admin()
      await admin.connect()
      await admin
        .deleteTopics({ topics: [...topics] })
        .catch(() => undefined)
        .finally(() => admin.disconnect())
    })
  }).pipe(Effect.provide(RealServices.layer), Effect.ignore)
