/**
 * One `send` on the shared idempotent producer, of one partition's records (`sendRecords`: the
 * base offset they were appended at, or the error, a `SendError` when its verdict is already
 * decided) or of several partitions' (`sendParts`, the combined send). Replaces the producer when
 * its state is uncertain (an interrupted or timed-out send, a reset-worthy error).
 *
 * @internal
 */
import {
  BrokerUnavailableError,
  PermanentPublishError,
  type PublishError,
  RetriablePublishError
} from "@effect-outbox/core/Errors"
import type * as ProducerLeases from "@effect-outbox/core/ProducerLeases"
import type * as RecordSize from "@effect-outbox/core/RecordSize"
import type { Producer } from "@platformatic/kafka"
import * as Effect from "effect/Effect"
import { describe, isUnknownTopic, requiresProducerReset } from "../PlatformaticErrors.ts"
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

export type AnyProducer = Producer<Buffer | undefined, Buffer, string, string>

export interface Sender {
  readonly leases: ProducerLeases.ProducerLeases<AnyProducer>
  readonly layouts: Layouts
  readonly timeoutMillis: number
}

const toBuffer = (bytes: Uint8Array): Buffer => Buffer.from(bytes.buffer, bytes.byteOffset, bytes.byteLength)

/** The client's message for a record: the payload's bytes not copied, its headers not either. */
const message = (topic: string, partition: number, record: Outgoing) => ({
  topic,
  partition,
  key: record.key === null ? undefined : Buffer.from(record.key),
  value: toBuffer(record.payload),
  headers: record.headers as Record<string, string>
})

// Per producer: the partition count its own metadata showed for each topic, and until when that
// answer is used without asking again (the client's own metadata cache lives as long).
const partitionCounts = new WeakMap<AnyProducer, Map<string, { readonly count: number; readonly until: number }>>()

/** How long a producer's answer is trusted: the client's default `metadataMaxAge`. */
export const partitionsMaxAgeMillis = 5_000

/**
 * How many partitions of `topic` `producer`'s metadata showed within the last
 * {@link partitionsMaxAgeMillis} (0 when not asked, or asked longer ago). Asking the client on
 * every send cost more than the send's own encoding on the log relay's path.
 */
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

/** Records of one partition, as one part of a send. */
export interface Part {
  readonly topic: string
  readonly partition: number
  readonly records: ReadonlyArray<Outgoing>
}

/**
 * The producer's cached metadata must know the partition: the client folds an unknown partition
 * onto an existing one (`partition % count`) instead of failing. Its answer is kept per producer
 * and topic for a while (`knownPartitions`), not asked before every send.
 */
const ensurePartition = async (producer: AnyProducer, topic: string, partition: number): Promise<void> => {
  if (partition < knownPartitions(producer, topic)) return
  const known = await producer.metadata({ topics: [topic] })
  let count = known.topics.get(topic)?.partitionsCount ?? 0
  if (count <= partition) {
    const fresh = await producer.metadata({ topics: [topic], forceUpdate: true })
    count = fresh.topics.get(topic)?.partitionsCount ?? 0
    if (count <= partition) {
      throw new SendError(
        new RetriablePublishError({ topic, reason: `the producer's metadata lacks partition ${partition}` })
      )
    }
  }
  rememberPartitions(producer, topic, count)
}

/**
 * One `send` holding every part (the client sends one produce request per broker): each part's
 * base offset in order, `undefined` for a part the answer does not name; or the error.
 */
export const sendParts = (sender: Sender, parts: ReadonlyArray<Part>, deadline: number) => {
  const { leases } = sender
  const topic = parts[0]?.topic ?? ""
  const sendOnce = Effect.flatMap(leases.acquire, (lease) => {
    const sending = (async () => {
      for (const part of parts) await ensurePartition(lease.producer, part.topic, part.partition)
      return lease.producer.send({
        messages: parts.flatMap((part) => part.records.map((record) => message(part.topic, part.partition, record)))
      })
    })()
    // The producer goes back when the send settles, not when we stop waiting for it.
    void sending.then(lease.release, lease.release)
    return Effect.tryPromise({ try: () => sending, catch: (error) => error })
  })
  return sendOnce.pipe(
    // Interrupted (a caller's timeout): the send may still land; never reuse this producer.
    Effect.onInterrupt(() => Effect.sync(leases.requestReset)),
    Effect.timeoutOrElse({
      duration: Math.max(1, deadline - Date.now()),
      // No answer in time: the broker is unavailable; the records may have landed.
      orElse: () =>
        Effect.sync(leases.requestReset).pipe(
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
    Effect.map((result) =>
      parts.map((part) => result.offsets?.find((o) => o.topic === part.topic && o.partition === part.partition)?.offset)
    )
  )
}

/** One `send` of one partition's records: the base offset, or the error. */
export const sendRecords = (
  sender: Sender,
  topic: string,
  partition: number,
  batch: ReadonlyArray<Outgoing>,
  deadline: number
) =>
  sendParts(sender, [{ topic, partition, records: batch }], deadline).pipe(
    Effect.flatMap(([offset]) =>
      offset === undefined
        ? Effect.fail(
            new SendError(new RetriablePublishError({ topic, reason: `no offset reported for partition ${partition}` }))
          )
        : Effect.succeed(offset)
    ),
    Effect.catch((error) => judge(sender, topic, error)),
    Effect.result
  )

/** A send's error, after resetting the producer when its state is uncertain. */
const judge = (sender: Sender, topic: string, error: unknown) =>
  Effect.gen(function* () {
    if (error instanceof SendError) return yield* Effect.fail(error)
    if (requiresProducerReset(error)) sender.leases.requestReset()
    // "Unknown topic" after our metadata said it exists: deleted a moment ago, or a broker
    // answering from stale metadata (one shutting down or starting says so too). Only a
    // fresh "no such topic" is permanent; without an answer the broker is unavailable.
    if (isUnknownTopic(error)) {
      const fresh = yield* sender.layouts.fetch(topic).pipe(Effect.orElseSucceed(() => null))
      const verdict =
        fresh === undefined
          ? new PermanentPublishError({ topic, reason: "the topic no longer exists on the broker" })
          : fresh === null
            ? new BrokerUnavailableError({ topic, reason: `${describe(error)}; no metadata answer to check` })
            : new RetriablePublishError({
                topic,
                reason: `${describe(error)}; the topic exists, stale metadata`
              })
      return yield* Effect.fail(new SendError(verdict))
    }
    return yield* Effect.fail(error)
  })
