/**
 * The conformance suite of the `ConsumerSource` port: ordered delivery, commit-then-resume and
 * crash redelivery. Records are produced through `Publisher` on topics the suite creates with
 * `BrokerAdmin.ensureTopic` under unique names; waits use real (generous) timeouts so the same
 * suite runs against a real broker, where joining a consumer group takes seconds.
 *
 * @since 0.1.0
 */
import { assert, describe, it } from "@effect/vitest"
import { BrokerAdmin } from "@effect-outbox/core/BrokerAdmin"
import {
  type ConsumerBatch,
  type ConsumerRecord,
  ConsumerSource,
  type Subscription
} from "@effect-outbox/core/ConsumerSource"
import type { PublishReceipt } from "@effect-outbox/core/OutboxMessage"
import { Publisher, type PublishRequest } from "@effect-outbox/core/Publisher"
import * as Telemetry from "@effect-outbox/core/Telemetry"
import * as Duration from "effect/Duration"
import * as Effect from "effect/Effect"
import * as Fiber from "effect/Fiber"
import type * as Layer from "effect/Layer"
import * as Result from "effect/Result"
import * as Stream from "effect/Stream"
import { publishRequest, type RequestFields, uniqueName } from "./internal/conformance.ts"

/**
 * @since 0.1.0
 * @category models
 */
export type Services = ConsumerSource | Publisher | BrokerAdmin

/**
 * Switches for behaviours an adapter may not offer. All default to `true`.
 *
 * @since 0.1.0
 * @category models
 */
export interface Features {
  /** Several live members of one group share its partitions without losing records. */
  readonly groupMembers?: boolean
  /**
   * A running group notices partitions added to its topic (at a metadata refresh) and reads them.
   * Off for a client that reassigns partitions only when the group itself rebalances
   * (@platformatic/kafka 2.12: see docs/kafka.md).
   */
  readonly partitionGrowth?: boolean
}

/**
 * @since 0.1.0
 * @category models
 */
export interface Options<R = never> {
  /** Fresh services for every test; may provide extra services `R` that `deleteTopics` uses. */
  readonly layer: () => Layer.Layer<Services | R, unknown>
  /**
   * Called when a test ends with the topics it created, so a shared broker does not keep them.
   * Failures are ignored. Default: topics are left behind (their names start with `topicPrefix`).
   */
  readonly deleteTopics?: (topics: ReadonlyArray<string>) => Effect.Effect<void, unknown, Services | R>
  /** Prefix of every topic the suite creates (default `"conformance"`). */
  readonly topicPrefix?: string
  readonly features?: Features
  /** Per-test timeout in milliseconds (default 120 000). */
  readonly timeout?: number
  /** How long to wait for expected records (default 60 seconds). */
  readonly receiveTimeout?: Duration.Input
}

const publishAll = (requests: ReadonlyArray<PublishRequest>) =>
  Effect.gen(function* () {
    const publisher = yield* Publisher
    const outcomes = yield* publisher.publish(requests)
    return outcomes.map((outcome): PublishReceipt => {
      if (Result.isFailure(outcome)) throw new Error(`publishing failed: ${outcome.failure.message}`)
      return outcome.success
    })
  })

const publishTo = (topic: string, fields: ReadonlyArray<RequestFields>) =>
  Effect.flatMap(
    Effect.forEach(fields, (f) => publishRequest(topic, f)),
    (requests) => Effect.map(publishAll(requests), (receipts) => ({ requests, receipts }))
  )

const eventIdOf = (record: ConsumerRecord) => record.headers["event-id"]

/**
 * Registers the suite under `describe(name)`.
 *
 * @since 0.1.0
 * @category suites
 */
