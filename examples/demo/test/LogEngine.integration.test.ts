// The quick start's producer on the log engine (src/LogEngine.ts), on the real services: a
// PostgreSQL with wal_level = logical (LOGICAL_DATABASE_URL, started by scripts/test) and the real
// Kafka broker. The domain code is the quick start's, unchanged; only the layer differs.

import { randomUUID } from "node:crypto"
import { assert, describe, it } from "@effect/vitest"
import * as PgLogSource from "@effect-outbox/adapter-pg/PgLogSource"
import { BrokerAdmin } from "@effect-outbox/core/BrokerAdmin"
import { TopicReader } from "@effect-outbox/core/TopicReader"
import * as Effect from "effect/Effect"
import * as Fiber from "effect/Fiber"
import * as Stream from "effect/Stream"
import * as SqlClient from "effect/sql/SqlClient"
import { vi } from "vitest"
import * as LogEngine from "../src/LogEngine.ts"
import * as Quickstart from "../src/Quickstart.ts"

// The quick start module ends by launching its configured service: not here.
vi.mock("@effect/platform-node", async (importOriginal) => {
  const original = await importOriginal<typeof import("@effect/platform-node")>()
  return { ...original, NodeRuntime: { ...original.NodeRuntime, runMain: () => undefined } }
})

const options: LogEngine.Options = {
  url: process.env.LOGICAL_DATABASE_URL ?? "postgres://postgres@127.0.0.1:25433/postgres",
  brokers: (process.env.KAFKA_BROKERS ?? "127.0.0.1:9092").split(","),
  slot: `demo_log_${randomUUID().slice(0, 8)}`
}

describe("the quick start on the log engine", () => {
  it.live(
    "orders committed with their events reach Kafka in commit order; a rolled-back order's event never does",
    () =>
      Effect.gen(function* () {
        const sql = yield* SqlClient.SqlClient
        const reader = yield* TopicReader
        const ordersOnKafka = Stream.runCollect(reader.read(Quickstart.Orders.name))
        yield* sql`CREATE TABLE IF NOT EXISTS orders (id text PRIMARY KEY, amount_cents integer NOT NULL)`
        yield* BrokerAdmin.use((admin) => admin.ensureTopic({ topic: Quickstart.Orders.name, partitions: 2 }))
        const run = randomUUID().slice(0, 8)
        const ids = Array.from({ length: 5 }, (_, i) => `log-${run}-${i}`)
        const relay = yield* Effect.forkChild(LogEngine.relay)
        for (const [i, orderId] of ids.entries()) yield* Quickstart.placeOrder({ orderId, amountCents: 100 * (i + 1) })
        // The same order again: the insert fails and the transaction, its event with it, rolls back.
        const duplicate = yield* Effect.exit(Quickstart.placeOrder({ orderId: ids[0]!, amountCents: 1 }))
        assert.strictEqual(duplicate._tag, "Failure")

        const ours = (key: string | null) => key?.startsWith(`log-${run}-`) === true
        let keys: Array<string> = []
        for (let attempt = 0; attempt < 150 && keys.length < ids.length; attempt++) {
          if (attempt > 0) yield* Effect.sleep("200 millis")
          const records = yield* ordersOnKafka
          keys = records.flatMap((r) => (ours(r.key) ? [r.key!] : []))
        }
        yield* Effect.sleep("1 second") // the rolled-back event or a duplicate would show up here
        const records = yield* ordersOnKafka
        const delivered = records
          .filter((r) => ours(r.key))
          .map((r) => ({
            partition: r.partition,
            ...(JSON.parse(new TextDecoder().decode(r.value)) as { orderId: string; amountCents: number })
          }))
        yield* Fiber.interrupt(relay)

        assert.sameMembers(
          delivered.map((d) => d.orderId),
          ids,
          "every committed order's event, once"
        )
        assert.strictEqual(delivered.length, ids.length)
        assert.isFalse(
          delivered.some((d) => d.amountCents === 1),
          "the rolled-back order's event"
        )
        // Commit order: each partition holds its orders in the order they were placed.
        for (const partition of new Set(delivered.map((d) => d.partition))) {
          const placed = delivered.filter((d) => d.partition === partition).map((d) => ids.indexOf(d.orderId))
          assert.deepStrictEqual(
            placed,
            [...placed].sort((a, b) => a - b)
          )
        }
      }).pipe(
        Effect.ensuring(Effect.ignore(PgLogSource.dropSlot({ slot: options.slot }))),
        Effect.provide(LogEngine.layer(options))
      ),
    60_000
  )
})
