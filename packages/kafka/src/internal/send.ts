/**
 * One produce request on the shared idempotent producer: one partition's records (`sendRecords`:
 * the base offset they were appended at, or the error, a `SendError` when its verdict is already
 * decided), or several partitions' at once (`sendParts`). Replaces the producer when its state is
 * uncertain (an interrupted or timed-out send, a reset-worthy error, a partition its metadata
 * lacked, a deleted topic it once used).
 */
import {
  BrokerUnavailableError,
  PermanentPublishError,
  type PublishError,
  RetriablePublishError
} from "@effect-outbox/core/Errors"
import type * as RecordSize from "@effect-outbox/core/RecordSize"
import * as Effect from "effect/Effect"
import type { Protocol } from "../KafkaProtocol.ts"
import type { Layouts } from "../Layouts.ts"
import type * as ProducerLeases from "../ProducerLeases.ts"

/** A record of a call, with the headers it is sent with and its place in the call. */
export interface Outgoing extends RecordSize.SizedRecord {
  readonly index: number
}

/** One partition's record batch within a produce request. */
export interface Part {
  readonly topic: string
  readonly partition: number
  readonly records: ReadonlyArray<Outgoing>
}

/** A failed send whose verdict is already decided. */
export class SendError {
  readonly verdict: PublishError
  constructor(verdict: PublishError) {
    this.verdict = verdict
  }
}

export interface Sender<P> {
  readonly leases: ProducerLeases.ProducerLeases<P>
  readonly layouts: Layouts
  readonly protocol: Protocol
  /** Each part's base offset, `undefined` for a part the client did not write. */
  readonly produce: (producer: P, parts: ReadonlyArray<Part>) => Promise<ReadonlyArray<bigint | undefined>>
  readonly timeoutMillis: number
}

/** The verdict for records the client did not write: its metadata lacked their partition. */
export const notInMetadata = (topic: string, partition: number) =>
  new RetriablePublishError({
    topic,
    reason: `the producer had no metadata for partition ${partition}; it is being refreshed`
  })

/** A part's key in a producer's tainted partitions. */
export const partitionKey = (part: { readonly topic: string; readonly partition: number }) =>
  `${part.topic}\u0000${part.partition}`

/**
 * One request holding every part. A send that does not answer before `deadline` fails with a
 * `SendError` of the first part's topic: unavailable, the records may have landed.
 *
 * A send left uncertain by an outage (no answer in time, interrupted, refused as unavailable)
 * taints its partitions on the producer (`ProducerLeases`): the producer goes on serving other
 * partitions and is replaced before it sends to these again. Any other uncertain failure
 * replaces it at once.
 */
export const sendParts = <P>(
  sender: Sender<P>,
  parts: ReadonlyArray<Part>,
  deadline: number
): Effect.Effect<ReadonlyArray<bigint | undefined>, unknown> => {
  const { leases } = sender
  const topic = parts[0]!.topic
  const keys = parts.map(partitionKey)
  let used: ProducerLeases.Lease<P> | undefined
  const taint = () => (used === undefined ? leases.requestReset() : used.taint(keys))
  const sendOnce = Effect.flatMap(leases.acquireFor(keys), (lease) => {
    used = lease
    const sending = sender.produce(lease.producer, parts)
    // The producer goes back when the send settles, not when we stop waiting for it: a reset
    // meanwhile must not disconnect it under the send.
    void sending.then(lease.release, lease.release)
    return Effect.tryPromise({ try: () => sending, catch: (error) => error })
  })
  return sendOnce.pipe(
    // Interrupted (a caller's timeout): the send may still land; never reuse this producer for it.
    Effect.onInterrupt(() => Effect.sync(taint)),
    // Our metadata says the topic exists, so an unknown topic is a topic this producer once used
    // and that was deleted since, or the producer's stale metadata: replace it, try again once.
    Effect.catchIf(
      (error) => !(error instanceof SendError) && sender.protocol.isUnknownTopic(error),
      () =>
        Effect.suspend(() => {
          leases.requestReset()
          return sendOnce
        })
    ),
    // Refused as unavailable: uncertain for these partitions only.
    Effect.tapError((error) =>
      !(error instanceof SendError) &&
      sender.protocol.requiresProducerReset(error) &&
      sender.protocol.isBrokerUnavailable(error)
        ? Effect.sync(taint)
        : Effect.void
    ),
    Effect.timeoutOrElse({
      duration: Math.max(1, deadline - Date.now()),
      // A broker that does not answer in time is unavailable (a frozen broker, a lost network):
      // retried without counting an attempt; the records may have landed.
      orElse: () =>
        Effect.sync(taint).pipe(
          Effect.andThen(
            Effect.fail(
              new SendError(
                new BrokerUnavailableError({
                  topic,
                  reason: `no acknowledgement within ${sender.timeoutMillis} ms; the records may have reached the broker`
                })
              )
            )
          )
        )
    }),
    // A part the client skipped: its metadata lacked the partition; replace the producer.
    Effect.tap((offsets) => (offsets.includes(undefined) ? Effect.sync(leases.requestReset) : Effect.void))
  )
}

/** One partition's record batch in its own request: its base offset, or the error. */
export const sendRecords = <P>(
  sender: Sender<P>,
  topic: string,
  partition: number,
  batch: ReadonlyArray<Outgoing>,
  deadline: number
) =>
  sendParts(sender, [{ topic, partition, records: batch }], deadline).pipe(
    Effect.flatMap(([offset]) =>
      offset !== undefined ? Effect.succeed(offset) : Effect.fail(new SendError(notInMetadata(topic, partition)))
    ),
    Effect.catch((error) => judge(sender, topic, error)),
    Effect.result
  )

/** A send's error, after resetting the producer when its state is uncertain. */
const judge = <P>(sender: Sender<P>, topic: string, error: unknown) =>
  Effect.gen(function* () {
    if (error instanceof SendError) return yield* Effect.fail(error)
    const { protocol } = sender
    // An outage's producer state was tainted for the partition by `sendParts`.
    if (protocol.requiresProducerReset(error) && !protocol.isBrokerUnavailable(error)) sender.leases.requestReset()
    // "Unknown topic" after our metadata said it exists: deleted a moment ago, or a broker
    // answering from stale metadata (one shutting down or starting says so too). Only a fresh
    // "no such topic" is permanent; without an answer the broker is unavailable.
    if (protocol.isUnknownTopic(error)) {
      // A stale layout is no answer: the read failed and the last good one stood in.
      const fresh = yield* sender.layouts.fetch(topic).pipe(
        Effect.map((layout) => (layout?.stale === true ? null : layout)),
        Effect.orElseSucceed(() => null)
      )
      const verdict =
        fresh === undefined
          ? new PermanentPublishError({ topic, reason: "the topic no longer exists on the broker" })
          : fresh === null
            ? new BrokerUnavailableError({ topic, reason: `${protocol.describe(error)}; no metadata answer to check` })
            : new RetriablePublishError({
                topic,
                reason: `${protocol.describe(error)}; the topic exists, stale metadata`
              })
      return yield* Effect.fail(new SendError(verdict))
    }
    return yield* Effect.fail(error)
  })
