/**
 * Scenario 4, through the adapters: the core `Consumer` on each Kafka adapter (kafkajs and
 * @platformatic/kafka) — `transaction: "per-record"` (`Inbox.processOnce`, one transaction per
 * record) and `"per-batch"` (`Inbox.processBatch`), one order row per event — and a no-op
 * `ConsumerSource` subscription (delivery through the adapter alone), each ÷ that client's raw
 * no-op group consumer, on topics pre-filled with 1 KB events (a fresh group per run; the
 * delivery and per-batch sides read ten times as many). The
 * target is on delivery (the no-op subscription); the two `Consumer` rows say what a consumer
 * that writes costs against delivery alone (scenario 4 gives them against the same write without
 * the dedupe record). Every side runs in every repetition, the order rotating. Rates leave the
 * group join out (support/adapterConsumer.ts).
 */

import * as Env from "../Env.ts"
import * as Library from "../Library.ts"
import * as Raw from "../Raw.ts"
import * as Report from "../Report.ts"
import * as AdapterConsumer from "../support/adapterConsumer.ts"
import { createOrders } from "./WritePath.ts"

export interface Options {
  readonly reps: number
  readonly messages: number
}

/** Each adapter's delivery (the no-op subscription) ≥ this × its raw client's no-op consumer. */
export const target = 0.7

type Kind = "raw" | "per-record" | "per-batch" | "source"
const label: Record<Kind, string> = {
  raw: "raw no-op consumer",
  "per-record": "Consumer per-record (processOnce)",
  "per-batch": "Consumer per-batch (processBatch)",
  source: "no-op ConsumerSource (delivery only)"
}
const clientName = (adapter: Library.KafkaAdapter) => (adapter === "kafkajs" ? "kafkajs" : "@platformatic/kafka")

export const run = async (options: Options): Promise<void> => {
  console.log(
    `\n## 4a. consumer through the adapters (${options.messages} messages, per-batch and delivery ${options.messages * 10}, ${options.reps} reps)`
  )
  const k = Env.kafka()
  const admin = k.admin()
  await admin.connect()
  const producer = Env.rawProducer(k)
  await producer.connect()
  const topic = Env.uniqueName("bench-s4a")
  await Env.createTopic(admin, topic)
  await Raw.sendBatchLoop(producer, topic, options.messages, 500)
  // Delivery alone and a per-batch consumer are some 10× faster than one transaction per record:
  // ten times the records, so that the first batch (left out of the clock) is a small part of the run.
  const bulk = Env.uniqueName("bench-s4a")
  const bulkMessages = options.messages * 10
  await Env.createTopic(admin, bulk)
  await Raw.sendBatchLoop(producer, bulk, bulkMessages, 500)
  const schema = Env.uniqueName("bench_s4a")
  const stack = await Library.makeStack({ schema, pgConnections: 4 })
  await createOrders(stack, "orders")
  const orders = `${schema}.orders`
  const adapters: ReadonlyArray<Library.KafkaAdapter> = ["kafkajs", "platformatic"]
  const kinds: ReadonlyArray<Kind> = ["raw", "per-record", "per-batch", "source"]
  const sides = adapters.flatMap((adapter) => kinds.map((kind) => ({ adapter, kind })))
  const samples = new Map<string, Array<number>>()
  const key = (adapter: Library.KafkaAdapter, kind: Kind) => `${adapter} ${kind}`
  const once = (adapter: Library.KafkaAdapter, kind: Kind): Promise<number> =>
    kind === "raw"
      ? AdapterConsumer.rawNoop(adapter, k, bulk, bulkMessages)
      : kind === "source"
        ? AdapterConsumer.sourceOnly(adapter, bulk, bulkMessages)
        : kind === "per-batch"
          ? AdapterConsumer.consumer(stack, orders, bulk, bulkMessages, adapter, kind)
          : AdapterConsumer.consumer(stack, orders, topic, options.messages, adapter, kind)
  try {
    for (let rep = 0; rep < options.reps; rep++) {
      console.log(`  rep ${rep + 1}/${options.reps}`)
      for (let i = 0; i < sides.length; i++) {
        const { adapter, kind } = sides[(i + rep * 3) % sides.length]!
        const rate = await once(adapter, kind)
        samples.set(key(adapter, kind), [...(samples.get(key(adapter, kind)) ?? []), rate])
        console.log(`    ${clientName(adapter)} ${label[kind]}: ${Math.round(rate)}/s`)
      }
    }
  } finally {
    await Env.deleteTopics(admin, [topic, bulk])
    await producer.disconnect()
    await admin.disconnect()
    await Library.dropSchema(stack)
    await stack.dispose()
  }
  for (const adapter of adapters) {
    for (const kind of kinds.filter((kind) => kind !== "raw")) {
      const row = Report.pair(
        {
          scenario: "4 consumer",
          variant: `${clientName(adapter)} adapter, ${label[kind]}`,
          unit: "msg/s",
          baselineName: `raw ${clientName(adapter)} no-op consumer`,
          ...(kind === "source" ? { target: `≥ ${target}×` } : {})
        },
        samples.get(key(adapter, kind))!,
        samples.get(key(adapter, "raw"))!
      )
      Report.add(kind === "source" ? { ...row, met: row.ratio!.median >= target } : row)
    }
  }
}
