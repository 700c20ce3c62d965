// The demo on the log engine (`scripts/dev demo --engine log`): a PostgreSQL with wal_level =
// logical (LOGICAL_DATABASE_URL, started by scripts/test) and the real Kafka broker. Same flow,
// same checks as on the claim engine; the run leaves no schema, slot or topic behind.

import { PgClient } from "@effect/sql-pg"
import { assert, describe, it } from "@effect/vitest"
import * as Cause from "effect/Cause"
import * as Effect from "effect/Effect"
import * as Exit from "effect/Exit"
import * as Redacted from "effect/Redacted"
import * as References from "effect/References"
import * as SqlClient from "effect/sql/SqlClient"
import Kafkajs from "kafkajs"
import * as Program from "../src/Program.ts"
import * as Services from "../src/Services.ts"

const logicalUrl = process.env.LOGICAL_DATABASE_URL ?? "postgres://postgres@127.0.0.1:25433/postgres"
const brokers = (process.env.KAFKA_BROKERS ?? "127.0.0.1:9092").split(",")

describe("demo on the log engine", () => {
  it.live(
    "runs to a summary with no loss, exactly-once effects and the poison record dead-lettered, then cleans up",
    () =>
      Effect.gen(function* () {
        const runId = `lg${Math.random().toString(36).slice(2, 8)}`
        const output: Array<string> = []
        const summary = yield* Program.runDemo({
          selection: { databaseUrl: Redacted.make(logicalUrl), kafkaBrokers: brokers },
          engine: "log",
          runId,
          orders: 60,
          rollbackEvery: 6,
          flakyEvery: 5,
          poison: 2,
          write: (text) => void output.push(text),
          progress: { tty: false }
        }).pipe(Effect.provideService(References.MinimumLogLevel, "Error"))

        const text = output.join("")
        assert.include(text, "engine:   log (one relay streams the WAL from slot")
        assert.deepStrictEqual(summary.problems, [])
        assert.strictEqual(summary.ordersCommitted, 50)
        assert.strictEqual(summary.rolledBack, 10)
        assert.strictEqual(summary.eventsCommitted, 52)
        assert.strictEqual(summary.published, 52)
        assert.strictEqual(summary.missingOnBroker, 0)
        assert.strictEqual(summary.phantomEvents, 0)
        assert.strictEqual(summary.processed, 50)
        assert.strictEqual(summary.invoices, 50)
        assert.strictEqual(summary.duplicateInvoices, 0)
        assert.strictEqual(summary.orderViolations, 0)
        assert.strictEqual(summary.deadLettered, 2)
        assert.strictEqual(summary.poisonDeadLettered, 2)
        assert.strictEqual(summary.unfinished, 0)
        assert.strictEqual(summary.consumerLag, 0)

        // The run's schema and slot are gone, and so are its topics.
        const schema = `effect_outbox_demo_${runId}`
        const left = yield* Effect.gen(function* () {
          const sql = yield* SqlClient.SqlClient
          const schemas = yield* sql<{
            n: number
          }>`select count(*)::int as n from information_schema.schemata where schema_name = ${schema}`
          const slots = yield* sql<{
            n: number
          }>`select count(*)::int as n from pg_replication_slots where slot_name = ${Services.slotOf(schema)}`
          return schemas[0]!.n + slots[0]!.n
        }).pipe(Effect.provide(PgClient.layer({ url: Redacted.make(logicalUrl), maxConnections: 1 })))
        assert.strictEqual(left, 0)
        const topics = yield* Effect.promise(async () => {
          const admin = new Kafkajs.Kafka({ brokers, logLevel: Kafkajs.logLevel.NOTHING }).admin()
          await admin.connect()
          try {
            return await admin.listTopics()
          } finally {
            await admin.disconnect()
          }
        })
        assert.isFalse(topics.some((topic) => topic.includes(runId)))
      }),
    { timeout: 240_000 }
  )

  it.live("on a server without wal_level = logical it stops before creating anything, saying what to do", () =>
    Effect.gen(function* () {
      const sharedUrl = process.env.DATABASE_URL ?? "postgres://postgres@127.0.0.1:5432/postgres"
      const runId = `lg${Math.random().toString(36).slice(2, 8)}`
      const exit = yield* Effect.exit(
        Program.runDemo({
          selection: { databaseUrl: Redacted.make(sharedUrl), kafkaBrokers: undefined },
          engine: "log",
          runId,
          write: () => {}
        })
      )
      const text = Exit.isFailure(exit) ? Cause.pretty(exit.cause) : ""
      assert.include(text, "runs wal_level = replica; the log engine reads the WAL")
      assert.include(text, "scripts/services pg-private up")
      const schemas = yield* Effect.flatMap(
        Effect.service(SqlClient.SqlClient),
        (sql) =>
          sql<{ n: number }>`select count(*)::int as n from information_schema.schemata
          where schema_name = ${`effect_outbox_demo_${runId}`}`
      ).pipe(Effect.provide(PgClient.layer({ url: Redacted.make(sharedUrl), maxConnections: 1 })))
      assert.strictEqual(schemas[0]!.n, 0)
    })
  )
})
