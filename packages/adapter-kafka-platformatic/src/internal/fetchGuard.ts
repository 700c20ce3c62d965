/**
 * Drops the answer to a fetch that was sent before a group join, or while one ran, and arrived
 * after it. The client sends a fetch from the positions it holds and, when the answer comes,
 * stamps its records with the consumer's membership of that moment and moves its positions past
 * them. Such an answer therefore hands out records from the previous generation's positions as if
 * fetched under the new one, and moves a position the join had just reset to the group's committed
 * offset past the records in between, which are then never fetched again: a transactional
 * pipeline committed past them (lost outputs). Emptied, the answer hands out and moves nothing,
 * and the stream fetches again from the positions the join set.
 *
 * @internal
 */
import { eachPartition, patchFetch } from "./abortedRecords.ts"
import type { AnyConsumer, State } from "./handoff.ts"

/** The membership a fetch was sent under. */
interface Asked {
  readonly joins: number
  readonly generationId: number
  readonly memberId: string | null
}

interface FetchOptionsLike {
  readonly topics?: ReadonlyArray<{ readonly partitions: ReadonlyArray<{ readonly fetchOffset?: bigint }> }>
}

const asked = (consumer: AnyConsumer, state: State): Asked => ({
  joins: state.generation,
  generationId: consumer.generationId,
  memberId: consumer.memberId
})

/**
 * Whether an answer to a fetch sent under `sent` may be delivered now: no join was running when
 * it was sent (the client takes the new generation at JoinGroup, the new assignment and positions
 * only at the join event), and none started or completed since.
 */
export const deliverable = (consumer: AnyConsumer, state: State, sent: Asked): boolean =>
  sent.generationId === state.joinedGenerationId &&
  sent.joins === state.generation &&
  sent.generationId === consumer.generationId &&
  sent.memberId === consumer.memberId

/** Every partition of a fetch response without its records, in place. */
export const emptied = <R>(response: R): R => eachPartition(response, () => [])

/**
 * Whether the stream built this fetch while a join had cleared its positions: the stream checks
 * for a position refresh before it asks for metadata and builds the request in the answer, so a
 * join in between leaves a partition without an offset, which the client cannot encode (a
 * TypeError that fails the fetch, and the stream, after its retries).
 */
const lacksOffset = (options: unknown): boolean =>
  (options as FetchOptionsLike).topics?.some((t) => t.partitions.some((p) => p.fetchOffset === undefined)) === true

/**
 * Makes `consumer.fetch` (which its message streams call) empty an answer that is not
 * `deliverable`, and answer a fetch that lacks an offset with nothing (the stream fetches again
 * once the join's refresh is done). Call it after the consumer is made, before it joins.
 */
export const guardFetch = (consumer: AnyConsumer, state: State): void =>
  patchFetch(consumer, (options) => {
    if (lacksOffset(options)) return undefined
    const sent = asked(consumer, state)
    return (response) => (deliverable(consumer, state, sent) ? response : emptied(response))
  })
