/**
 * One `send` of one partition's records on the shared idempotent producer: the base offset they
 * were appended at, or the error (a `SendError` when its verdict is already decided). Replaces the
 * producer when its state is uncertain (an interrupted or timed-out send, a reset-worthy error).
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

/** One `send` of one partition's records: the base offset, or the error. */
export const sendRecords = (
  sender: Sender,
  topic: string,
  partition: number,
  batch: ReadonlyArray<Outgoing>,
  deadline: number
) => {
  const { leases } = sender
  const sendOnce = Effect.flatMap(leases.acquire, (lease) => {
    const sending = (async () => {
      // The producer's cached metadata must know the partition: the client folds an unknown
      // partition onto an existing one (`partition % count`) instead of failing.
      const known = await lease.producer.metadata({ topics: [topic] })
      if ((known.topics.get(topic)?.partitionsCount ?? 0) <= partition) {
        const fresh = await lease.producer.metadata({ topics: [topic], forceUpdate: true })
        if ((fresh.topics.get(topic)?.partitionsCount ?? 0) <= partition) {
          throw new SendError(
            new RetriablePublishError({ topic, reason: `the producer's metadata lacks partition ${partition}` })
          )
        }
      }
      return lease.producer.send({
        messages: batch.map((record) => ({
          topic,
          partition,
          key: record.key === null ? undefined : Buffer.from(record.key),
          value: toBuffer(record.payload),
          headers: { ...record.headers }
        }))
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
    Effect.flatMap((result) => {
      const found = result.offsets?.find((o) => o.topic === topic && o.partition === partition)
      return found === undefined
        ? Effect.fail(
            new SendError(new RetriablePublishError({ topic, reason: `no offset reported for partition ${partition}` }))
          )
        : Effect.succeed(found.offset)
    }),
    Effect.catch((error) => judge(sender, topic, error)),
    Effect.result
  )
}

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
