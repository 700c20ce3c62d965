/**
 * `sendBatch` on the shared idempotent producer: one partition's records (`sendRecords`: the base
 * offset they were appended at, or the error, a `SendError` when its verdict is already decided),
 * or several partitions' in one call (`sendParts`, see combined.ts). Replaces
 * the producer when its state is uncertain (an interrupted send, a reset-worthy error, a partition
 * its metadata lacked, a deleted topic it once used).
 */
import {
  BrokerUnavailableError,
  PermanentPublishError,
  type PublishError,
  RetriablePublishError
} from "@effect-outbox/core/Errors"
import type * as ProducerLeases from "@effect-outbox/core/ProducerLeases"
import type * as RecordSize from "@effect-outbox/core/RecordSize"
import * as Effect from "effect/Effect"
import type Kafkajs from "kafkajs"
import { requiresProducerReset, rootCause } from "../KafkaErrors.ts"
import type { Layouts } from "./layouts.ts"

/** A record of a call, with the headers it is sent with and its place in the call. */
export interface Outgoing extends RecordSize.SizedRecord {
  readonly index: number
}

/** A failed send whose verdict is already decided. */
export class SendError {
  readonly verdict: PublishError
  constructor(verdict: PublishError) {
    this.verdict = verdict
  }
}

export interface Sender {
  readonly leases: ProducerLeases.ProducerLeases<Kafkajs.Producer>
  readonly layouts: Layouts
  /** Topics this producer ever sent to (see `KafkaPublisher.make`). */
  readonly targeted: Set<string>
  readonly compression: Kafkajs.CompressionTypes | undefined
  readonly timeoutMillis: number
}

const toBuffer = (bytes: Uint8Array): Buffer => Buffer.from(bytes.buffer, bytes.byteOffset, bytes.byteLength)

/** One partition's record batch within a `sendBatch`. */
export interface Part {
  readonly topic: string
  readonly partition: number
  readonly records: ReadonlyArray<Outgoing>
}

/**
 * One `sendBatch` holding every part (kafkajs sends one produce request per broker): each part's
 * base offset, `undefined` for a part kafkajs skipped because its metadata lacked the partition
 * (the producer is then replaced), or the client's error. A send that does not answer before
 * `deadline` fails with a `SendError` of the first part's topic: unavailable, the records may
 * have landed.
 */
export const sendParts = (
  sender: Sender,
  parts: ReadonlyArray<Part>,
  deadline: number
): Effect.Effect<ReadonlyArray<bigint | undefined>, unknown> => {
  const { leases } = sender
  const topics = [...new Set(parts.map((part) => part.topic))]
  const topicMessages = topics.map((topic) => ({
    topic,
    messages: parts
      .filter((part) => part.topic === topic)
      .flatMap((part) =>
        part.records.map((record) => ({
          key: record.key,
          value: toBuffer(record.payload),
          partition: part.partition,
          headers: { ...record.headers }
        }))
      )
  }))
  const sendOnce = Effect.flatMap(leases.acquire, (lease) => {
    for (const topic of topics) sender.targeted.add(topic)
    const sending = lease.producer.sendBatch({
      acks: -1,
      ...(sender.compression === undefined ? {} : { compression: sender.compression }),
      topicMessages
    })
    // The producer goes back when the send settles, not when we stop waiting for it: a reset
    // meanwhile must not disconnect it under the send.
    void sending.then(lease.release, lease.release)
    return Effect.tryPromise({ try: () => sending, catch: (error) => error })
  })
  return sendOnce.pipe(
    // Interrupted (a caller's timeout): the send may still land; never reuse this producer.
    Effect.onInterrupt(() => Effect.sync(leases.requestReset)),
    // Our metadata says the topic exists, so an unknown topic is some other topic this
    // producer once used and that was deleted since: replace the producer, try again.
    Effect.catchIf(
      (error) => rootCause(error).type === "UNKNOWN_TOPIC_OR_PARTITION",
      () =>
        Effect.suspend(() => {
          leases.requestReset()
          return sendOnce
        })
    ),
    Effect.timeoutOrElse({
      duration: Math.max(1, deadline - Date.now()),
      // A broker that does not answer in time is unavailable (a frozen broker, a lost
      // network): retried without counting an attempt; the records may have landed.
      orElse: () =>
        Effect.fail(
          new SendError(
            new BrokerUnavailableError({
              topic: topics[0]!,
              reason: `no acknowledgement within ${sender.timeoutMillis} ms; the records may have reached the broker`
            })
          )
        )
    }),
    Effect.map((metadata) => {
      const offsets = parts.map((part) => {
        const found = metadata.find((m) => m.topicName === part.topic && m.partition === part.partition)
        return found !== undefined && found.errorCode === 0 && found.baseOffset !== undefined
          ? BigInt(found.baseOffset)
          : undefined
      })
      // kafkajs's metadata did not know a partition and skipped it: replace the producer.
      if (offsets.includes(undefined)) leases.requestReset()
      return offsets
    })
  )
}

/** The verdict for records kafkajs skipped: its metadata lacked their partition. */
export const notInMetadata = (topic: string, partition: number) =>
  new RetriablePublishError({
    topic,
    reason: `the producer had no metadata for partition ${partition}; it is being refreshed`
  })

/** One partition's record batch in its own request: its base offset, or the error. */
export const sendRecords = (
  sender: Sender,
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
const judge = (sender: Sender, topic: string, error: unknown) =>
  Effect.gen(function* () {
    if (error instanceof SendError) return yield* Effect.fail(error)
    if (requiresProducerReset(error)) sender.leases.requestReset()
    // An unknown topic after our check said it exists: it was deleted a moment ago (the cached
    // layout is stale). Re-read, and report a topic that is really gone as permanent.
    if (rootCause(error).type === "UNKNOWN_TOPIC_OR_PARTITION") {
      const fresh = yield* sender.layouts.fetch(topic).pipe(Effect.orElseSucceed(() => null))
      if (fresh === undefined) {
        return yield* Effect.fail(
          new SendError(new PermanentPublishError({ topic, reason: "the topic no longer exists on the broker" }))
        )
      }
    }
    return yield* Effect.fail(error)
  })
