// The README's quick start, compiled and tested here (test/Quickstart.test.ts) so it never rots:
// the test checks this file is the README's block, with `export` added.
// biome-ignore-all format: kept exactly as the README shows it
import { createServer } from "node:http"
import { NodeHttpServer, NodeRuntime } from "@effect/platform-node"
import { KafkaOutbox } from "@effect-outbox/adapter-kafka"
import { PgOutbox } from "@effect-outbox/adapter-pg"
import { Outbox, OutboxRuntime, Topic } from "@effect-outbox/core"
import { Effect, Layer, Schema } from "effect"
import { HttpRouter, HttpServerRequest, HttpServerResponse } from "effect/http"
import { SqlClient } from "effect/sql"

// 1. Declare a topic once: it types the producer and the consumer.
const OrderPlaced = Schema.Struct({ orderId: Schema.String, amountCents: Schema.Int })
export const Orders = Topic.make({ name: "orders", schema: OrderPlaced, key: (order) => order.orderId })

// 2. Write your state and its event in ONE transaction: both commit, or neither.
//    Topic.enqueue compiles only inside Outbox.withTransaction; your SqlClient writes join it.
export const placeOrder = (order: typeof OrderPlaced.Type) => Outbox.withTransaction(Effect.gen(function*() {
  const sql = yield* SqlClient.SqlClient
  yield* sql`INSERT INTO orders ${sql.insert({ id: order.orderId, amount_cents: order.amountCents })}`
  yield* Topic.enqueue(Orders, order)
}))

// 3. Consume: the handler's writes commit with the inbox record (exactly-once effects);
//    records that do not decode or keep failing go to orders.DLT after bounded retries.
export const billing = OutboxRuntime.consumer(Topic.consumer(Orders, {
  groupId: "billing",
  handler: (message) => Effect.gen(function*() {
    const sql = yield* SqlClient.SqlClient
    yield* sql`INSERT INTO invoices ${sql.insert({ order_id: message.payload.orderId, event_id: message.idempotencyKey })}`
  })
}))

// 4. One layer runs the relay, stale recovery, retention and the consumers.
//    Configured from the environment: DATABASE_URL, KAFKA_BROKERS, OUTBOX_* (every variable: docs/configuration.md).
export const OutboxLive = OutboxRuntime.layer({ consumers: [billing] }).pipe(
  // (or PlatformaticOutbox.layerConfig() from @effect-outbox/adapter-kafka-platformatic: one line)
  Layer.provide(KafkaOutbox.layerConfig()), // the publisher stays inside: nothing publishes around the outbox
  Layer.provideMerge(PgOutbox.layerConfig) // your code shares the SqlClient and its transactions
)

// 5. Serve requests inside the runtime, launched ONCE for the life of the process: the relay and
//    billing keep running between requests, and stop cleanly on SIGINT/SIGTERM.
export const Api = HttpRouter.add("POST", "/orders", Effect.gen(function*() {
  yield* placeOrder(yield* HttpServerRequest.schemaBodyJson(OrderPlaced))
  return HttpServerResponse.empty({ status: 201 })
}))

HttpRouter.serve(Api).pipe(
  Layer.provide(NodeHttpServer.layer(createServer, { port: 3000 })),
  Layer.provide(OutboxLive),
  Layer.launch,
  NodeRuntime.runMain
)
