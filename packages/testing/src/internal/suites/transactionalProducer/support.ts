/**
 * What the `TransactionalProducer` cases share: the services under test, the case context, and
 * reading back what a transaction made visible (`read_committed`) and which offsets it committed.
 * Kafka writes a transaction's commit markers just after `commit` returns, so visibility is
 * awaited, never assumed at once.
 *
 * @internal
 */
import { assert } from "@effect/vitest"
import { BrokerAdmin } from "@effect-outbox/core/BrokerAdmin"
import type { ConsumerSource } from "@effect-outbox/core/ConsumerSource"
import type { PublishRequest } from "@effect-outbox/core/Publisher"
import { TopicReader } from "@effect-outbox/core/TopicReader"
import { TransactionalProducer, type TransactionRequest } from "@effect-outbox/core/TransactionalProducer"
import * as Effect from "effect/Effect"
import type * as Scope from "effect/Scope"
import * as Stream from "effect/Stream"
import { publishRequest } from "../../conformance.ts"
import { eventually } from "../../eventually.ts"
import type * as SuiteCase from "../suiteCase.ts"
import type { Topics } from "../topics.ts"

export type Services = TransactionalProducer | TopicReader | BrokerAdmin | ConsumerSource

/** `producer` is on when the adapter can build more producers (the fencing case). */
export type Feature = "producer"

export interface Context {
  readonly topics: Topics
  /** A producer with the given `transactionalId`, built on this test's services in its scope. */
  readonly producer: (transactionalId: string) => Effect.Effect<TransactionalProducer["Service"], unknown, Scope.Scope>
}

export type Case = SuiteCase.Case<Context, Services | Scope.Scope, Feature>

const decoder = new TextDecoder()
export const bytes = (text: string) => new TextEncoder().encode(text)

/** The payloads `read_committed` sees on `topic`, once at least `n` are visible. */
export const visible = (topic: string, n: number) =>
  Effect.gen(function* () {
    const reader = yield* TopicReader
    return yield* eventually(
      Stream.runCollect(reader.read(topic)),
      (records) => records.length >= n,
      `fewer than ${n} committed records became visible on ${topic}`
    )
  })

export const payloads = (topic: string, n: number) =>
  Effect.map(visible(topic, n), (records) => records.map((r) => decoder.decode(r.value)).sort())

/** The group's committed offsets on `topic`, as `partition → offset` (uncommitted left out). */
export const committed = (groupId: string, topic: string) =>
  Effect.gen(function* () {
    const offsets = yield* (yield* BrokerAdmin).groupOffsets({ groupId, topics: [topic] })
    return Object.fromEntries(offsets.flatMap((o) => (o.committed === null ? [] : [[o.partition, o.committed]])))
  })

/**
 * Asserts the group's committed offsets on `topic` are `expected`, waiting up to 10 s for them:
 * Kafka makes a transaction's offsets readable when its commit markers are written, a moment after
 * the commit returned, so a read right after may still see the offsets before it.
 */
export const assertCommitted = (groupId: string, topic: string, expected: Record<number, string>) =>
  Effect.gen(function* () {
    const seen = yield* eventually(
      committed(groupId, topic),
      (offsets) => JSON.stringify(offsets) === JSON.stringify(expected),
      `the offsets of ${groupId} on ${topic} became readable`,
      10_000
    ).pipe(Effect.catch(() => committed(groupId, topic)))
    assert.deepStrictEqual(seen, expected)
  })

export const record = (topic: string, payload: string, partition: number | null = 0, key: string | null = null) =>
  Effect.map(publishRequest(topic, { partition, key, payload: bytes(payload) }), (r): PublishRequest => r)

export const abortedBy = (request: TransactionRequest) =>
  Effect.gen(function* () {
    const producer = yield* TransactionalProducer
    const error = yield* Effect.flip(producer.commit(request))
    assert.strictEqual(error._tag, "TransactionAbortedError")
    assert.strictEqual(error.transactionalId, producer.transactionalId)
    return error
  })

/**
 * After an abort: a follow-up transaction commits `"after"` and offset 2; then only it is
 * visible and only its offset is the group's (Kafka's read_committed view has moved past the
 * aborted transaction once a later one is visible).
 */
export const onlyTheFollowUp = (output: string, input: string, groupId: string) =>
  Effect.gen(function* () {
    const producer = yield* TransactionalProducer
    yield* producer.commit({
      groupId,
      records: [yield* record(output, "after")],
      offsets: [{ topic: input, partition: 0, offset: "2" }]
    })
    assert.deepStrictEqual(yield* payloads(output, 1), ["after"])
    yield* assertCommitted(groupId, input, { 0: "2" })
  })
