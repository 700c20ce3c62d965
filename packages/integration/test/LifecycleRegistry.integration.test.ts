// The lifecycle-driving group is one per topic across processes: a second group in another
// process is refused at start with the typed error (its message printed), while the first keeps
// running; the same group in another process is accepted; after release another group takes over.
// A group that starts on a topic it never committed on says where it reads from.

import { spawn } from "node:child_process"
import { randomUUID } from "node:crypto"
import { fileURLToPath } from "node:url"
import { PgClient } from "@effect/sql-pg"
import { assert, describe, it } from "@effect/vitest"
import * as KafkaOutbox from "@effect-outbox/adapter-kafka/KafkaOutbox"
import * as PgOutbox from "@effect-outbox/adapter-pg/PgOutbox"
import { BrokerAdmin } from "@effect-outbox/core/BrokerAdmin"
import { LifecycleRegistry } from "@effect-outbox/core/LifecycleRegistry"
import * as Outbox from "@effect-outbox/core/Outbox"
import * as OutboxRuntime from "@effect-outbox/core/OutboxRuntime"
import { OutboxStore } from "@effect-outbox/core/OutboxStore"
import * as Topic from "@effect-outbox/core/Topic"
import * as RealServices from "@effect-outbox/testing/RealServices"
import * as Duration from "effect/Duration"
import * as Effect from "effect/Effect"
import * as Layer from "effect/Layer"
import * as Logger from "effect/Logger"
import * as Option from "effect/Option"
import * as Queue from "effect/Queue"
import * as Redacted from "effect/Redacted"
import * as Schema from "effect/Schema"
import * as SqlClient from "effect/sql/SqlClient"
import Kafkajs from "kafkajs"

const script = fileURLToPath(new URL("./lifecycle-group-process.ts", import.meta.url))

interface Run {
  readonly code: number | null
  readonly lines: ReadonlyArray<string>
}

/** Starts the service in its own process; `stop` sends SIGTERM once it printed "ready". */
const otherProcess = (env: Record<string, string>) =>
  Effect.promise(
    () =>
      new Promise<Run>((resolve) => {
        const child = spawn(process.execPath, [script], {
          env: { ...process.env, ...env },
          stdio: ["ignore", "pipe", "inherit"]
        })
        const lines: Array<string> = []
        let buffer = ""
        child.stdout.on("data", (chunk: Buffer) => {
          buffer += chunk.toString()
          const parts = buffer.split("\n")
          buffer = parts.pop()!
          for (const line of parts) {
            lines.push(line)
            if (line === "ready") child.kill("SIGTERM")
          }
        })
        const timer = setTimeout(() => child.kill("SIGKILL"), 90_000)
        child.on("exit", (code) => {
          clearTimeout(timer)
          resolve({ code, lines })
        })
      })
  )

const Order = Schema.Struct({ orderId: Schema.String })

