/**
 * What-if (not part of `pnpm bench`): kafkajs vs @platformatic/kafka side by side in
 * one process, every variant interleaved with its sibling, the order rotating per repetition.
 *
 * - raw producer: an idempotent producer sending 1 KB records in sequential acks=-1 batches of 100
 * - raw consumer: a no-op group consumer reading the same topic from the start
 * - scenario 1 (relay throughput): one relay at batch 100 draining a backlog through
 *   `KafkaPublisher` or `PlatformaticPublisher`, everything else equal
 * - scenario 2 (latency): commit → LogAppendTime at a fixed rate, LISTEN/NOTIFY wake-up, p50 / p99
 * - scenario 4 (consumer): the core `Consumer` (per-batch transaction, one order row per event)
 *   over `KafkaConsumerSource` or `PlatformaticConsumerSource`, and a no-op `ConsumerSource`
 *   subscription committing each batch (delivery through the adapter alone)
 *
 * Consumer rates leave the group join out (it differs between the clients and dominates short
 * runs): the raw consumers are timed from their member's join event, the adapter variants from
 * their first batch (its records not counted).
 * The machine is shared: compare the columns of one run (ratios), not with bench/results.md.
 *
 *   node bench/src/experiments/KafkaAdapters.ts [--reps 3] [--backlog 5000] [--messages 20000]
 *                                               [--rate 300] [--seconds 5]
 */
import * as Args from "../Args.ts"
import * as Cpu from "../Cpu.ts"
import * as Env from "../Env.ts"
import * as Library from "../Library.ts"
import * as Raw from "../Raw.ts"
import { median, quantile } from "../Stats.ts"
import { createOrders } from "../scenarios/WritePath.ts"
import * as AdapterConsumer from "../support/adapterConsumer.ts"
import * as PlatformaticRaw from "../support/platformaticRaw.ts"

const reps = Args.number("reps", 3)
const backlog = Args.number("backlog", 5000)
const messages = Args.number("messages", 20000)
const rate = Args.number("rate", 300)
const seconds = Args.number("seconds", 5)
const batchSize = 100
type Adapter = Library.KafkaAdapter

const k = Env.kafka()
const admin = k.admin()
await admin.connect()
const kafkajsProducer = Env.rawProducer(k)
await kafkajsProducer.connect()
const platformaticProducer = PlatformaticRaw.producer()
const schema = Env.uniqueName("bench_adapters")
const writer = await Library.makeStack({ schema, pgConnections: 4, wake: "listen" })
await createOrders(writer, "orders")
const orders = `${schema}.orders`
const relays: Record<Adapter, Library.Stack> = {
  kafkajs: await Library.makeStack({ schema, pgConnections: 4, wake: "listen", kafka: "kafkajs" }),
  platformatic: await Library.makeStack({ schema, pgConnections: 4, wake: "listen", kafka: "platformatic" })
}
const topics: Array<string> = []
const topic = async (configs?: Array<{ name: string; value: string }>) => {
  const name = Env.uniqueName("bench-adapters")
  await Env.createTopic(admin, name, configs)
  topics.push(name)
  return name
}
// One pre-filled input topic for every consumer variant (each reads it with a fresh group).
const input = await topic()
await Raw.sendBatchLoop(kafkajsProducer, input, messages, 500)

const perSecond = (n: number, ms: number) => (n / ms) * 1000

const rawProduce = async (adapter: Adapter) => {
  const t = await topic()
  return perSecond(
    backlog,
    adapter === "kafkajs"
      ? await Raw.sendBatchLoop(kafkajsProducer, t, backlog, batchSize)
      : await PlatformaticRaw.sendLoop(platformaticProducer, t, backlog, batchSize)
  )
}

const rawConsume = (adapter: Adapter) => AdapterConsumer.rawNoop(adapter, k, input, messages)

/** Scenario 1: one relay drains a `backlog`-row outbox. */
const relayDrain = async (adapter: Adapter) => {
  const t = await topic()
  await Library.truncate(writer)
  await Library.fillBacklog(writer, t, backlog)
  const started = performance.now()
  const stop = await Library.startRelay(relays[adapter], { batchSize, pollMillis: 50 })
  while ((await Library.unpublished(writer)) > 0) await Env.sleep(20)
  const elapsed = performance.now() - started
  await stop()
  const landed = await Env.topicRecords(admin, t)
  if (landed < backlog) throw new Error(`only ${landed} of ${backlog} records reached ${t}`)
  return perSecond(backlog, elapsed)
}

