/**
 * Scenario 4: the idempotent consumer. A topic pre-filled with 1 KB events is consumed from the
 * beginning by a fresh group for each variant: the dedupe row with the business write ÷ the same
 * business write without it — `Inbox.processOnce` with one transaction per message, and
 * `Inbox.processBatch` (one transaction and one record statement) per kafkajs batch; and ÷ a no-op
 * kafkajs consumer (the ceiling of delivery alone). `processOnce` nested in one transaction per
 * batch (what a per-batch consumer did before `processBatch`; it now joins that one
 * transaction) is
 * measured too, for comparison.
 */
import type Kafkajs from "kafkajs"
import * as Cpu from "../Cpu.ts"
import * as Env from "../Env.ts"
import * as Library from "../Library.ts"
import * as Raw from "../Raw.ts"
import * as Report from "../Report.ts"
import { createOrders } from "./WritePath.ts"

export interface Options {
  readonly reps: number
  readonly messages: number
}

interface Sample {
  readonly rate: number
  readonly cpu: Cpu.CpuUse
}

/** The order row a consumed event causes (as `Library.handleConsumed` writes it). */
const insertOrder = (table: string, m: Library.Consumed) =>
  Library.Effect.flatMap(
    Library.Effect.service(Library.SqlClient.SqlClient),
    (sql) => sql`INSERT INTO ${sql(table)} (id, user_id, amount) VALUES (${m.eventId}, ${Env.keyOf(m.i)}, ${m.i % 997})`
  )

/** One kafkajs batch through `Inbox.processBatch`: one transaction, one record statement. */
const processBatch = (stack: Library.Stack, table: string, messages: ReadonlyArray<Library.Consumed>) =>
  stack.run(
    Library.Effect.flatMap(
      Library.Inbox.processBatch(
        messages.map((m) => ({
          key: { consumer: "bench", identity: Library.Inbox.eventIdentity(m.eventId) },
          work: insertOrder(table, m)
        }))
      ),
      (results) => {
        const failed = results.find((exit) => exit._tag === "Failure")
        return failed === undefined ? Library.Effect.void : Library.Effect.die(failed)
      }
    )
  )

const consume = async (
  k: Kafkajs.Kafka,
  topic: string,
  expected: number,
  handle: (messages: ReadonlyArray<Library.Consumed>) => Promise<unknown>
): Promise<number> => {
  const consumer = k.consumer({ groupId: Env.uniqueName("bench-s4"), maxWaitTimeInMs: 100 })
  await consumer.connect()
  try {
    await consumer.subscribe({ topic, fromBeginning: true })
    let count = 0
    const started = performance.now()
    await new Promise<void>((resolve, reject) => {
      const timer = setTimeout(() => reject(new Error(`consumed ${count}/${expected} in time`)), 600_000)
      void consumer
        .run({
          autoCommit: true,
          eachBatch: async ({ batch, resolveOffset, heartbeat }) => {
            const messages = batch.messages.map((m) => ({
              eventId: m.headers!["event-id"]!.toString(),
              i: Number(m.offset),
              topic: batch.topic,
              partition: batch.partition,
              offset: m.offset
            }))
            await handle(messages).catch((error) => {
              clearTimeout(timer)
              reject(error)
              throw error
            })
            for (const m of batch.messages) resolveOffset(m.offset)
            await heartbeat()
            count += messages.length
            if (count >= expected) {
              clearTimeout(timer)
              resolve()
            }
          }
        })
        .catch(reject)
    })
    return performance.now() - started
  } finally {
    await consumer.disconnect()
  }
}

