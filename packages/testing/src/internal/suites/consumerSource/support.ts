/**
 * What the `ConsumerSource` cases share: the services under test, the feature switches, and the
 * per-suite context (its topics and receive timeout) every case function is given.
 *
 * @internal
 */
import type { BrokerAdmin } from "@effect-outbox/core/BrokerAdmin"
import { type ConsumerRecord, ConsumerSource, type Subscription } from "@effect-outbox/core/ConsumerSource"
import type { PublishReceipt } from "@effect-outbox/core/OutboxMessage"
import { Publisher, type PublishRequest } from "@effect-outbox/core/Publisher"
import type * as Duration from "effect/Duration"
import * as Effect from "effect/Effect"
import * as Result from "effect/Result"
import * as Stream from "effect/Stream"
import { publishRequest, type RequestFields } from "../../conformance.ts"
import type * as SuiteCase from "../suiteCase.ts"
import type { Topics } from "../topics.ts"

export type Services = ConsumerSource | Publisher | BrokerAdmin

/** The suite's feature switches (documented on `ConsumerSourceSuite.Features`). */
export type Feature = "groupMembers" | "partitionGrowth"

export type Case = SuiteCase.Case<Context, Services, Feature>

export const publishAll = (requests: ReadonlyArray<PublishRequest>) =>
  Effect.gen(function* () {
    const publisher = yield* Publisher
    const outcomes = yield* publisher.publish(requests)
    return outcomes.map((outcome): PublishReceipt => {
      if (Result.isFailure(outcome)) throw new Error(`publishing failed: ${outcome.failure.message}`)
      return outcome.success
    })
  })

export const publishTo = (topic: string, fields: ReadonlyArray<RequestFields>) =>
  Effect.flatMap(
    Effect.forEach(fields, (f) => publishRequest(topic, f)),
    (requests) => Effect.map(publishAll(requests), (receipts) => ({ requests, receipts }))
  )

export const eventIdOf = (record: ConsumerRecord) => record.headers["event-id"]

export const subscribe = (groupId: string, topics: ReadonlyArray<string>, fromBeginning = true) =>
  Effect.gen(function* () {
    const source = yield* ConsumerSource
    return yield* source.subscribe({ groupId, topics, fromBeginning })
  })

/** The suite's topics plus the waits bounded by its receive timeout. */
export const context = (topics: Topics, receiveTimeout: Duration.Input) => {
  /** Batches until at least `n` records arrived (fails after the receive timeout). */
  const batchesOf = (subscription: Subscription, n: number) => {
    let received = 0
    return subscription.batches.pipe(
      Stream.takeUntil((batch) => {
        received += batch.records.length
        return received >= n
      }),
      Stream.runCollect,
      Effect.timeout(receiveTimeout)
    )
  }
  const recordsOf = (subscription: Subscription, n: number) =>
    Effect.map(batchesOf(subscription, n), (batches) => batches.flatMap((batch) => batch.records))

  /** Publishes until the publisher knows `partition` (a producer sees a grown topic late). */
  const publishToPartition = (topic: string, partition: number, count: number) =>
    Effect.gen(function* () {
      const publisher = yield* Publisher
      const requests = yield* Effect.forEach(Array.from({ length: count }), () => publishRequest(topic, { partition }))
      for (;;) {
        const outcomes = yield* publisher.publish(requests)
        if (outcomes.every(Result.isSuccess)) return requests
        const failure = outcomes.find(Result.isFailure)!.failure
        if (failure._tag !== "UnknownPartitionError" && failure._tag !== "RetriablePublishError") {
          throw new Error(`publishing to the new partition failed: ${failure.message}`)
        }
        yield* Effect.sleep("500 millis")
      }
    }).pipe(Effect.timeout(receiveTimeout))

  return { ...topics, receiveTimeout, batchesOf, recordsOf, publishToPartition }
}

export type Context = ReturnType<typeof context>
