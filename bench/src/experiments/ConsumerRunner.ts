/**
 * What-if (not part of `pnpm bench`): the consumer runner (`Consumer.make` over the kafkajs
 * `ConsumerSource`, lifecycle on, the handler writing one order row) with `transaction:
 * "per-record"` vs `"per-batch"`, interleaved in one process, on a topic pre-filled with 1 KB
 * events that are not local outbox rows (a consumer in another service). See docs/performance.md.
 *
 *   node bench/src/experiments/ConsumerRunner.ts [messages=3000] [reps=2]
 */
import * as KafkaClient from "@effect-outbox/adapter-kafka/KafkaClient"
import * as KafkaConsumerSource from "@effect-outbox/adapter-kafka/KafkaConsumerSource"
import * as PgTables from "@effect-outbox/adapter-pg/PgTables"
import * as Consumer from "@effect-outbox/core/Consumer"
import * as Exit from "effect/Exit"
import * as Layer from "effect/Layer"
import * as Schema from "effect/Schema"
import * as Scope from "effect/Scope"
import * as Env from "../Env.ts"
import * as Library from "../Library.ts"
import * as Raw from "../Raw.ts"
import { createOrders } from "../scenarios/WritePath.ts"
import * as PgWire from "./pgWire.ts"

const { Effect, SqlClient } = Library
const messages = Number(process.argv[2] ?? 3000)
const reps = Number(process.argv[3] ?? 2)

const k = Env.kafka()
const admin = k.admin()
await admin.connect()
const producer = Env.rawProducer(k)
await producer.connect()
const topic = Env.uniqueName("bench-runner")
await Env.createTopic(admin, topic)
await Raw.sendBatchLoop(producer, topic, messages, 500)
const schema = Env.uniqueName("bench_runner")
const stack = await Library.makeStack({ schema, pgConnections: 4 })
await createOrders(stack, "orders")
const table = `${schema}.orders`

const source = KafkaConsumerSource.layer({ maxWaitTimeMillis: 100 }).pipe(
  Layer.provide(KafkaClient.layer({ brokers: Env.brokers, clientId: "bench-runner" }))
)
const Payload = Schema.Struct({ i: Schema.Number })

const processed = (group: string) =>
  stack.run(
    Effect.gen(function* () {
      const sql = yield* SqlClient.SqlClient
      const t = yield* PgTables.PgTables
      const rows = yield* sql.unsafe<{ n: number }>(
        `SELECT count(*)::int AS n FROM ${t.processed} WHERE consumer = $1`,
        [group]
      )
      return rows[0]!.n
    })
  )

const once = async (transaction: "per-record" | "per-batch"): Promise<number> => {
  const group = Env.uniqueName(`bench-runner-${transaction}`)
  const scope = await stack.run(Scope.make())
  const started = performance.now()
  PgWire.start()
  await stack.run(
    Consumer.make({
      groupId: group,
      topics: [topic],
      schema: Payload,
      fromBeginning: true,
      transaction,
      handler: (m) =>
        Effect.flatMap(
          Effect.service(SqlClient.SqlClient),
          (sql) =>
            sql`INSERT INTO ${sql(table)} (id, user_id, amount) VALUES (${m.eventId}, ${Env.keyOf(m.payload.i)}, ${m.payload.i % 997})`
        )
    }).pipe(Effect.provide(source), Scope.provide(scope))
  )
  while ((await processed(group)) < messages) await Env.sleep(20)
  const rate = (messages / (performance.now() - started)) * 1000
  // (the progress polls above are counted too: about one per 20 ms)
  PgWire.print(`  ${transaction}`, PgWire.stop(), messages)
  await stack.run(Scope.close(scope, Exit.void))
  return rate
}

const rates: Record<string, Array<number>> = { "per-record": [], "per-batch": [] }
for (let rep = 0; rep < reps; rep++) {
  const order = rep % 2 === 0 ? (["per-record", "per-batch"] as const) : (["per-batch", "per-record"] as const)
  for (const mode of order) {
    await stack.run(Effect.flatMap(SqlClient.SqlClient, (sql) => sql.unsafe(`TRUNCATE ${table}`)))
    const rate = await once(mode)
    rates[mode]!.push(rate)
    console.log(`rep ${rep + 1} ${mode}: ${Math.round(rate)} msg/s`)
  }
}
const median = (xs: Array<number>) => [...xs].sort((a, b) => a - b)[Math.floor(xs.length / 2)]!
console.log(
  `per-batch ÷ per-record: ×${(median(rates["per-batch"]!) / median(rates["per-record"]!)).toFixed(2)} ` +
    `(${Math.round(median(rates["per-batch"]!))} vs ${Math.round(median(rates["per-record"]!))} msg/s)`
)
await Env.deleteTopics(admin, [topic])
await producer.disconnect()
await admin.disconnect()
await Library.dropSchema(stack)
await stack.dispose()
process.exit(0)
