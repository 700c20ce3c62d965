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

/** Every partition of a fetch response with its records replaced by `records(partition)`, in place. */
export const eachPartition = <R>(response: R, records: (partition: FetchedPartition) => Array<Batch>): R => {
  for (const topic of (response as FetchResponseLike).responses ?? []) {
    for (const partition of topic.partitions) if (partition.records) partition.records = records(partition)
  }
  return response
}

/** Filters every partition of a read_committed fetch response in place. */
export const dropAborted = <R>(response: R): R => eachPartition(response, committedBatches)

/**
 * Makes `consumer.fetch` (which its message streams call, with a callback or for a promise) pass
 * every answer through what `settle(options)` returns when the fetch is asked for (default
 * `dropAborted`, after the client's own filter); when it returns `undefined` the fetch is not sent
 * and answers `{ responses: [] }`. Only the instance is patched.
 */
export const patchFetch = (
  consumer: Pick<Consumer, "fetch">,
  settle: (options: unknown) => ((response: unknown) => unknown) | undefined = () => dropAborted
): void => {
  const original = consumer.fetch.bind(consumer) as (options: unknown, callback?: unknown) => unknown
  const patched = (options: unknown, callback?: (error: unknown, response?: unknown) => void) => {
    const after = settle(options)
    if (after === undefined) {
      if (typeof callback !== "function") return Promise.resolve({ responses: [] })
      process.nextTick(() => callback(null, { responses: [] }))
      return undefined
    }
    if (typeof callback === "function") {
      return original(options, (error: unknown, response?: unknown) =>
        callback(error, error || response === undefined ? response : after(response))
      )
    }
    return (original(options) as Promise<unknown>).then(after)
  }
  ;(consumer as unknown as { fetch: typeof patched }).fetch = patched
}