describe("the lifecycle-driving group across processes, on PostgreSQL and Kafka", () => {
  it.live(
    "another group in another process is refused and the first keeps running; the same group is accepted; release hands over",
    () => {
      const runId = randomUUID().replaceAll("-", "").slice(0, 10)
      const schema = `lifecycle_reg_${runId}`
      const Orders = Topic.make({ name: `lifecycle-reg-${runId}.orders`, schema: Order, key: (o) => o.orderId })
      const billing = `billing-${runId}`
      const shipping = `shipping-${runId}`
      return Effect.gen(function* () {
        const services = yield* RealServices.RealServices
        const childEnv = (group: string) => ({
          LG_SCHEMA: schema,
          LG_TOPIC: Orders.name,
          LG_GROUP: group,
          DATABASE_URL: services.databaseUrl,
          KAFKA_BROKERS: services.kafkaBrokers.join(",")
        })
        const kafka = KafkaOutbox.layer({ brokers: services.kafkaBrokers, clientId: "lifecycle-registry-test" })
        const storage = PgOutbox.layer({ schema }).pipe(
          Layer.provideMerge(PgClient.layer({ url: Redacted.make(services.databaseUrl), maxConnections: 3 }))
        )
        yield* BrokerAdmin.use((admin) =>
          Effect.andThen(
            admin.ensureTopic({ topic: Orders.name, partitions: 1 }),
            admin.ensureTopic({ topic: Orders.deadLetterTopic, partitions: 1 })
          )
        ).pipe(Effect.provide(kafka))

        const billed = yield* Queue.unbounded<string>()
        const infos: Array<string> = []
        const capture = Logger.make((options) => {
          if (options.logLevel === "Info") infos.push(String((options.message as ReadonlyArray<unknown>)[0]))
        })
        const runtime = OutboxRuntime.layer({
          relay: { instances: 1, pollInterval: Duration.millis(100) },
          consumers: [
            OutboxRuntime.consumer(
              Topic.consumer(Orders, { groupId: billing, handler: (m) => Queue.offer(billed, m.payload.orderId) })
            )
          ]
        }).pipe(Layer.provideMerge(Layer.merge(storage, kafka)), Layer.provide(Logger.layer([capture])))

        const finished = (orderId: string) =>
          Effect.gen(function* () {
            const id = yield* Outbox.withTransaction(Topic.enqueue(Orders, { orderId }))
            assert.strictEqual(yield* Queue.take(billed).pipe(Effect.timeout("60 seconds")), orderId)
            const store = yield* OutboxStore
            for (let i = 0; i < 100; i++) {
              if (Option.getOrUndefined(yield* store.get(id))?.status === "SUCCESS") return
              yield* Effect.sleep("100 millis")
            }
            assert.fail(`event of ${orderId} did not reach SUCCESS`)
          })

        yield* Effect.gen(function* () {
          yield* finished("o-1")
          assert.include(
            infos,
            `group ${billing} has no committed offsets on ${Orders.name}: reading from the earliest offset`
          )
          assert.isDefined(
            infos.find((l) => l.startsWith(`outbox runtime started (claim engine) on schema "${schema}" in database`))
          )

          // Another group, another process: refused with the typed error, message printed.
          const refused = yield* otherProcess(childEnv(shipping))
          assert.strictEqual(refused.code, 2, refused.lines.join("\n"))
          const error = JSON.parse(refused.lines.find((l) => l.startsWith("refused "))!.slice("refused ".length))
          assert.strictEqual(error._tag, "LifecycleGroupConflictError")
          assert.strictEqual(error.topic, Orders.name)
          assert.strictEqual(error.registered, billing)
          assert.deepStrictEqual(error.groups, [billing, shipping].sort())
          const printed: string = JSON.parse(
            refused.lines.find((l) => l.startsWith("printed "))!.slice("printed ".length)
          )
          assert.include(printed, "lifecycle: false")
          assert.include(printed, `effect-outbox lifecycle release --topic ${Orders.name} --group ${billing}`)

          // The first keeps running.
          yield* finished("o-2")

          // The same group in another process (another member, or a restart) starts.
          const member = yield* otherProcess(childEnv(billing))
          assert.deepStrictEqual([member.code, member.lines], [0, ["ready"]])
        }).pipe(Effect.provide(runtime), Effect.scoped)

        // billing retired: the operator releases the role, and shipping may take it.
        yield* Effect.gen(function* () {
          const registry = yield* LifecycleRegistry
          assert.isTrue(yield* registry.release(Orders.name, billing))
          const takeover = yield* otherProcess(childEnv(shipping))
          assert.deepStrictEqual([takeover.code, takeover.lines], [0, ["ready"]])
          assert.deepStrictEqual(
            (yield* registry.list({ topic: Orders.name })).map((r) => r.group),
            [shipping]
          )
        }).pipe(Effect.provide(storage))
      }).pipe(
        Effect.ensuring(cleanUp(schema, [Orders.name, Orders.deadLetterTopic])),
        Effect.provide(RealServices.layer)
      )
    },
    { timeout: 300_000 }
  )
})

/** Drops this run's schema and topics, pass or fail. */
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
