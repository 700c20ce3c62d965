/**
 * Drops aborted transactions' records from a read_committed fetch response, as the Java consumer
 * does. The client's own filter (2.12.1) keeps one aborted range per producer id, so when one
 * response holds two aborted transactions of the same transactional id (same producer id, as
 * after a retried transaction), the earlier one's records were delivered; it also keeps a range
 * whose abort marker lies beyond the response. Both break read_committed: found by
 * `PlatformaticTransactionalProducer.integration.test.ts`.
 *
 * @internal
 */
import type { Consumer } from "@platformatic/kafka"

/** Record-batch attribute bits (Kafka's record batch v2). */
const TRANSACTIONAL = 0x10
const CONTROL = 0x20

interface Batch {
  readonly firstOffset: bigint
  readonly lastOffsetDelta: number
  readonly attributes: number
  readonly producerId: bigint
  readonly records: ReadonlyArray<{ readonly key: Buffer | null }>
}

interface FetchedPartition<B extends Batch = Batch> {
  abortedTransactions?: ReadonlyArray<{ readonly producerId: bigint; readonly firstOffset: bigint }> | null
  records?: Array<B> | null
}

interface FetchResponseLike {
  readonly responses: ReadonlyArray<{ readonly partitions: ReadonlyArray<FetchedPartition> }>
}

/** A control batch whose record is an abort marker (control key: version int16, type int16 0). */
const isAbortMarker = (batch: Batch): boolean =>
  (batch.attributes & CONTROL) !== 0 && batch.records[0]?.key?.readInt16BE(2) === 0

/**
 * The batches of one partition a read_committed reader may see: a transactional data batch is
 * dropped while its producer is inside an aborted transaction (from that transaction's first
 * offset to its abort marker). Control batches stay: readers use them to move their position.
 */
export const committedBatches = <B extends Batch>(partition: FetchedPartition<B>): Array<B> => {
  const batches = partition.records ?? []
  const aborted = [...(partition.abortedTransactions ?? [])].sort((a, b) =>
    a.firstOffset < b.firstOffset ? -1 : a.firstOffset > b.firstOffset ? 1 : 0
  )
  if (aborted.length === 0) return batches
  const inAborted = new Set<bigint>()
  let next = 0
  return batches.filter((batch) => {
    const last = batch.firstOffset + BigInt(batch.lastOffsetDelta)
    while (next < aborted.length && aborted[next]!.firstOffset <= last) inAborted.add(aborted[next++]!.producerId)
    if (isAbortMarker(batch)) {
      inAborted.delete(batch.producerId)
      return true
    }
    return !((batch.attributes & TRANSACTIONAL) !== 0 && inAborted.has(batch.producerId))
  })
}

/** Filters every partition of a read_committed fetch response in place. */
export const dropAborted = <R>(response: R): R => {
  for (const topic of (response as FetchResponseLike).responses ?? []) {
    for (const partition of topic.partitions) {
      if (partition.records) partition.records = committedBatches(partition)
    }
  }
  return response
}

/**
 * Makes `consumer.fetch` (which its message streams call) apply `dropAborted` to every response
 * after the client's own filter. Only the instance is patched.
 */
export const patchFetch = (consumer: Consumer): void => {
  const original = consumer.fetch.bind(consumer) as (options: unknown, callback?: unknown) => unknown
  const patched = (options: unknown, callback?: (error: unknown, response?: unknown) => void) => {
    if (typeof callback === "function") {
      return original(options, (error: unknown, response?: unknown) =>
        callback(error, error || response === undefined ? response : dropAborted(response))
      )
    }
    return (original(options) as Promise<unknown>).then(dropAborted)
  }
  ;(consumer as unknown as { fetch: typeof patched }).fetch = patched
}
