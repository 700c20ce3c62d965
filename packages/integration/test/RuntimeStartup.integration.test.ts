// The runtime's start-up and shutdown on the real services, with each Kafka client and the
// library's defaults: a missing dead-letter topic fails start-up with one error naming it and
// the command that creates it; OUTBOX_AUTO_CREATE_TOPICS creates it instead; a KAFKA_BROKERS
// nobody listens on fails start-up within OUTBOX_BROKER_STARTUP_TIMEOUT (10 s) with one error
// and no warning flood; shutting down a runtime that relayed and consumed takes under 2 s.

import { spawn } from "node:child_process"
import { randomUUID } from "node:crypto"
import { dirname, join } from "node:path"
import { fileURLToPath } from "node:url"
import { PgClient } from "@effect/sql-pg"
import { assert, describe, it } from "@effect/vitest"
import * as KafkaOutbox from "@effect-outbox/adapter-kafka/KafkaOutbox"
import * as PlatformaticKafkaOutbox from "@effect-outbox/adapter-kafka-platformatic/PlatformaticKafkaOutbox"
import * as PgOutbox from "@effect-outbox/adapter-pg/PgOutbox"
import { BrokerAdmin } from "@effect-outbox/core/BrokerAdmin"
import type { BrokerProbe } from "@effect-outbox/core/BrokerProbe"
import type { ConsumerSource } from "@effect-outbox/core/ConsumerSource"
import { BrokerUnreachableError, MissingTopicsError } from "@effect-outbox/core/Errors"
import type * as KafkaSecurity from "@effect-outbox/core/KafkaSecurity"
import * as OutboxRuntime from "@effect-outbox/core/OutboxRuntime"
import type { Publisher } from "@effect-outbox/core/Publisher"
import * as Topic from "@effect-outbox/core/Topic"
import * as RealServices from "@effect-outbox/testing/RealServices"
import * as Cause from "effect/Cause"
import type * as Config from "effect/Config"
import * as ConfigProvider from "effect/ConfigProvider"
import * as Deferred from "effect/Deferred"
import * as Effect from "effect/Effect"
import * as Exit from "effect/Exit"
import * as Layer from "effect/Layer"
import * as Logger from "effect/Logger"
import * as Option from "effect/Option"
import * as Redacted from "effect/Redacted"
import * as References from "effect/References"
import * as Schema from "effect/Schema"
import * as Scope from "effect/Scope"
import * as SqlClient from "effect/sql/SqlClient"
import Kafkajs from "kafkajs"

const Order = Schema.Struct({ orderId: Schema.String })

type BrokerPorts = Layer.Layer<
  Publisher | BrokerProbe | BrokerAdmin | ConsumerSource,
  Config.ConfigError | KafkaSecurity.KafkaSecurityError
>

// Each client's env-driven layer, as a service builds it (KAFKA_BROKERS from the environment).
const clients: Record<string, () => BrokerPorts> = {
  kafkajs: () => KafkaOutbox.layerConfig(),
  platformatic: () => PlatformaticKafkaOutbox.layerConfig()
}

const env = (brokers: ReadonlyArray<string>, extra: Record<string, string> = {}) =>
  ConfigProvider.layer(ConfigProvider.fromUnknown({ KAFKA_BROKERS: brokers.join(","), ...extra }))

/**
 * Warn-and-above log lines, for counting what an operator would see. Each test's schema is new, so
 * the one warning that the outbox schema is being created is expected and left out.
 */
const captureLoud = () => {
  const lines: Array<string> = []
  const logger = Logger.make<unknown, void>(({ logLevel, message }) => {
    if (logLevel === "Warn" || logLevel === "Error" || logLevel === "Fatal") {
      const line = `${logLevel} ${Array.isArray(message) ? message.map(String).join(" ") : String(message)}`
      if (!line.startsWith("Warn creating the outbox schema")) lines.push(line)
    }
  })
  return { lines, layer: Logger.layer([logger]) }
}

const errorOf = <A, E>(exit: Exit.Exit<A, E>) =>
  Exit.isFailure(exit) ? Option.getOrUndefined(Cause.findErrorOption(exit.cause)) : undefined

