/**
 * One produce request on @platformatic/kafka: the parts of a publish call (one partition's
 * records each) in one `send`, after making sure the producer's own metadata knows each part's
 * partition (the client folds an unknown partition onto an existing one, `partition % count`,
 * instead of failing).
 */
import * as Publisher from "@effect-outbox/kafka/Publisher"
import type { MessageToProduce, Producer } from "@platformatic/kafka"

export type AnyProducer = Producer<Buffer | undefined, Buffer, string, string>

// Per producer: the partition count its own metadata showed for each topic, and until when that
// answer is used without asking again (the client's own metadata cache lives as long). Asking
// before every send cost a round of the client's metadata machinery per send.
const partitionCounts = new WeakMap<AnyProducer, Map<string, { readonly count: number; readonly until: number }>>()

/** How long a producer's answer is trusted: the client's default `metadataMaxAge`. */
export const partitionsMaxAgeMillis = 5_000

/** How many partitions of `topic` `producer`'s metadata showed within the last {@link partitionsMaxAgeMillis} (0: ask). */
export const knownPartitions = (producer: AnyProducer, topic: string, now = Date.now()): number => {
  const known = partitionCounts.get(producer)?.get(topic)
  return known === undefined || known.until < now ? 0 : known.count
}

/** Keeps `producer`'s answer for `topic` (read back by {@link knownPartitions}). */
export const rememberPartitions = (producer: AnyProducer, topic: string, count: number, now = Date.now()): void => {
  const counts = partitionCounts.get(producer) ?? new Map<string, { count: number; until: number }>()
  counts.set(topic, { count, until: now + partitionsMaxAgeMillis })
  partitionCounts.set(producer, counts)
}

type Message = MessageToProduce<Buffer | undefined, Buffer, string, string>

/**
 * A record's headers as the `Map` the client reads them into: given an object, it builds one
 * from `Object.entries` (an array per header) for every record.
 */
const headerMap = (headers: Readonly<Record<string, string>>): Map<string, string> => {
  const map = new Map<string, string>()
  for (const name in headers) if (Object.hasOwn(headers, name)) map.set(name, headers[name]!)
  return map
}

/** Whether the producer's metadata has `partition` of `topic`, asking (then forcing) when not known. */
const hasPartition = async (producer: AnyProducer, topic: string, partition: number): Promise<boolean> => {
  if (partition < knownPartitions(producer, topic)) return true
  let count = (await producer.metadata({ topics: [topic] })).topics.get(topic)?.partitionsCount ?? 0
  if (count <= partition) {
    count = (await producer.metadata({ topics: [topic], forceUpdate: true })).topics.get(topic)?.partitionsCount ?? 0
  }
  if (count > 0) rememberPartitions(producer, topic, count)
  return count > partition
}

/** Sends `parts` in one `send`: each part's base offset, `undefined` for a part whose partition the producer does not know. */
export const produce = async (
  producer: AnyProducer,
  parts: ReadonlyArray<Publisher.Part>
): Promise<ReadonlyArray<bigint | undefined>> => {
  const known = await Promise.all(parts.map((part) => hasPartition(producer, part.topic, part.partition)))
  const sending = parts.filter((_, i) => known[i])
  if (sending.length === 0) return parts.map(() => undefined)
  const messages: Array<Message> = []
  for (const { partition, records, topic } of sending) {
    for (const record of records) {
      messages.push({
        topic,
        partition,
        key: record.key === null ? undefined : Buffer.from(record.key),
        value: Publisher.toBuffer(record.payload),
        headers: headerMap(record.headers)
      })
    }
  }
  const result = await producer.send({ messages })
  return parts.map((part, i) =>
    known[i] ? result.offsets?.find((o) => o.topic === part.topic && o.partition === part.partition)?.offset : undefined
  )
}
