/**
 * The baselines: what plain kafkajs (and plain SQL) do with the same records, batch sizes and
 * acknowledgements, without the outbox. Each returns its own timing; the scenarios interleave
 * them with the library runs.
 */
import Kafkajs from "kafkajs"
import * as Env from "./Env.ts"

/**
 * The record shape the relay sends: key, 1 KB value, an `event-id` header and a `traceparent`
 * header (`Outbox.enqueue` writes its span's; kafkajs encodes each header separately, so a raw
 * side without it would send a cheaper record than the relay).
 */
export const record = (i: number): Kafkajs.Message => {
  const id = Env.newEventId()
  return {
    key: Env.keyOf(i),
    value: Env.payloadBuffer(i),
    headers: { "event-id": id, traceparent: Env.traceparentOf(id) }
  }
}

const partitioner = Kafkajs.Partitioners.DefaultPartitioner()
const partitionMetadata = Array.from({ length: Env.PARTITIONS }, (_, i) => ({
  partitionId: i,
  leader: 1,
  partitionErrorCode: 0,
  replicas: [1],
  isr: [1]
}))
/** The partition kafkajs's default (murmur2) partitioner gives a record on a topic of `Env.PARTITIONS`. */
const partitionOf = (message: Kafkajs.Message): number => partitioner({ topic: "", partitionMetadata, message })

/**
 * Sends `n` records in sequential `sendBatch` calls of `batchSize` (acks=-1, idempotent),
 * returning the elapsed milliseconds. Records are built before the clock starts, the way the
 * relay's rows exist before it starts.
 */
export const sendBatchLoop = async (
  producer: Kafkajs.Producer,
  topic: string,
  n: number,
  batchSize: number
): Promise<number> => {
  const records = Array.from({ length: n }, (_, i) => record(i))
  const started = performance.now()
  for (let i = 0; i < n; i += batchSize) {
    await producer.sendBatch({ acks: -1, topicMessages: [{ topic, messages: records.slice(i, i + batchSize) }] })
  }
  return performance.now() - started
}

/**
 * An open loop at `rate` records/s for `seconds`: every tick (10 ms) the records that "arrived"
 * (`make(i)`: the event id and the record) are queued, and one sender hands everything queued to
 * `send` as soon as the previous call returned (natural batching, no linger). Returns each
 * record's arrival time by event id, to be joined with the broker's LogAppendTime.
 */
export const atRate = async <M>(
  rate: number,
  seconds: number,
  make: (i: number) => { readonly id: string; readonly message: M },
  send: (batch: Array<M>) => Promise<unknown>
): Promise<Map<string, number>> => {
  const arrivals = new Map<string, number>()
  let queue: Array<M> = []
  let produced = 0
  const total = Math.round(rate * seconds)
  const started = Date.now()
  let done = false
  let wake: (() => void) | undefined
  const sender = (async () => {
    while (!done || queue.length > 0) {
      if (queue.length === 0) {
        await new Promise<void>((resolve) => {
          wake = resolve
        })
        wake = undefined
        continue
      }
      const batch = queue
      queue = []
      await send(batch)
    }
  })()
  while (produced < total) {
    const due = Math.min(total, Math.floor(((Date.now() - started) / 1000) * rate))
    for (; produced < due; produced++) {
      const { id, message } = make(produced)
      arrivals.set(id, Date.now())
      queue.push(message)
    }
    wake?.()
    await Env.sleep(10)
  }
  done = true
  wake?.()
  await sender
  return arrivals
}

/** `atRate` on kafkajs: one `sendBatch` per turn (acks=-1, idempotent), `Raw.record`s. */
export const produceAtRate = (
  producer: Kafkajs.Producer,
  topic: string,
  rate: number,
  seconds: number,
  /** One `sendBatch` per partition, all at once (as the library's publisher sends), not one per call. */
  perPartition = false
): Promise<Map<string, number>> =>
  atRate(
    rate,
    seconds,
    (i) => {
      const message = record(i)
      return { id: String(message.headers!["event-id"]), message }
    },
    async (batch) => {
      if (!perPartition) return producer.sendBatch({ acks: -1, topicMessages: [{ topic, messages: batch }] })
      const groups = new Map<number, Array<Kafkajs.Message>>()
      for (const m of batch) {
        const partition = partitionOf(m)
        const group = groups.get(partition) ?? []
        group.push({ ...m, partition })
        groups.set(partition, group)
      }
      return Promise.all(
        [...groups.values()].map((messages) => producer.sendBatch({ acks: -1, topicMessages: [{ topic, messages }] }))
      )
    }
  )

/**
 * Reads every record of `topic` from the beginning until `expected` distinct event ids were
 * seen, returning event id → broker timestamp (LogAppendTime on latency topics).
 */
export const readTimestamps = async (
  k: Kafkajs.Kafka,
  topic: string,
  expected: number,
  timeoutMs = 120_000
): Promise<Map<string, number>> => {
  const seen = new Map<string, number>()
  const consumer = k.consumer({ groupId: Env.uniqueName("bench-reader"), maxWaitTimeInMs: 100 })
  await consumer.connect()
  try {
    await consumer.subscribe({ topic, fromBeginning: true })
    await new Promise<void>((resolve, reject) => {
      const timer = setTimeout(
        () => reject(new Error(`read ${seen.size}/${expected} records of ${topic} within ${timeoutMs} ms`)),
        timeoutMs
      )
      void consumer.run({
        autoCommit: false,
        eachBatch: async ({ batch }) => {
          for (const m of batch.messages) {
            const id = m.headers?.["event-id"]?.toString()
            if (id !== undefined && !seen.has(id)) seen.set(id, Number(m.timestamp))
          }
          if (seen.size >= expected) {
            clearTimeout(timer)
            resolve()
          }
        }
      })
    })
  } finally {
    await consumer.disconnect()
  }
  return seen
}

/** Consumes `expected` records with a no-op handler; milliseconds from subscribe to the last. */
export const noopConsume = async (
  k: Kafkajs.Kafka,
  topic: string,
  expected: number,
  timeoutMs = 300_000
): Promise<number> => {
  const consumer = k.consumer({ groupId: Env.uniqueName("bench-noop"), maxWaitTimeInMs: 100 })
  await consumer.connect()
  try {
    await consumer.subscribe({ topic, fromBeginning: true })
    let count = 0
    const started = performance.now()
    await new Promise<void>((resolve, reject) => {
      const timer = setTimeout(
        () => reject(new Error(`consumed ${count}/${expected} within ${timeoutMs} ms`)),
        timeoutMs
      )
      void consumer.run({
        eachBatch: async ({ batch, resolveOffset, heartbeat }) => {
          for (const m of batch.messages) {
            count++
            resolveOffset(m.offset)
          }
          await heartbeat()
          if (count >= expected) {
            clearTimeout(timer)
            resolve()
          }
        }
      })
    })
    return performance.now() - started
  } finally {
    await consumer.disconnect()
  }
}
