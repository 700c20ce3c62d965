/**
 * Scenario 8: key-ordered concurrency inside a partition. One partition pre-filled with 1 KB
 * events, a handler that waits 20 ms (an HTTP call) inside its per-record transaction, consumed
 * by the runner (`Consumer.make` over the kafkajs `ConsumerSource`) one record at a time
 * (`concurrency` default: the baseline) and with `concurrency: { by: "key", perPartition: 64 }`,
 * side by side in each repetition, over 1,000 keys and over 10 keys. The rate is taken between
 * the first records and the target count, so the group join is not in it. The handler holds its
 * transaction's connection while it waits: the pool (48 connections here, shared services)
 * caps the concurrent run at 48 handlers, so 48× is this setup's ceiling.
 */
import * as KafkaClient from "@effect-outbox/adapter-kafka/KafkaClient"
import * as KafkaConsumerSource from "@effect-outbox/adapter-kafka/KafkaConsumerSource"
import * as PgTables from "@effect-outbox/adapter-pg/PgTables"
import * as Consumer from "@effect-outbox/core/Consumer"
import * as Exit from "effect/Exit"
import * as Layer from "effect/Layer"
import * as Schema from "effect/Schema"
import * as Scope from "effect/Scope"
import type Kafkajs from "kafkajs"
import * as Env from "../Env.ts"
import * as Library from "../Library.ts"
import * as Report from "../Report.ts"

const { Effect, SqlClient } = Library

export interface Options {
  readonly reps: number
  /** Tiny sizes: the code path once (`pnpm bench --smoke`), no meaningful rate. */
  readonly smoke?: boolean
}

const PER_PARTITION = 64
const PG_CONNECTIONS = 48
/** Records the sequential run measures (20 ms each: about 4 s) and the concurrent one. */
const SEQUENTIAL = 200
const CONCURRENT = 4_000
/** Records processed before the clock starts (the group join and the first fetch are not timed). */
const WARM = { sequential: 5, concurrent: 200 } as const

const Payload = Schema.Struct({ i: Schema.Number })

/** `n` records on a one-partition topic, keys `user-<i % keys>`. */
const fill = async (admin: Kafkajs.Admin, producer: Kafkajs.Producer, keys: number, n: number) => {
  const topic = Env.uniqueName(`bench-s6-${keys}`)
  await admin.createTopics({ topics: [{ topic, numPartitions: 1, replicationFactor: 1 }], waitForLeaders: true })
  for (let from = 0; from < n; from += 500) {
    const messages = Array.from({ length: Math.min(500, n - from) }, (_, j) => {
      const i = from + j
      return {
        key: `user-${i % keys}`,
        value: Buffer.from(JSON.stringify({ i, pad: "x".repeat(Env.PAYLOAD_BYTES - 40) })),
        headers: { "event-id": Env.newEventId() }
      }
    })
    await producer.sendBatch({ acks: -1, topicMessages: [{ topic, messages }] })
  }
  return topic
}

export const run = async (options: Options): Promise<void> => {
  console.log(`\n## 8. key-ordered concurrency in one partition (20 ms handler, ${options.reps} reps)`)
  const k = Env.kafka()
  const admin = k.admin()
  await admin.connect()
  const producer = Env.rawProducer(k)
  await producer.connect()
  const schema = Env.uniqueName("bench_s6")
  const stack = await Library.makeStack({ schema, pgConnections: PG_CONNECTIONS })
  const source = KafkaConsumerSource.layer({ maxWaitTimeMillis: 100 }).pipe(
    Layer.provide(KafkaClient.layer({ brokers: Env.brokers, clientId: "bench-s6" }))
  )
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
  /** Records/s between `warm` and `target` processed records. */
  const size =
    options.smoke === true ? { sequential: 20, concurrent: 200 } : { sequential: SEQUENTIAL, concurrent: CONCURRENT }
  const warm = options.smoke === true ? { sequential: 2, concurrent: 20 } : WARM
  const once = async (topic: string, mode: "sequential" | "concurrent"): Promise<number> => {
    const group = Env.uniqueName(`bench-s6-${mode}`)
    const scope = await stack.run(Scope.make())
    await stack.run(
      Consumer.make({
        groupId: group,
        topics: [topic],
        schema: Payload,
        fromBeginning: true,
        ...(mode === "concurrent" ? { concurrency: { by: "key" as const, perPartition: PER_PARTITION } } : {}),
        handler: () => Effect.sleep("20 millis")
      }).pipe(Effect.provide(source), Scope.provide(scope))
    )
    const target = size[mode]
    const deadline = Date.now() + 120_000
    let started: { readonly at: number; readonly count: number } | undefined
    let count = 0
    while (count < target && Date.now() < deadline) {
      count = await processed(group)
      if (started === undefined && count >= warm[mode]) started = { at: performance.now(), count }
      if (count < target) await Env.sleep(10)
    }
    const rate = started === undefined ? 0 : ((count - started.count) / (performance.now() - started.at)) * 1000
    await stack.run(Scope.close(scope, Exit.void))
    return rate
  }
  const topics: Array<string> = []
  try {
    for (const keys of [1_000, 10]) {
      const topic = await fill(admin, producer, keys, size.concurrent + size.concurrent / 8)
      topics.push(topic)
      const sequential: Array<number> = []
      const concurrent: Array<number> = []
      for (let rep = 0; rep < options.reps; rep++) {
        // Alternating which runs first, so drift in the shared machine's load hits both.
        const order = rep % 2 === 0 ? (["sequential", "concurrent"] as const) : (["concurrent", "sequential"] as const)
        for (const mode of order) {
          const rate = await once(topic, mode)
          ;(mode === "sequential" ? sequential : concurrent).push(rate)
          console.log(`  ${keys} keys, rep ${rep + 1}, ${mode}: ${Math.round(rate)} records/s`)
        }
      }
      const row = Report.pair(
        {
          scenario: "8 key concurrency",
          variant: `1 partition, ${keys} keys, 20 ms handler, per-record, perPartition ${PER_PARTITION}`,
          unit: "records/s",
          baselineName: "sequential",
          target: keys === 1_000 ? "≥ 30×" : "≥ 8×",
          note: `pool of ${PG_CONNECTIONS} connections (the handler holds one while it waits)`
        },
        concurrent,
        sequential
      )
      Report.add({ ...row, met: row.ratio!.median >= (keys === 1_000 ? 30 : 8) })
    }
  } finally {
    await Env.deleteTopics(admin, topics)
    await producer.disconnect()
    await admin.disconnect()
    await Library.dropSchema(stack)
    await stack.dispose()
  }
}