export const run = async (options: Options): Promise<void> => {
  console.log(`\n## 4. idempotent consumer (${options.messages} messages, ${options.reps} reps)`)
  const k = Env.kafka()
  const admin = k.admin()
  await admin.connect()
  const producer = Env.rawProducer(k)
  await producer.connect()
  const topic = Env.uniqueName("bench-s4")
  await Env.createTopic(admin, topic)
  await Raw.sendBatchLoop(producer, topic, options.messages, 500)
  const schema = Env.uniqueName("bench_s4")
  const stack = await Library.makeStack({ schema, pgConnections: 4 })
  await createOrders(stack, "orders")
  const table = `${schema}.orders`
  const truncate = () =>
    stack
      .run(
        Library.Effect.gen(function* () {
          const sql = yield* Library.SqlClient.SqlClient
          yield* sql.unsafe(`TRUNCATE "${schema}"."orders"`).unprepared
        })
      )
      .then(() => Library.truncate(stack))

  type Variant = { readonly label: string; readonly handle: (ms: ReadonlyArray<Library.Consumed>) => Promise<unknown> }
  const variants: Array<Variant> = [
    { label: "no-op kafkajs", handle: async () => undefined },
    {
      label: "write, tx per message",
      handle: (ms) => Library.handleConsumed(stack, table, ms, { dedupe: false, perBatch: false })
    },
    {
      label: "processOnce, tx per message",
      handle: (ms) => Library.handleConsumed(stack, table, ms, { dedupe: true, perBatch: false })
    },
    {
      label: "write, tx per batch",
      handle: (ms) => Library.handleConsumed(stack, table, ms, { dedupe: false, perBatch: true })
    },
    {
      label: "processBatch, tx per batch",
      handle: (ms) => processBatch(stack, table, ms)
    },
    {
      label: "processOnce nested, tx per batch",
      handle: (ms) => Library.handleConsumed(stack, table, ms, { dedupe: true, perBatch: true })
    }
  ]
  const samples = new Map<string, Array<Sample>>()
  const once = async (v: Variant) => {
    await truncate()
    const before = Cpu.snapshot()
    const ms = await consume(k, topic, options.messages, v.handle)
    const sample = { rate: (options.messages / ms) * 1000, cpu: Cpu.between(before, Cpu.snapshot()) }
    samples.set(v.label, [...(samples.get(v.label) ?? []), sample])
    console.log(`    ${v.label}: ${Math.round(sample.rate)}/s`)
  }
  for (let rep = 0; rep < options.reps; rep++) {
    console.log(`  rep ${rep + 1}/${options.reps}`)
    for (const v of rep % 2 === 0 ? variants : [...variants].reverse()) await once(v)
  }
  const rates = (label: string) => samples.get(label)!.map((s) => s.rate)
  const cpu = (label: string) => Report.avgCpu(samples.get(label)!.map((s) => s.cpu))
  for (const [lib, base] of [
    ["processOnce, tx per message", "write, tx per message"],
    ["processBatch, tx per batch", "write, tx per batch"],
    ["processOnce nested, tx per batch", "write, tx per batch"]
  ] as const) {
    const target = lib.startsWith("processOnce nested") ? undefined : "≥ 0.8×"
    const row = Report.pair(
      {
        scenario: "4 consumer",
        variant: lib,
        unit: "msg/s",
        baselineName: "write without dedupe",
        ...(target === undefined ? {} : { target }),
        cpu: { library: cpu(lib), baseline: cpu(base) }
      },
      rates(lib),
      rates(base)
    )
    Report.add(target === undefined ? row : { ...row, met: row.ratio!.median >= 0.8 })
    if (target === undefined) continue
    Report.add(
      Report.pair(
        {
          scenario: "4 consumer",
          variant: `${lib} vs no-op`,
          unit: "msg/s",
          baselineName: "no-op kafkajs consumer",
          cpu: { library: cpu(lib), baseline: cpu("no-op kafkajs") }
        },
        rates(lib),
        rates("no-op kafkajs")
      )
    )
  }
  await Env.deleteTopics(admin, [topic])
  await producer.disconnect()
  await admin.disconnect()
  await Library.dropSchema(stack)
  await stack.dispose()
}
