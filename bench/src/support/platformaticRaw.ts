/**
 * The raw client baselines of `KafkaAdapters.ts`: @platformatic/kafka counterparts of `Raw.ts`'s
 * kafkajs ones (the same records, batch sizes and acknowledgements, no outbox), and no-op
 * consumers of both clients timed from their first batch.
 */
import { Consumer, ProduceAcks, Producer } from "@platformatic/kafka"
import type Kafkajs from "kafkajs"
import * as Env from "../Env.ts"
import * as Raw from "../Raw.ts"

export const producer = () =>
  new Producer({
    clientId: "effect-outbox-bench",
    bootstrapBrokers: Env.brokers,
    idempotent: true,
    acks: ProduceAcks.ALL,
    autocreateTopics: false
  })

/** `Raw.record` for @platformatic/kafka: key, 1 KB value, `event-id` and `traceparent` headers. */
const record = (topic: string, i: number, id: string) => ({
  topic,
  key: Buffer.from(Env.keyOf(i)),
  value: Env.payloadBuffer(i),
  headers: new Map([
    [Buffer.from("event-id"), Buffer.from(id)],
    [Buffer.from("traceparent"), Buffer.from(Env.traceparentOf(id))]
  ])
})

/** `n` of `record`'s records, each with a fresh event id. */
export const records = (topic: string, n: number) =>
  Array.from({ length: n }, (_, i) => record(topic, i, Env.newEventId()))

/** `n` records in sequential `send` calls of `batchSize` (acks=-1, idempotent); elapsed ms. */
export const sendLoop = async (p: Producer, topic: string, n: number, batchSize: number): Promise<number> => {
  const all = records(topic, n)
  const started = performance.now()
  for (let i = 0; i < n; i += batchSize) await p.send({ messages: all.slice(i, i + batchSize) })
  return performance.now() - started
}

/** `Raw.atRate` on @platformatic/kafka: one `send` per turn, the same records as `Raw.record`. */
export const produceAtRate = (p: Producer, topic: string, rate: number, seconds: number) =>
  Raw.atRate(
    rate,
    seconds,
    (i) => {
      const id = Env.newEventId()
      return { id, message: record(topic, i, id) }
    },
    (messages) => p.send({ messages })
  )

/**
 * A consumer's delivery rate with the group join left out: the clock starts when the first batch
 * arrives and the records of that batch are not counted.
 */
export class Clock {
  private first: number | undefined
  private firstCount = 0
  count = 0
  /** Records `n` delivered records. */
  add(n: number) {
    if (this.first === undefined) {
      this.first = performance.now()
      this.firstCount = n
    }
    this.count += n
  }
  /** Records per second after the first batch. */
  rate() {
    return ((this.count - this.firstCount) / (performance.now() - (this.first ?? 0))) * 1000
  }
}

/**
 * A no-op @platformatic/kafka group consumer (a fresh group, from the earliest) reading `expected`
 * records: records per second from the moment the member joined its group (the client fetches
 * up to 50 MB ahead, so a first-batch clock would start after most of the topic was read).
 */
export const noopConsume = async (topic: string, expected: number, timeoutMs = 300_000): Promise<number> => {
  const consumer = new Consumer({
    clientId: "effect-outbox-bench",
    bootstrapBrokers: Env.brokers,
    groupId: Env.uniqueName("bench-noop-plt")
  })
  let joined = performance.now()
  consumer.on("consumer:group:join", () => {
    joined = performance.now()
  })
  try {
    const stream = await consumer.consume({ topics: [topic], mode: "earliest", autocommit: true, maxWaitTime: 100 })
    let count = 0
    const timer = setTimeout(() => stream.destroy(new Error(`consumed ${count}/${expected} in time`)), timeoutMs)
    for await (const _ of stream) {
      if (++count >= expected) break
    }
    clearTimeout(timer)
    const rate = (count / (performance.now() - joined)) * 1000
    await stream.close().catch(() => undefined)
    return rate
  } finally {
    await consumer.close(true).catch(() => undefined)
  }
}

/** The same with a no-op kafkajs consumer (`eachBatch`, offsets resolved, auto-commit), from its GROUP_JOIN. */
export const kafkajsNoopConsume = async (k: Kafkajs.Kafka, topic: string, expected: number): Promise<number> => {
  const consumer = k.consumer({ groupId: Env.uniqueName("bench-noop"), maxWaitTimeInMs: 100 })
  await consumer.connect()
  try {
    await consumer.subscribe({ topic, fromBeginning: true })
    let joined = performance.now()
    consumer.on(consumer.events.GROUP_JOIN, () => {
      joined = performance.now()
    })
    let count = 0
    await new Promise<void>((resolve, reject) => {
      const timer = setTimeout(() => reject(new Error(`consumed ${count}/${expected} in time`)), 300_000)
      void consumer.run({
        eachBatch: async ({ batch, resolveOffset, heartbeat }) => {
          count += batch.messages.length
          for (const m of batch.messages) resolveOffset(m.offset)
          await heartbeat()
          if (count >= expected) {
            clearTimeout(timer)
            resolve()
          }
        }
      })
    })
    return (count / (performance.now() - joined)) * 1000
  } finally {
    await consumer.disconnect()
  }
}
