// The demo against the real services: PostgreSQL and Kafka from the real-service harness
// (environment → Docker → scripts/services). Same flow, same checks as on the embedded default.

import { PgClient } from "@effect/sql-pg"
import { assert, describe, it } from "@effect/vitest"
import { RealServices } from "@effect-outbox/testing"
import * as Effect from "effect/Effect"
import * as Redacted from "effect/Redacted"
import * as References from "effect/References"
import * as SqlClient from "effect/sql/SqlClient"
import Kafkajs from "kafkajs"
import * as Program from "../src/Program.ts"

describe("demo on real services", () => {
  it.live(
    "runs to a summary with no loss, exactly-once effects and the poison record dead-lettered, then cleans up",
    () =>
      Effect.gen(function* () {
        const services = yield* RealServices.RealServices
        const runId = `it${Math.random().toString(36).slice(2, 8)}`
        const output: Array<string> = []
        const summary = yield* Program.runDemo({
          selection: { databaseUrl: Redacted.make(services.databaseUrl), kafkaBrokers: services.kafkaBrokers },
          runId,
          orders: 60,
          rollbackEvery: 6,
          flakyEvery: 5,
          poison: 2,
          write: (text) => void output.push(text),
          progress: { tty: false }
        }).pipe(Effect.provideService(References.MinimumLogLevel, "Error"))

        const text = output.join("")
        assert.include(text, "database: PostgreSQL at")
        assert.include(text, "broker:   Kafka at")
        assert.deepStrictEqual(summary.problems, [])
        assert.strictEqual(summary.ordersCommitted, 50)
        assert.strictEqual(summary.rolledBack, 10)
        assert.strictEqual(summary.eventsCommitted, 52)
        assert.strictEqual(summary.missingOnBroker, 0)
        assert.strictEqual(summary.phantomEvents, 0)
        assert.strictEqual(summary.invoices, 50)
        assert.strictEqual(summary.duplicateInvoices, 0)
        assert.strictEqual(summary.orderViolations, 0)
        assert.strictEqual(summary.deadLettered, 2)
        assert.strictEqual(summary.poisonDeadLettered, 2)
        assert.strictEqual(summary.consumerLag, 0)

        // A demo leaves a shared database and cluster as it found them.
        const schemas = yield* Effect.gen(function* () {
          const sql = yield* SqlClient.SqlClient
          return yield* sql<{
            n: number
          }>`select count(*)::int as n from information_schema.schemata where schema_name = ${`effect_outbox_demo_${runId}`}`
        }).pipe(Effect.provide(PgClient.layer({ url: Redacted.make(services.databaseUrl), maxConnections: 1 })))
        assert.strictEqual(schemas[0]!.n, 0)
        const topics = yield* Effect.promise(async () => {
          const admin = new Kafkajs.Kafka({
            brokers: [...services.kafkaBrokers],
            logLevel: Kafkajs.logLevel.NOTHING
          }).admin()
          await admin.connect()
          try {
            return await admin.listTopics()
          } finally {
            await admin.disconnect()
          }
        })
        assert.isFalse(topics.some((topic) => topic.includes(runId)))
      }).pipe(Effect.provide(RealServices.layer)),
    { timeout: 240_000 }
  )
})
