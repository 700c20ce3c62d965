/**
 * What-if (not part of `pnpm bench`, issue #16): kafkajs vs @platformatic/kafka, side by side in
 * one run with the order rotating per repetition. Raw: an idempotent producer sending 1 KB
 * records in sequential acks=-1 batches of 100, no outbox. Relay: one relay at batch 100 draining
 * a backlog through `KafkaPublisher` (kafkajs) or `PlatformaticPublisher`, everything else equal.
 * The machine is shared (2 cores): compare figures of one run, not across runs.
 *
 *   node bench/src/experiments/KafkaClients.ts [--reps 3] [--backlog 5000]
 */
import { PgClient } from "@effect/sql-pg"
import * as PlatformaticClient from "@effect-outbox/adapter-kafka-platformatic/PlatformaticClient"
import * as PlatformaticPublisher from "@effect-outbox/adapter-kafka-platformatic/PlatformaticPublisher"
import * as PgOutbox from "@effect-outbox/adapter-pg/PgOutbox"
import * as Outbox from "@effect-outbox/core/Outbox"
import { ProduceAcks, Producer } from "@platformatic/kafka"
import * as Effect from "effect/Effect"
import * as Layer from "effect/Layer"
import type * as LogLevel from "effect/LogLevel"
import * as ManagedRuntime from "effect/ManagedRuntime"
import * as Redacted from "effect/Redacted"
import * as References from "effect/References"
import * as Env from "../Env.ts"
import * as Library from "../Library.ts"
import * as Raw from "../Raw.ts"
import { median } from "../Stats.ts"

const arg = (name: string, fallback: number) => {
  const i = process.argv.indexOf(`--${name}`)
  return i === -1 ? fallback : Number(process.argv[i + 1])
}
const reps = arg("reps", 3)
const backlog = arg("backlog", 5000)
const batchSize = 100

const schema = Env.uniqueName("bench_clients")
const k = Env.kafka()
const admin = k.admin()
await admin.connect()
const kafkajsProducer = Env.rawProducer(k)
await kafkajsProducer.connect()
const platformaticProducer = new Producer({
  clientId: "effect-outbox-bench",
  bootstrapBrokers: Env.brokers,
  idempotent: true,
  acks: ProduceAcks.ALL,
  autocreateTopics: false
})
const watcher = await Library.makeStack({ schema, pgConnections: 2 })
const kafkajsRelay = await Library.makeStack({ schema, pgConnections: 4 })

/** The same stack as `Library.makeStack`, with the Publisher on @platformatic/kafka. */
const platformaticRelay: Library.Stack = await (async () => {
  const sql = PgClient.layer({ url: Redacted.make(Env.databaseUrl), maxConnections: 4, applicationName: "bench" })
  const publisher = PlatformaticPublisher.layer().pipe(
    Layer.provide(PlatformaticClient.layer({ brokers: Env.brokers, clientId: "bench-relay" }))
  )
  const logLevel = Layer.succeed(References.MinimumLogLevel)(
    (process.env.BENCH_LOG_LEVEL ?? "Warn") as LogLevel.LogLevel
  )
  const runtime = ManagedRuntime.make(
    Outbox.layerWith({ maxPayloadBytes: 1_000_000 }).pipe(
      Layer.provideMerge(Layer.merge(PgOutbox.layer({ schema }), publisher)),
      Layer.provideMerge(sql),
      Layer.provideMerge(logLevel)
    )
  )
  await runtime.runPromise(Effect.void)
  return {
    schema,
    run: (effect) => runtime.runPromise(effect as Effect.Effect<never, never, never>),
    dispose: () => runtime.dispose()
  }
})()

const topics: Array<string> = []
const topic = async () => {
  const name = Env.uniqueName("bench-clients")
  await Env.createTopic(admin, name)
  topics.push(name)
  return name
}

const rawKafkajs = async () => {
  const t = await topic()
  return (backlog / (await Raw.sendBatchLoop(kafkajsProducer, t, backlog, batchSize))) * 1000
}

const rawPlatformatic = async () => {
  const t = await topic()
  const records = Array.from({ length: backlog }, (_, i) => ({
    topic: t,
    key: Buffer.from(Env.keyOf(i)),
    value: Env.payloadBuffer(i),
    headers: new Map([[Buffer.from("event-id"), Buffer.from(Env.newEventId())]])
  }))
  const started = performance.now()
  for (let i = 0; i < backlog; i += batchSize) {
    await platformaticProducer.send({ messages: records.slice(i, i + batchSize) })
  }
  return (backlog / (performance.now() - started)) * 1000
}

const drain = async (stack: Library.Stack) => {
  const t = await topic()
  await Library.truncate(watcher)
  await Library.fillBacklog(watcher, t, backlog)
  const started = performance.now()
  const stop = await Library.startRelay(stack, { batchSize, pollMillis: 50 })
  while ((await Library.unpublished(watcher)) > 0) await Env.sleep(20)
  const elapsed = performance.now() - started
  await stop()
  const landed = await Env.topicRecords(admin, t)
  if (landed < backlog) throw new Error(`only ${landed} of ${backlog} records reached ${t}`)
  return (backlog / elapsed) * 1000
}

const variants: Array<[string, () => Promise<number>]> = [
  ["raw kafkajs sendBatch 100", rawKafkajs],
  ["raw @platformatic/kafka send 100", rawPlatformatic],
  ["relay on KafkaPublisher (kafkajs)", () => drain(kafkajsRelay)],
  ["relay on PlatformaticPublisher", () => drain(platformaticRelay)]
]
const results = new Map<string, Array<number>>(variants.map(([name]) => [name, []]))
// Warm-up: connections, metadata, producer ids.
await rawKafkajs()
await rawPlatformatic()
for (let rep = 0; rep < reps; rep++) {
  const order = variants.map((_, i) => variants[(i + rep) % variants.length]!)
  for (const [name, run] of order) results.get(name)!.push(await run())
}
console.log(`\nkafka clients, ${backlog} records of 1 KB per run, batch 100, ${reps} reps (median, min–max), records/s`)
for (const [name, xs] of results) {
  console.log(`| ${name} | ${median(xs).toFixed(0)} | ${Math.min(...xs).toFixed(0)}–${Math.max(...xs).toFixed(0)} |`)
}
await Env.deleteTopics(admin, topics)
await Library.dropSchema(watcher)
await kafkajsProducer.disconnect()
await platformaticProducer.close(true)
await admin.disconnect()
await kafkajsRelay.dispose()
await platformaticRelay.dispose()
await watcher.dispose()
process.exit(0)