export const suite = <R = never>(name: string, options: Options<R>): void => {
  const features = { groupMembers: true, partitionGrowth: true, ...options.features }
  const timeout = options.timeout ?? 120_000
  const receiveTimeout = options.receiveTimeout ?? Duration.seconds(60)
  const prefix = options.topicPrefix ?? "conformance"
  const deleteTopics = options.deleteTopics
  /** Topics created by the running test, deleted (when the adapter can) as the test ends. */
  let created: Array<string> = []
  const topicName = () => {
    const topic = uniqueName(prefix)
    created.push(topic)
    return topic
  }
  const makeTopic = (partitions: number) =>
    Effect.gen(function* () {
      const admin = yield* BrokerAdmin
      const topic = topicName()
      yield* admin.ensureTopic({ topic, partitions })
      return topic
    })
  const test = <A, E>(title: string, body: Effect.Effect<A, E, Services>) =>
    it.live(
      title,
      () => {
        created = []
        const cleanup = Effect.suspend(() =>
          deleteTopics === undefined || created.length === 0 ? Effect.void : Effect.ignore(deleteTopics(created))
        )
        return Effect.provide(Effect.ensuring(body, cleanup), options.layer())
      },
      timeout
    )

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

  const subscribe = (groupId: string, topics: ReadonlyArray<string>, fromBeginning = true) =>
    Effect.gen(function* () {
      const source = yield* ConsumerSource
      return yield* source.subscribe({ groupId, topics, fromBeginning })
    })

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

  describe(`${name} (ConsumerSource conformance)`, () => {
    test(
      "delivers every record of a partition in offset order, one partition per batch",
      Effect.gen(function* () {
        const topic = yield* makeTopic(2)
        const { receipts, requests } = yield* publishTo(
          topic,
          Array.from({ length: 12 }, (_, i) => ({ partition: i % 2, key: `key-${i % 3}` }))
        )
        const batches: ReadonlyArray<ConsumerBatch> = yield* Effect.scoped(
          Effect.flatMap(subscribe(uniqueName("group"), [topic]), (s) => batchesOf(s, 12))
        )
        for (const batch of batches) {
          assert.strictEqual(batch.topic, topic)
          for (const record of batch.records) {
            assert.strictEqual(record.partition, batch.partition)
            assert.strictEqual(record.topic, topic)
          }
        }
        const records = batches.flatMap((batch) => batch.records)
        assert.strictEqual(records.length, 12)
        for (const partition of [0, 1]) {
          const delivered = records.filter((r) => r.partition === partition)
          const expected = receipts.flatMap((receipt, i) => (receipt.partition === partition ? [i] : []))
          assert.deepStrictEqual(
            delivered.map((r) => r.offset),
            expected.map((i) => receipts[i]!.offset)
          )
          assert.deepStrictEqual(
            delivered.map(eventIdOf),
            expected.map((i) => requests[i]!.id)
          )
          assert.deepStrictEqual(
            delivered.map((r) => r.key),
            expected.map((i) => requests[i]!.key)
          )
        }
        for (const record of records) assert.isTrue(Number.isFinite(record.timestamp) && record.timestamp > 0)
      })
    )

    test(
      "headers, keys and binary values round-trip byte for byte",
      Effect.gen(function* () {
        const topic = yield* makeTopic(1)
        const value = Uint8Array.from({ length: 256 }, (_, i) => i)
        const { requests } = yield* publishTo(topic, [
          {
            key: "clé-ü",
            headers: { traceparent: "00-0af7651916cd43dd8448eb211c80319c-b7ad6b7169203331-01", note: "é ✓" },
            payload: value
          },
          { key: null, payload: new Uint8Array([]) }
        ])
        const records = yield* Effect.scoped(
          Effect.flatMap(subscribe(uniqueName("group"), [topic]), (s) => recordsOf(s, 2))
        )
        assert.strictEqual(records[0]!.key, "clé-ü")
        assert.deepStrictEqual([...records[0]!.value], [...value])
        assert.deepStrictEqual(records[0]!.headers, requests[0]!.headers)
        assert.strictEqual(records[1]!.key, null)
        assert.strictEqual(records[1]!.value.length, 0)
        assert.strictEqual(eventIdOf(records[1]!), requests[1]!.id)
      })
    )

    test(
      "the stream waits for records published after subscribing",
      Effect.gen(function* () {
        const topic = yield* makeTopic(1)
        const records = yield* Effect.scoped(
          Effect.gen(function* () {
            const subscription = yield* subscribe(uniqueName("group"), [topic])
            const fiber = yield* Effect.forkChild(recordsOf(subscription, 3))
            yield* Effect.sleep("200 millis")
            yield* publishTo(topic, [{ partition: 0 }])
            yield* Effect.sleep("200 millis")
            yield* publishTo(topic, [{ partition: 0 }, { partition: 0 }])
            return yield* Fiber.join(fiber)
          })
        )
        assert.strictEqual(records.length, 3)
        assert.deepStrictEqual(
          records.map((r) => r.offset),
          [...records.map((r) => r.offset)].sort((a, b) => Number(BigInt(a) - BigInt(b)))
        )
      })
    )

    test(
      "after a commit, the group's next subscription resumes at the committed offset",
      Effect.gen(function* () {
        const topic = yield* makeTopic(1)
        const group = uniqueName("group")
        const { receipts } = yield* publishTo(
          topic,
          Array.from({ length: 6 }, () => ({ partition: 0 }))
        )
        yield* Effect.scoped(
          Effect.gen(function* () {
            const subscription = yield* subscribe(group, [topic])
            const records = yield* recordsOf(subscription, 6)
            assert.strictEqual(records.length, 6)
            // Processed the first four: commit the next offset to read.
            yield* subscription.commit([{ topic, partition: 0, offset: String(BigInt(records[3]!.offset) + 1n) }])
          })
        )
        const resumed = yield* Effect.scoped(Effect.flatMap(subscribe(group, [topic]), (s) => recordsOf(s, 2)))
        assert.deepStrictEqual(
          resumed.map((r) => r.offset),
          [receipts[4]!.offset, receipts[5]!.offset]
        )
      })
    )

    test(
      "without a commit, the group's next subscription redelivers from the last committed offset",
      Effect.gen(function* () {
        const topic = yield* makeTopic(1)
        const group = uniqueName("group")
        const { receipts } = yield* publishTo(
          topic,
          Array.from({ length: 4 }, () => ({ partition: 0 }))
        )
        const offsets = receipts.map((r) => r.offset)
        // A member that crashes before committing anything.
        const first = yield* Effect.scoped(Effect.flatMap(subscribe(group, [topic]), (s) => recordsOf(s, 4)))
        assert.deepStrictEqual(
          first.map((r) => r.offset),
          offsets
        )
        // Every record comes again; this member commits after the first one, then crashes.
        yield* Effect.scoped(
          Effect.gen(function* () {
            const subscription = yield* subscribe(group, [topic])
            const again = yield* recordsOf(subscription, 4)
            assert.deepStrictEqual(
              again.map((r) => r.offset),
              offsets
            )
            yield* subscription.commit([{ topic, partition: 0, offset: String(BigInt(offsets[0]!) + 1n) }])
          })
        )
        const third = yield* Effect.scoped(Effect.flatMap(subscribe(group, [topic]), (s) => recordsOf(s, 3)))
        assert.deepStrictEqual(
          third.map((r) => r.offset),
          offsets.slice(1)
        )
      })
    )

    test(
      "one commit covers several partitions; each resumes at its own offset",
      Effect.gen(function* () {
        const topic = yield* makeTopic(2)
        const group = uniqueName("group")
        const { receipts } = yield* publishTo(
          topic,
          [0, 0, 0, 1, 1, 1].map((partition) => ({ partition }))
        )
        yield* Effect.scoped(
          Effect.gen(function* () {
            const subscription = yield* subscribe(group, [topic])
            yield* recordsOf(subscription, 6)
            yield* subscription.commit([
              { topic, partition: 0, offset: String(BigInt(receipts[1]!.offset) + 1n) },
              { topic, partition: 1, offset: String(BigInt(receipts[3]!.offset) + 1n) }
            ])
          })
        )
        const resumed = yield* Effect.scoped(Effect.flatMap(subscribe(group, [topic]), (s) => recordsOf(s, 3)))
        const byPartition = (p: number) => resumed.filter((r) => r.partition === p).map((r) => r.offset)
        assert.deepStrictEqual(byPartition(0), [receipts[2]!.offset])
        assert.deepStrictEqual(byPartition(1), [receipts[4]!.offset, receipts[5]!.offset])
      })
    )

    test(
      "consumer groups are independent: each gets every record",
      Effect.gen(function* () {
        const topic = yield* makeTopic(1)
        const { requests } = yield* publishTo(topic, [{ partition: 0 }, { partition: 0 }])
        const groupA = uniqueName("group-a")
        yield* Effect.scoped(
          Effect.gen(function* () {
            const subscription = yield* subscribe(groupA, [topic])
            const records = yield* recordsOf(subscription, 2)
            yield* subscription.commit([{ topic, partition: 0, offset: String(BigInt(records[1]!.offset) + 1n) }])
          })
        )
        const other = yield* Effect.scoped(
          Effect.flatMap(subscribe(uniqueName("group-b"), [topic]), (s) => recordsOf(s, 2))
        )
        assert.deepStrictEqual(
          other.map(eventIdOf),
          requests.map((r) => r.id)
        )
      })
    )

    test(
      "hundreds of records arrive complete and in order across batches",
      Effect.gen(function* () {
        const topic = yield* makeTopic(1)
        const { requests } = yield* publishTo(
          topic,
          Array.from({ length: 300 }, () => ({ partition: 0 }))
        )
        const records = yield* Effect.scoped(
          Effect.flatMap(subscribe(uniqueName("group"), [topic]), (s) => recordsOf(s, 300))
        )
        assert.deepStrictEqual(
          records.map(eventIdOf),
          requests.map((r) => r.id)
        )
      })
    )

    test(
      "a member that works slowly on each batch keeps receiving records published meanwhile",
      Effect.gen(function* () {
        const topic = yield* makeTopic(2)
        const subscription = yield* subscribe(uniqueName("group"), [topic])
        // Records keep arriving while the member is busy: the source must keep fetching between
        // pulls (the @platformatic/kafka adapter once stopped for good here, see docs/kafka.md).
        const producer = yield* Effect.forkChild(
          Effect.forEach(
            Array.from({ length: 10 }, (_, round) => round),
            (round) =>
              Effect.andThen(
                publishTo(
                  topic,
                  Array.from({ length: 20 }, (_, i) => ({ partition: i % 2, key: `key-${round}-${i}` }))
                ),
                Effect.sleep("100 millis")
              ),
            { discard: true }
          )
        )
        let received = 0
        yield* subscription.batches.pipe(
          Stream.tap((batch) => Effect.sleep("50 millis").pipe(Effect.as(batch))),
          Stream.takeUntil((batch) => {
            received += batch.records.length
            return received >= 200
          }),
          Stream.runDrain,
          Effect.timeout(receiveTimeout)
        )
        yield* Fiber.join(producer)
        assert.isAtLeast(received, 200)
      }).pipe(Effect.scoped)
    )

    test(
      "a subscription covers several topics",
      Effect.gen(function* () {
        const a = yield* makeTopic(1)
        const b = yield* makeTopic(1)
        const fromA = yield* publishTo(a, [{ partition: 0 }])
        const fromB = yield* publishTo(b, [{ partition: 0 }])
        const records = yield* Effect.scoped(
          Effect.flatMap(subscribe(uniqueName("group"), [a, b]), (s) => recordsOf(s, 2))
        )
        assert.deepStrictEqual(records.map(eventIdOf).sort(), [fromA.requests[0]!.id, fromB.requests[0]!.id].sort())
      })
    )

    test(
      "BrokerAdmin.groupOffsets: the group's committed offset and the log's end per partition, so lag follows commits",
      Effect.gen(function* () {
        const admin = yield* BrokerAdmin
        const topic = yield* makeTopic(2)
        const group = uniqueName("group")
        const { receipts } = yield* publishTo(
          topic,
          [0, 0, 0, 0, 0, 1, 1, 1].map((partition) => ({ partition }))
        )
        const offsetsOf = Effect.map(admin.groupOffsets({ groupId: group, topics: [topic] }), (rows) =>
          rows.map((row) => ({ ...row, records: Number(BigInt(row.end) - BigInt(row.start)) }))
        )
        const lags = (fromBeginning: boolean) =>
          Effect.map(offsetsOf, (rows) => rows.map((row) => Telemetry.lagOf(row, { fromBeginning })))

        // A group that never committed: no committed offset; it lags by the whole log when it
        // reads from the beginning, by nothing when it starts at the end.
        const before = yield* offsetsOf
        assert.deepStrictEqual(
          before.map((row) => [row.topic, row.partition, row.committed, row.records]),
          [
            [topic, 0, null, 5],
            [topic, 1, null, 3]
          ]
        )
        assert.strictEqual(before[0]!.end, String(BigInt(receipts[4]!.offset) + 1n))
        assert.deepStrictEqual(yield* lags(true), [5, 3])
        assert.deepStrictEqual(yield* lags(false), [0, 0])

        yield* Effect.scoped(
          Effect.gen(function* () {
            const subscription = yield* subscribe(group, [topic])
            yield* recordsOf(subscription, 8)
            // Delivered is not done: nothing committed, nothing less behind.
            assert.deepStrictEqual(yield* lags(true), [5, 3])
            // Two records of partition 0 finished.
            const next = String(BigInt(receipts[1]!.offset) + 1n)
            yield* subscription.commit([{ topic, partition: 0, offset: next }])
            const partly = yield* offsetsOf
            assert.strictEqual(partly[0]!.committed, next)
            assert.strictEqual(partly[1]!.committed, null)
            assert.deepStrictEqual(yield* lags(true), [3, 3])
            // The log grows while the member holds the rest: the lag grows with it.
            yield* publishTo(topic, [{ partition: 0 }, { partition: 0 }])
            assert.deepStrictEqual(yield* lags(true), [5, 3])
          })
        )
        // The next member finishes everything.
        yield* Effect.scoped(
          Effect.gen(function* () {
            const subscription = yield* subscribe(group, [topic])
            const records = yield* recordsOf(subscription, 8)
            const last = (p: number) => records.filter((r) => r.partition === p).at(-1)!
            yield* subscription.commit(
              [0, 1].map((partition) => ({ topic, partition, offset: String(BigInt(last(partition).offset) + 1n) }))
            )
          })
        )
        assert.deepStrictEqual(yield* lags(true), [0, 0])
        assert.deepStrictEqual(yield* lags(false), [0, 0])
        // A topic that does not exist is left out, the others still answer.
        const missing = uniqueName(`${prefix}-missing`)
        const rows = yield* admin.groupOffsets({ groupId: group, topics: [missing, topic] })
        assert.deepStrictEqual(
          rows.map((row) => [row.topic, row.partition]),
          [
            [topic, 0],
            [topic, 1]
          ]
        )
      })
    )

    test(
      "reset policy latest: a new group that starts at the end skips what was there and receives what comes after",
      Effect.gen(function* () {
        const topic = yield* makeTopic(1)
        const { requests: before } = yield* publishTo(topic, [{}, {}])
        const old = new Set(before.map((r) => r.id as string))
        const received = yield* Effect.scoped(
          Effect.gen(function* () {
            const subscription = yield* subscribe(uniqueName("group"), [topic], false)
            const got: Array<ConsumerRecord> = []
            const reader = yield* Effect.forkChild(
              subscription.batches.pipe(Stream.runForEach((batch) => Effect.sync(() => got.push(...batch.records))))
            )
            // Joining takes a while on a real broker and the end is read at assignment: publish
            // until a record arrives, then check what did.
            yield* Effect.gen(function* () {
              while (got.length === 0) {
                yield* publishTo(topic, [{}])
                yield* Effect.sleep("500 millis")
              }
            }).pipe(Effect.timeout(receiveTimeout))
            yield* Fiber.interrupt(reader)
            return got
          })
        )
        assert.isAbove(received.length, 0)
        assert.deepStrictEqual(
          received.filter((r) => old.has(eventIdOf(r)!)),
          [],
          "records published before the group joined were delivered"
        )
      })
    )

    if (features.partitionGrowth) {
      test(
        "reset policy earliest: a partition added to the topic is read from its first record once the group sees it",
        Effect.gen(function* () {
          const topic = yield* makeTopic(1)
          yield* publishTo(topic, [{ partition: 0 }])
          const received = yield* Effect.scoped(
            Effect.gen(function* () {
              const subscription = yield* subscribe(uniqueName("group"), [topic], true)
              const got: Array<ConsumerRecord> = []
              const reader = yield* Effect.forkChild(
                subscription.batches.pipe(Stream.runForEach((batch) => Effect.sync(() => got.push(...batch.records))))
              )
              yield* Effect.gen(function* () {
                while (got.length === 0) yield* Effect.sleep("100 millis")
              }).pipe(Effect.timeout(receiveTimeout))
              // The topic grows while the member runs; records land on the new partition before the
              // group's metadata says it exists (a real consumer notices it at its next refresh).
              yield* (yield* BrokerAdmin).growPartitions(topic, 2)
              const added = yield* publishToPartition(topic, 1, 3)
              yield* Effect.gen(function* () {
                while (got.filter((r) => r.partition === 1).length < added.length) yield* Effect.sleep("200 millis")
              }).pipe(Effect.timeout(receiveTimeout))
              yield* Fiber.interrupt(reader)
              return { got, added }
            })
          )
          const onNew = received.got.filter((r) => r.partition === 1)
          assert.deepStrictEqual(
            onNew.map(eventIdOf),
            received.added.map((r) => r.id),
            "every record of the new partition, in order, from its first"
          )
        })
      )
    }

    test(
      "a paused partition is not delivered until it is resumed; the others keep flowing (M2)",
      Effect.gen(function* () {
        const topic = yield* makeTopic(2)
        yield* publishTo(
          topic,
          Array.from({ length: 8 }, (_, i) => ({ partition: i % 2 }))
        )
        yield* Effect.scoped(
          Effect.gen(function* () {
            const subscription = yield* subscribe(uniqueName("group"), [topic])
            yield* subscription.pause([{ topic, partition: 0 }])
            const before = yield* subscription.batches.pipe(
              Stream.takeUntil((batch) => {
                assert.notStrictEqual(batch.partition, 0, "a paused partition was delivered")
                return batch.records.at(-1)!.offset === "3"
              }),
              Stream.runCollect,
              Effect.timeout(receiveTimeout)
            )
            assert.deepStrictEqual(
              before.flatMap((b) => b.records.map((r) => r.offset)),
              ["0", "1", "2", "3"]
            )
            yield* subscription.resume([{ topic, partition: 0 }])
            const after = yield* subscription.batches.pipe(
              Stream.filter((batch) => batch.partition === 0),
              Stream.takeUntil((batch) => batch.records.at(-1)!.offset === "3"),
              Stream.runCollect,
              Effect.timeout(receiveTimeout)
            )
            assert.deepStrictEqual(
              after.flatMap((b) => b.records.map((r) => r.offset)),
              ["0", "1", "2", "3"]
            )
          })
        )
      })
    )

    if (features.groupMembers) {
      test(
        "two live members of one group together receive every record",
        Effect.gen(function* () {
          const topic = yield* makeTopic(4)
          const group = uniqueName("group")
          const { requests } = yield* publishTo(
            topic,
            Array.from({ length: 16 }, (_, i) => ({ partition: i % 4 }))
          )
          const wanted = new Set(requests.map((r) => r.id as string))
          const seen = new Set<string>()
          yield* Effect.scoped(
            Effect.gen(function* () {
              const members = yield* Effect.all([subscribe(group, [topic]), subscribe(group, [topic])])
              const drain = (subscription: Subscription) =>
                subscription.batches.pipe(
                  Stream.runForEach((batch) =>
                    Effect.sync(() => {
                      for (const record of batch.records) seen.add(eventIdOf(record)!)
                    })
                  )
                )
              const fibers = yield* Effect.forEach(members, (m) => Effect.forkChild(drain(m)))
              yield* Effect.gen(function* () {
                while ([...wanted].some((id) => !seen.has(id))) yield* Effect.sleep("50 millis")
              }).pipe(Effect.timeout(receiveTimeout))
              yield* Effect.forEach(fibers, Fiber.interrupt)
            })
          )
          assert.isTrue([...wanted].every((id) => seen.has(id)))
        })
      )

      test(
        "batches of a partition a rebalance moved to another member are no longer current (M3)",
        Effect.gen(function* () {
          const topic = yield* makeTopic(2)
          const group = uniqueName("group")
          yield* publishTo(
            topic,
            Array.from({ length: 8 }, (_, i) => ({ partition: i % 2 }))
          )
          yield* Effect.scoped(
            Effect.gen(function* () {
              const collect = (subscription: Subscription, into: Array<ConsumerBatch>) =>
                Effect.forkChild(
                  subscription.batches.pipe(Stream.runForEach((batch) => Effect.sync(() => into.push(batch))))
                )
              const waitUntil = (check: () => boolean) =>
                Effect.gen(function* () {
                  while (!check()) yield* Effect.sleep("50 millis")
                }).pipe(Effect.timeout(receiveTimeout))
              // Member A alone owns both partitions; nothing is committed.
              const a = yield* subscribe(group, [topic])
              const ofA: Array<ConsumerBatch> = []
              yield* collect(a, ofA)
              yield* waitUntil(() => new Set(ofA.map((b) => b.partition)).size === 2)
              const early = [...ofA]
              assert.isTrue(early.every((batch) => a.isCurrent(batch)))
              // Member B joins: the rebalance gives it a partition, which restarts at offset 0.
              const b = yield* subscribe(group, [topic])
              const ofB: Array<ConsumerBatch> = []
              yield* collect(b, ofB)
              yield* waitUntil(() => ofB.length > 0)
              const moved = new Set(ofB.map((batch) => batch.partition))
              for (const batch of early) {
                if (moved.has(batch.partition)) assert.isFalse(a.isCurrent(batch), `partition ${batch.partition}`)
              }
              for (const batch of ofB) assert.isTrue(b.isCurrent(batch))
            })
          )
        })
      )
    }
  })
}
