// The README's quick start runs: its HTTP route, producer and consumer, served inside ONE runtime
// on the embedded PostgreSQL and the in-memory broker instead of DATABASE_URL / KAFKA_BROKERS
// (adapters swap by swapping layers). Its last statement launches the configured service, so
// NodeRuntime.runMain is replaced here by a recorder: importing the module must launch once.

import { readFileSync } from "node:fs"
import { NodeHttpServer } from "@effect/platform-node"
import { assert, describe, it } from "@effect/vitest"
import { BrokerAdmin } from "@effect-outbox/core/BrokerAdmin"
import * as OutboxRuntime from "@effect-outbox/core/OutboxRuntime"
import * as Duration from "effect/Duration"
import * as Effect from "effect/Effect"
import { HttpClient, HttpClientRequest, HttpRouter } from "effect/http"
import * as Layer from "effect/Layer"
import * as References from "effect/References"
import * as SqlClient from "effect/sql/SqlClient"
import { vi } from "vitest"
import * as Quickstart from "../src/Quickstart.ts"
import * as Services from "../src/Services.ts"

const launched = vi.hoisted(() => [] as Array<unknown>)
vi.mock("@effect/platform-node", async (importOriginal) => {
  const original = await importOriginal<typeof import("@effect/platform-node")>()
  return { ...original, NodeRuntime: { ...original.NodeRuntime, runMain: (main: unknown) => void launched.push(main) } }
})

const embedded: Services.Selection = { databaseUrl: undefined, kafkaBrokers: undefined }

describe("quick start", () => {
  it("src/Quickstart.ts is the README's quick start, word for word (plus `export`), under 40 lines of code", () => {
    const readme = readFileSync(new URL("../../../README.md", import.meta.url), "utf8")
    const block = /## Quick start[\s\S]*?```ts\n([\s\S]*?)```/.exec(readme)?.[1]
    assert.isDefined(block, "README.md has a ```ts block under ## Quick start")
    const source = readFileSync(new URL("../src/Quickstart.ts", import.meta.url), "utf8")
      .split("\n")
      .filter((line, i) => !(i < 3 && line.startsWith("//")))
      .map((line) => line.replace(/^export /, ""))
      .join("\n")
    assert.strictEqual(source, block)
    const code = block!.split("\n").filter((line) => line.trim() !== "" && !line.trim().startsWith("//"))
    assert.isAtMost(code.length, 40)
  })

  it("the module launches its runtime once, at start-up (not once per request)", () => {
    assert.strictEqual(launched.length, 1)
    assert.isTrue(Effect.isEffect(launched[0]))
  })

  it.live(
    "POST /orders commits an order and its event together; billing writes one invoice per order",
    () =>
      Effect.gen(function* () {
        const sql = yield* SqlClient.SqlClient
        yield* sql`CREATE TABLE orders (id text PRIMARY KEY, amount_cents integer NOT NULL)`
        yield* sql`CREATE TABLE invoices (order_id text NOT NULL, event_id text NOT NULL)`
        // Like a Kafka cluster without auto-creation, the broker needs its topics first.
        yield* BrokerAdmin.use((admin) =>
          Effect.andThen(
            admin.ensureTopic({ topic: Quickstart.Orders.name, partitions: 2 }),
            admin.ensureTopic({ topic: Quickstart.Orders.deadLetterTopic, partitions: 1 })
          )
        )
        // The quick start's service, its runtime built once, with a test HTTP server and client.
        const app = HttpRouter.serve(Quickstart.Api).pipe(
          Layer.provideMerge(NodeHttpServer.layerTest),
          Layer.provideMerge(
            OutboxRuntime.layer({
              relay: { instances: 1, pollInterval: Duration.millis(50) },
              consumers: [Quickstart.billing]
            })
          )
        )
        const post = (order: unknown) =>
          HttpClient.HttpClient.use((client) =>
            client.execute(HttpClientRequest.post("/orders").pipe(HttpClientRequest.bodyJsonUnsafe(order)))
          ).pipe(Effect.map((response) => response.status))
        const invoices = yield* Effect.gen(function* () {
          assert.strictEqual(yield* post({ orderId: "o-1", amountCents: 1200 }), 201)
          assert.strictEqual(yield* post({ orderId: "o-2", amountCents: 800 }), 201)
          // The same order again: the insert fails, the transaction rolls back, its event with it.
          assert.notStrictEqual(yield* post({ orderId: "o-1", amountCents: 1 }), 201)
          for (let i = 0; i < 200; i++) {
            const rows = yield* sql<{ n: number }>`SELECT count(*)::int AS n FROM invoices`
            if (rows[0]!.n >= 2) break
            yield* Effect.sleep("50 millis")
          }
          yield* Effect.sleep("300 millis")
          return yield* sql<{ order_id: string }>`SELECT order_id FROM invoices ORDER BY order_id`
        }).pipe(Effect.provide(app))
        assert.deepStrictEqual(
          invoices.map((r) => r.order_id),
          ["o-1", "o-2"]
        )
        const orders = yield* sql<{ id: string; amount_cents: number }>`SELECT id, amount_cents FROM orders ORDER BY id`
        assert.deepStrictEqual(
          orders.map((r) => [r.id, r.amount_cents]),
          [
            ["o-1", 1200],
            ["o-2", 800]
          ]
        )
      }).pipe(
        Effect.provide(Layer.merge(Services.database(embedded, "quickstart"), Services.broker(embedded))),
        Effect.provideService(References.MinimumLogLevel, "Error")
      ),
    { timeout: 240_000 }
  )
})
