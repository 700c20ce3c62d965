// The CLI's topic commands and its broker bound against the real PostgreSQL and Kafka:
// `topics ensure` creates a topic with its dead-letter topic (dry run first), `topics list`
// shows the outbox's topics and what is missing, a broker nobody listens on fails a broker
// command within --broker-timeout (10 s by default) with one error, and `status` still prints
// the database's counts with a broker line.

import { randomUUID } from "node:crypto"
import { NodeServices } from "@effect/platform-node"
import { PgClient } from "@effect/sql-pg"
import { assert, describe, it } from "@effect/vitest"
import * as KafkaBrokerAdmin from "@effect-outbox/adapter-kafka/KafkaBrokerAdmin"
import { KafkaClient } from "@effect-outbox/adapter-kafka/KafkaClient"
import * as KafkaOutbox from "@effect-outbox/adapter-kafka/KafkaOutbox"
import * as PgOutbox from "@effect-outbox/adapter-pg/PgOutbox"
import { BrokerAdmin } from "@effect-outbox/core/BrokerAdmin"
import * as Outbox from "@effect-outbox/core/Outbox"
import { jsonPayload } from "@effect-outbox/core/OutboxMessage"
import * as Effect from "effect/Effect"
import * as Layer from "effect/Layer"
import * as Logger from "effect/Logger"
import * as Option from "effect/Option"
import * as Redacted from "effect/Redacted"
import * as References from "effect/References"
import * as SqlClient from "effect/sql/SqlClient"
import * as TestConsole from "effect/testing/TestConsole"
import * as Cli from "../src/Cli.ts"

const databaseUrl = process.env.DATABASE_URL ?? "postgres://postgres@127.0.0.1:5432/postgres"
const brokers = process.env.KAFKA_BROKERS ?? "127.0.0.1:9092"
const kafka = KafkaOutbox.layer({ brokers: brokers.split(","), clientId: "cli-topics-test" })

/** A fresh migrated schema, dropped afterwards, and the CLI run against it. */
const fixture = Effect.gen(function* () {
  const schema = `cli_topics_${randomUUID().replaceAll("-", "").slice(0, 16)}`
  const context = yield* Layer.buildWithScope(
    Outbox.layerWith({ maxPayloadBytes: 1_000_000 }).pipe(
      Layer.provideMerge(PgOutbox.layer({ schema, wakeUp: { listen: false } })),
      Layer.provideMerge(PgClient.layer({ url: Redacted.make(databaseUrl), maxConnections: 2 }))
    ),
    yield* Effect.scope
  )
  yield* Effect.addFinalizer(() =>
    Effect.flatMap(
      Effect.service(SqlClient.SqlClient),
      (sql) => sql.unsafe(`DROP SCHEMA IF EXISTS "${schema}" CASCADE`).unprepared
    ).pipe(Effect.provideContext(context), Effect.ignore)
  )
  const enqueue = (topic: string) =>
    Outbox.enqueueAutocommit({ topic, key: "k", payload: jsonPayload({ n: 1 }) }).pipe(
      Effect.provideContext(context),
      Effect.provideService(References.MinimumLogLevel, "Warn")
    )
  const loud: Array<string> = []
  const logger = Logger.make(({ logLevel, message }) => {
    if (logLevel === "Warn" || logLevel === "Error")
      loud.push(Array.isArray(message) ? message.join(" ") : String(message))
  })
  /** Runs the CLI on `brokersFlag`; answers its output, its failure message and how long it took. */
  const cli = (brokersFlag: string, ...args: ReadonlyArray<string>) =>
    Effect.gen(function* () {
      const started = Date.now()
      const exit = yield* Effect.exit(
        Cli.run(["--database-url", databaseUrl, "--schema", schema, "--brokers", brokersFlag, ...args])
      )
      const millis = Date.now() - started
      const out = (yield* TestConsole.logLines).map(String).join("\n")
      const err = (yield* TestConsole.errorLines).map(String).join("\n")
      return { ok: exit._tag === "Success", out, err, millis, exit: String(exit) }
    }).pipe(
      Effect.provide(TestConsole.layer),
      Effect.provide(NodeServices.layer),
      Effect.provideService(Logger.CurrentLoggers, new Set([logger])),
      Effect.provideService(References.MinimumLogLevel, "Warn")
    )
  return { schema, enqueue, cli, loud }
})

const partitionsOf = (topic: string) =>
  BrokerAdmin.use((admin) => admin.partitionCount(topic)).pipe(Effect.provide(kafka))

const dropTopics = (topics: ReadonlyArray<string>) =>
  KafkaClient.use((client) => KafkaBrokerAdmin.deleteTopics(client.admin, topics)).pipe(Effect.provide(kafka))

describe("effect-outbox topics", () => {
  it.live(
    "topics ensure: a dry run creates nothing; --execute creates the topic and its .DLT; list shows them",
    () =>
      Effect.gen(function* () {
        const f = yield* fixture
        const topic = `cli-topics-${randomUUID().slice(0, 8)}.orders`
        yield* Effect.addFinalizer(() => dropTopics([topic, `${topic}.DLT`]))
        yield* f.enqueue(topic)

        const listed = yield* f.cli(brokers, "topics", "list")
        assert.isTrue(listed.ok, listed.exit)
        assert.include(listed.out, `effect-outbox topics ensure ${topic} --execute`)

        const dry = yield* f.cli(brokers, "topics", "ensure", topic, "--partitions", "3")
        assert.isTrue(dry.ok, dry.exit)
        assert.include(dry.out, "would create")
        assert.include(dry.out, `${topic}.DLT`)
        assert.isTrue(Option.isNone(yield* partitionsOf(topic)))

        const done = yield* f.cli(brokers, "topics", "ensure", topic, "--partitions", "3", "--execute")
        assert.isTrue(done.ok, done.exit)
        assert.deepStrictEqual(yield* partitionsOf(topic), Option.some(3))
        assert.deepStrictEqual(yield* partitionsOf(`${topic}.DLT`), Option.some(3))

        const again = yield* f.cli(brokers, "topics", "ensure", topic, "--execute")
        assert.isTrue(again.ok, again.exit)
        assert.notInclude(again.out, "created")

        const json = yield* f.cli(brokers, "topics", "list", "--json")
        assert.deepStrictEqual(JSON.parse(json.out), [{ topic, rows: 1, partitions: 3, deadLetterPartitions: 3 }])
      }),
    { timeout: 60_000 }
  )

  it.live(
    "a broker nobody listens on: a broker command fails within 10 s with one error; status prints the counts and a broker line",
    () =>
      Effect.gen(function* () {
        const f = yield* fixture
        yield* f.enqueue("cli-topics-unreachable")

        const failed = yield* f.cli("127.0.0.1:1", "dlt", "list", "orders.DLT")
        assert.isFalse(failed.ok)
        assert.include(failed.exit, "cannot reach the Kafka brokers 127.0.0.1:1")
        assert.include(failed.exit, "ECONNREFUSED")
        assert.isAtMost(failed.millis, 13_000, `took ${failed.millis} ms`)

        const status = yield* f.cli("127.0.0.1:1", "status", "--group", "billing")
        assert.isTrue(status.ok, status.exit)
        assert.include(status.out, "events 1")
        assert.include(status.out, "broker: cannot reach the Kafka brokers 127.0.0.1:1")
        assert.isAtMost(status.millis, 13_000, `took ${status.millis} ms`)
        assert.deepStrictEqual(f.loud, [])
      }),
    { timeout: 60_000 }
  )
})
