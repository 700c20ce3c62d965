/**
 * The raw @platformatic/kafka baselines of `KafkaAdapters.ts`, the counterparts of `Raw.ts`'s
 * kafkajs ones: the same records, batch sizes and acknowledgements, no outbox.
 */
import { Consumer, ProduceAcks, Producer } from "@platformatic/kafka"
import * as Env from "../Env.ts"

export const producer = () =>
  new Producer({
    clientId: "effect-outbox-bench",
    bootstrapBrokers: Env.brokers,
    idempotent: true,
    acks: ProduceAcks.ALL,
    autocreateTopics: false
  })

/** `n` records in sequential `send` calls of `batchSize` (acks=-1, idempotent); elapsed ms. */
export const sendLoop = async (p: Producer, topic: string, n: number, batchSize: number): Promise<number> => {
  const records = Array.from({ length: n }, (_, i) => ({
    topic,
    key: Buffer.from(Env.keyOf(i)),
    value: Env.payloadBuffer(i),
    headers: new Map([[Buffer.from("event-id"), Buffer.from(Env.newEventId())]])
  }))
  const started = performance.now()
  for (let i = 0; i < n; i += batchSize) await p.send({ messages: records.slice(i, i + batchSize) })
  return performance.now() - started
}

/** Consumes `expected` records with a no-op handler (a fresh group, from the earliest); elapsed ms. */
export const noopConsume = async (topic: string, expected: number, timeoutMs = 300_000): Promise<number> => {
  const consumer = new Consumer({
    clientId: "effect-outbox-bench",
    bootstrapBrokers: Env.brokers,
    groupId: Env.uniqueName("bench-noop-plt")
  })
  const started = performance.now()
  try {
    const stream = await consumer.consume({ topics: [topic], mode: "earliest", autocommit: true, maxWaitTime: 100 })
    let count = 0
    const timer = setTimeout(() => stream.destroy(new Error(`consumed ${count}/${expected} in time`)), timeoutMs)
    for await (const _ of stream) {
      if (++count >= expected) break
    }
    clearTimeout(timer)
    const elapsed = performance.now() - started
    await stream.close().catch(() => undefined)
    return elapsed
  } finally {
    await consumer.close(true).catch(() => undefined)
  }
}