/** Scenario 2: events committed at `rate`/s; commit → LogAppendTime, p50 and p99 in ms. */
const latency = async (adapter: Adapter) => {
  const t = await topic([{ name: "message.timestamp.type", value: "LogAppendTime" }])
  await Library.truncate(writer)
  const stop = await Library.startRelay(relays[adapter], { batchSize, pollMillis: 1000 })
  const committed = await Env.commitAtRate(rate, seconds, (from, n) => Library.enqueueCommitted(writer, t, from, n))
  while ((await Library.unpublished(writer)) > 0) await Env.sleep(20)
  await stop()
  const appended = await Raw.readTimestamps(k, t, committed.size)
  const lat = [...committed].map(([id, at]) => appended.get(id)! - at)
  return { p50: quantile(lat, 0.5), p99: quantile(lat, 0.99) }
}

/** Scenario 4 through the adapter: the core `Consumer`, one transaction per batch. */
const consumer = (adapter: Adapter) => AdapterConsumer.consumer(writer, orders, input, messages, adapter, "per-batch")

/** Delivery through the adapter alone: subscribe, commit every batch, nothing else. */
const sourceOnly = (adapter: Adapter) => AdapterConsumer.sourceOnly(adapter, input, messages)

type Figure = number | { readonly p50: number; readonly p99: number }
const experiments: Array<[string, (adapter: Adapter) => Promise<Figure>]> = [
  ["raw producer, batches of 100 (records/s)", rawProduce],
  ["raw consumer, no-op (records/s)", rawConsume],
  ["1 relay drain, batch 100 (events/s)", relayDrain],
  [`2 latency at ${rate}/s, LISTEN (ms p50 / p99)`, latency],
  ["4 Consumer, tx per batch (msg/s)", consumer],
  ["4 ConsumerSource only, commit per batch (msg/s)", sourceOnly]
]
const adapters: ReadonlyArray<Adapter> = ["kafkajs", "platformatic"]
const results = new Map<string, Array<Figure>>()
const loads: Array<number> = []
// Warm-up: connections, metadata, producer ids.
await rawProduce("kafkajs")
await rawProduce("platformatic")
for (let rep = 0; rep < reps; rep++) {
  loads.push(Cpu.loadAverage())
  const order = experiments.map((_, i) => experiments[(i + rep) % experiments.length]!)
  for (const [name, run] of order) {
    // The sibling goes first every other repetition.
    for (const adapter of rep % 2 === 0 ? adapters : [...adapters].reverse()) {
      const figure = await run(adapter)
      results.set(`${name}\u0000${adapter}`, [...(results.get(`${name}\u0000${adapter}`) ?? []), figure])
      console.log(
        `rep ${rep + 1} ${name} ${adapter}: ${JSON.stringify(figure, (_, v) => (typeof v === "number" ? Math.round(v) : v))}`
      )
    }
  }
}
loads.push(Cpu.loadAverage())

const cell = (xs: ReadonlyArray<Figure>) => {
  if (typeof xs[0] === "number") {
    const ns = xs as ReadonlyArray<number>
    return {
      text: `${median([...ns]).toFixed(0)} (${Math.min(...ns).toFixed(0)}–${Math.max(...ns).toFixed(0)})`,
      value: median([...ns])
    }
  }
  const ls = xs as ReadonlyArray<{ p50: number; p99: number }>
  const p50 = median(ls.map((l) => l.p50))
  return { text: `${p50.toFixed(0)} / ${median(ls.map((l) => l.p99)).toFixed(0)}`, value: p50 }
}
console.log(
  `\nkafka adapters: ${reps} reps, backlog ${backlog}, ${messages} consumed, latency ${rate}/s × ${seconds} s; ` +
    `load average per rep ${loads.join(" → ")}`
)
// The ratio of each repetition's pair (run back to back), then the median: steadier than a ratio
// of medians on a machine whose load moves between repetitions.
const pairRatio = (xs: ReadonlyArray<Figure>, ys: ReadonlyArray<Figure>) =>
  median(xs.map((x, i) => cell([ys[i]!]).value / cell([x]).value))
console.log(
  "| | kafkajs | @platformatic/kafka | platformatic ÷ kafkajs (median of per-rep ratios) |\n| --- | --- | --- | --- |"
)
for (const [name] of experiments) {
  const xs = results.get(`${name}\u0000kafkajs`)!
  const ys = results.get(`${name}\u0000platformatic`)!
  console.log(`| ${name} | ${cell(xs).text} | ${cell(ys).text} | ×${pairRatio(xs, ys).toFixed(2)} |`)
}
await Env.deleteTopics(admin, topics)
await Library.dropSchema(writer)
await kafkajsProducer.disconnect()
await platformaticProducer.close(true)
await admin.disconnect()
for (const stack of Object.values(relays)) await stack.dispose()
await writer.dispose()
process.exit(0)