for (const [client, kafkaLayer] of Object.entries(clients)) {
  describe(`OutboxRuntime start-up and shutdown on ${client}`, () => {
    const runtimeFor = (
      runId: string,
      brokers: ReadonlyArray<string>,
      databaseUrl: string,
      consumers: ReadonlyArray<OutboxRuntime.ConsumerDeclaration<never>>,
      extraEnv: Record<string, string> = {}
    ) =>
      OutboxRuntime.layer({ consumers }).pipe(
        Layer.provideMerge(
          Layer.merge(
            PgOutbox.layer({ schema: `startup_${runId}` }).pipe(
              Layer.provideMerge(PgClient.layer({ url: Redacted.make(databaseUrl), maxConnections: 3 }))
            ),
            kafkaLayer()
          )
        ),
        Layer.provide(env(brokers, extraEnv))
      )

    it.live(
      "a missing dead-letter topic fails start-up with one error naming it; OUTBOX_AUTO_CREATE_TOPICS creates it",
      () => {
        const runId = randomUUID().replaceAll("-", "").slice(0, 10)
        const Orders = Topic.make({ name: `startup-${client}-${runId}.orders`, schema: Order, key: (o) => o.orderId })
        const consumers = [
          OutboxRuntime.consumer(Topic.consumer(Orders, { groupId: `startup-${runId}`, handler: () => Effect.void }))
        ]
        return Effect.gen(function* () {
          const services = yield* RealServices.RealServices
          const admin = Layer.provide(kafkaLayer(), env(services.kafkaBrokers))
          yield* BrokerAdmin.use((a) => a.ensureTopic({ topic: Orders.name, partitions: 2 })).pipe(
            Effect.provide(admin)
          )

          const loud = captureLoud()
          const refused = yield* Layer.build(
            runtimeFor(runId, services.kafkaBrokers, services.databaseUrl, consumers)
          ).pipe(Effect.scoped, Effect.provide(loud.layer), Effect.exit)
          const missing = errorOf(refused)
          assert.instanceOf(missing, MissingTopicsError)
          assert.deepStrictEqual((missing as MissingTopicsError).topics, [Orders.deadLetterTopic])
          assert.include(
            (missing as MissingTopicsError).message,
            `effect-outbox topics ensure ${Orders.deadLetterTopic} --execute`
          )
          assert.include((missing as MissingTopicsError).message, "OUTBOX_AUTO_CREATE_TOPICS=true")
          assert.deepStrictEqual(loud.lines, [])

          yield* Layer.build(
            runtimeFor(runId, services.kafkaBrokers, services.databaseUrl, consumers, {
              OUTBOX_AUTO_CREATE_TOPICS: "true"
            })
          ).pipe(Effect.scoped)
          const created = yield* BrokerAdmin.use((a) => a.partitionCount(Orders.deadLetterTopic)).pipe(
            Effect.provide(admin)
          )
          // A dead-letter topic takes its source's partition count.
          assert.deepStrictEqual(created, Option.some(2))
        }).pipe(
          Effect.ensuring(cleanUp(`startup_${runId}`, [Orders.name, Orders.deadLetterTopic])),
          Effect.provide(RealServices.layer),
          Effect.provideService(References.MinimumLogLevel, "Info")
        )
      },
      { timeout: 120_000 }
    )

    it.live(
      "a KAFKA_BROKERS nobody listens on fails start-up within 10 s with one error and no warning lines",
      () => {
        const runId = randomUUID().replaceAll("-", "").slice(0, 10)
        const Orders = Topic.make({ name: `startup-${client}-${runId}.orders`, schema: Order, key: (o) => o.orderId })
        const consumers = [
          OutboxRuntime.consumer(Topic.consumer(Orders, { groupId: `startup-${runId}`, handler: () => Effect.void }))
        ]
        return Effect.gen(function* () {
          const services = yield* RealServices.RealServices
          const loud = captureLoud()
          const started = Date.now()
          const exit = yield* Layer.build(runtimeFor(runId, ["127.0.0.1:1"], services.databaseUrl, consumers)).pipe(
            Effect.scoped,
            Effect.provide(loud.layer),
            Effect.exit
          )
          const elapsed = Date.now() - started
          const error = errorOf(exit)
          assert.instanceOf(error, BrokerUnreachableError, String(exit))
          const message = (error as BrokerUnreachableError).message
          assert.include(message, "127.0.0.1:1")
          assert.include(message, "ECONNREFUSED")
          // The documented bound is OUTBOX_BROKER_STARTUP_TIMEOUT, 10 s by default, plus the
          // database migration and the shutdown of what was built.
          assert.isAtMost(elapsed, 13_000, `start-up took ${elapsed} ms`)
          assert.isAtLeast(elapsed, 9_000, `start-up gave up after ${elapsed} ms`)
          assert.deepStrictEqual(loud.lines, [])
        }).pipe(
          Effect.ensuring(cleanUp(`startup_${runId}`, [])),
          Effect.provide(RealServices.layer),
          Effect.provideService(References.MinimumLogLevel, "Info")
        )
      },
      { timeout: 60_000 }
    )

    it.live(
      "a runtime that relayed and consumed an event shuts down in under 2 s, and logs 'stopped' last",
      () => {
        const runId = randomUUID().replaceAll("-", "").slice(0, 10)
        const Orders = Topic.make({ name: `startup-${client}-${runId}.orders`, schema: Order, key: (o) => o.orderId })
        return Effect.gen(function* () {
          const services = yield* RealServices.RealServices
          const admin = Layer.provide(kafkaLayer(), env(services.kafkaBrokers))
          yield* BrokerAdmin.use((a) =>
            Effect.andThen(
              a.ensureTopic({ topic: Orders.name, partitions: 1 }),
              a.ensureTopic({ topic: Orders.deadLetterTopic, partitions: 1 })
            )
          ).pipe(Effect.provide(admin))
          const handled = yield* Deferred.make<void>()
          const consumers = [
            OutboxRuntime.consumer(
              Topic.consumer(Orders, {
                groupId: `startup-${runId}`,
                handler: () => Deferred.succeed(handled, undefined)
              })
            )
          ]
          const messages: Array<string> = []
          const logger = Logger.make<unknown, void>(({ message }) => {
            messages.push(Array.isArray(message) ? message.map(String).join(" ") : String(message))
          })
          const scope = yield* Scope.make()
          const context = yield* Layer.buildWithScope(
            runtimeFor(runId, services.kafkaBrokers, services.databaseUrl, consumers).pipe(
              Layer.provide(Logger.layer([logger]))
            ),
            scope
          )
          yield* Topic.enqueueAutocommit(Orders, { orderId: "o-1" }).pipe(Effect.provideContext(context))
          yield* Deferred.await(handled).pipe(Effect.timeout("60 seconds"))
          const closing = Date.now()
          yield* Scope.close(scope, Exit.void)
          const shutdown = Date.now() - closing
          assert.isBelow(shutdown, 2_000, `shutdown took ${shutdown} ms`)
          assert.strictEqual(messages.at(-1), "outbox runtime stopped", messages.slice(-5).join("\n"))
        }).pipe(
          Effect.ensuring(cleanUp(`startup_${runId}`, [Orders.name, Orders.deadLetterTopic])),
          Effect.provide(RealServices.layer),
          Effect.provideService(References.MinimumLogLevel, "Info")
        )
      },
      { timeout: 120_000 }
    )

    it.live(
      "a service process exits by itself within 1 s of its runtime stopping (no client handle left behind)",
      () => {
        const runId = randomUUID().replaceAll("-", "").slice(0, 10)
        const topic = `startup-${client}-${runId}.orders`
        return Effect.gen(function* () {
          const services = yield* RealServices.RealServices
          const child = spawn(process.execPath, [join(here, "runtime-exit-process.ts")], {
            env: {
              ...process.env,
              EXIT_CLIENT: client,
              EXIT_TOPIC: topic,
              EXIT_GROUP: `startup-${runId}`,
              OUTBOX_SCHEMA: `startup_${runId}`,
              DATABASE_URL: services.databaseUrl,
              KAFKA_BROKERS: services.kafkaBrokers.join(",")
            },
            stdio: ["ignore", "pipe", "ignore"]
          })
          const seen: Array<string> = []
          let endedAt = 0
          child.stdout.on("data", (chunk: Buffer) => {
            for (const line of chunk
              .toString()
              .split("\n")
              .filter((l) => l !== "")) {
              if (line === "handled" || line === "ended") seen.push(line)
              if (line === "ended") endedAt = Date.now()
            }
          })
          const code = yield* Effect.promise(
            () => new Promise<number | null>((resolve) => child.on("exit", (exitCode) => resolve(exitCode)))
          ).pipe(
            Effect.timeoutOrElse({
              duration: "60 seconds",
              orElse: () => Effect.sync(() => child.kill("SIGKILL")).pipe(Effect.as(-1))
            })
          )
          const lingered = Date.now() - endedAt
          assert.strictEqual(code, 0, seen.join("\n"))
          assert.deepStrictEqual(seen, ["handled", "ended"])
          assert.isBelow(lingered, 1_000, `the process exited ${lingered} ms after its program ended`)
        }).pipe(
          Effect.ensuring(cleanUp(`startup_${runId}`, [topic, `${topic}.DLT`])),
          Effect.provide(RealServices.layer)
        )
      },
      { timeout: 90_000 }
    )
  })
}

const here = dirname(fileURLToPath(import.meta.url))

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
    if (topics.length === 0) return
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
