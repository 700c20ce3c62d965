/**
 * The conformance suite of the `TransactionalProducer` port: a transaction's records and
 * its consumer group's offsets become visible together or not at all. A committed transaction's
 * records are read back (through `TopicReader`, which reads `read_committed`) where its receipts
 * say, and its offsets are the group's; an aborted one — a record the broker refuses, a missing
 * topic or partition, offsets it cannot commit, a producer fenced by a newer one with the same
 * `transactionalId` — leaves no record visible and no offset committed.
 *
 * Kafka writes a transaction's commit markers just after `commit` returns, so visibility is
 * awaited (up to 15 s), never assumed at once. Each test creates its own uniquely named topics
 * through `BrokerAdmin`. The suite is a table of named cases (Watermill's shape): {@link cases}
 * lists them, each with the feature it needs; {@link suite} registers the ones the adapter offers.
 *
 * @since 0.1.0
 */
import { assert } from "@effect/vitest"
import { BrokerAdmin } from "@effect-outbox/core/BrokerAdmin"
import type { PublishRequest } from "@effect-outbox/core/Publisher"
import { TopicReader } from "@effect-outbox/core/TopicReader"
import { TransactionalProducer, type TransactionRequest } from "@effect-outbox/core/TransactionalProducer"
import * as Effect from "effect/Effect"
import type * as Layer from "effect/Layer"
import type * as Scope from "effect/Scope"
import * as Stream from "effect/Stream"
import { registerCases } from "./internal/caseTable.ts"
import { publishRequest, uniqueName } from "./internal/conformance.ts"
import { eventually } from "./internal/eventually.ts"
import { type DeleteTopics, type Topics, withTopics } from "./internal/suiteTopics.ts"

/**
 * @since 0.1.0
 * @category models
 */
export type Services = TransactionalProducer | TopicReader | BrokerAdmin

/**
 * A producer with the given `transactionalId`, built in the test's scope.
 *
 * @since 0.1.0
 * @category models
 */
export type MakeProducer<R> = (
  transactionalId: string
) => Effect.Effect<TransactionalProducer["Service"], unknown, Services | R | Scope.Scope>

/**
 * @since 0.1.0
 * @category models
 */
export interface Options<R = never> {
  /** Fresh services for every test (a producer with a fresh `transactionalId`). */
  readonly layer: () => Layer.Layer<Services | R, unknown>
  /** Deletes the topics a test created when it ends (failures ignored). Default: left behind. */
  readonly deleteTopics?: DeleteTopics<Services | R>
  /** Builds more producers, for the fencing case. Without it that case does not run. */
  readonly producer?: MakeProducer<R>
  /** Prefix of every topic the suite creates (default `"tx-conformance"`). */
  readonly topicPrefix?: string
  /** Per-test timeout in milliseconds (default 120 000). */
  readonly timeout?: number
}

/**
 * What a case gets: its topics and, when the adapter gives one, a way to build more producers.
 *
 * @since 0.1.0
 * @category models
 */
export interface CaseContext<R> {
  readonly topics: Topics
  readonly producer: MakeProducer<R>
}

/**
 * One named case: `needs` names what the adapter must offer for it to run.
 *
 * @since 0.1.0
 * @category models
 */
export interface Case {
  readonly name: string
  readonly needs?: "producer"
  readonly run: <R>(context: CaseContext<R>) => Effect.Effect<void, unknown, Services | R | Scope.Scope>
}

const decoder = new TextDecoder()
const bytes = (text: string) => new TextEncoder().encode(text)

/** The payloads `read_committed` sees on `topic`, once at least `n` are visible. */
const visible = (topic: string, n: number) =>
  Effect.gen(function* () {
    const reader = yield* TopicReader
    return yield* eventually(
      Stream.runCollect(reader.read(topic)),
      (records) => records.length >= n,
      `fewer than ${n} committed records became visible on ${topic}`
    )
  })

const payloads = (topic: string, n: number) =>
  Effect.map(visible(topic, n), (records) => records.map((r) => decoder.decode(r.value)).sort())

/** The group's committed offsets on `topic`, as `partition → offset` (uncommitted left out). */
const committed = (groupId: string, topic: string) =>
  Effect.gen(function* () {
    const offsets = yield* (yield* BrokerAdmin).groupOffsets({ groupId, topics: [topic] })
    return Object.fromEntries(offsets.flatMap((o) => (o.committed === null ? [] : [[o.partition, o.committed]])))
  })

/**
 * Asserts the group's committed offsets on `topic` are `expected`, waiting up to 10 s for them:
 * Kafka makes a transaction's offsets readable when its commit markers are written, a moment after
 * the commit returned, so a read right after may still see the offsets before it.
 */
const assertCommitted = (groupId: string, topic: string, expected: Record<number, string>) =>
  Effect.gen(function* () {
    const seen = yield* eventually(
      committed(groupId, topic),
      (offsets) => JSON.stringify(offsets) === JSON.stringify(expected),
      `the offsets of ${groupId} on ${topic} became readable`,
      10_000
    ).pipe(Effect.catch(() => committed(groupId, topic)))
    assert.deepStrictEqual(seen, expected)
  })

const record = (topic: string, payload: string, partition: number | null = 0, key: string | null = null) =>
  Effect.map(publishRequest(topic, { partition, key, payload: bytes(payload) }), (r): PublishRequest => r)

const abortedBy = (request: TransactionRequest) =>
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
const onlyTheFollowUp = (output: string, input: string, groupId: string) =>
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

const commitsRecordsAndOffsets: Case = {
  name: "a committed transaction's records are visible where its receipts say, with the group's offsets",
  run: ({ topics }) =>
    Effect.gen(function* () {
      const producer = yield* TransactionalProducer
      const output = yield* topics.make(2)
      const other = yield* topics.make(1)
      const input = yield* topics.make(2)
      const groupId = uniqueName("tx-group")
      const records = [
        yield* record(output, "a", 0),
        yield* record(output, "b", 1),
        yield* record(other, "c", null, "key-c"),
        yield* record(output, "d", 0)
      ]
      const receipts = yield* producer.commit({
        groupId,
        records,
        offsets: [
          { topic: input, partition: 0, offset: "7" },
          { topic: input, partition: 1, offset: "3" }
        ]
      })
      assert.deepStrictEqual(
        receipts.map((r) => [r.topic, r.partition]),
        [
          [output, 0],
          [output, 1],
          [other, 0],
          [output, 0]
        ]
      )
      assert.isTrue(BigInt(receipts[0]!.offset) < BigInt(receipts[3]!.offset), "one partition's receipts in order")
      const read = [...(yield* visible(output, 3)), ...(yield* visible(other, 1))]
      records.forEach((request, i) => {
        const receipt = receipts[i]!
        const found = read.find(
          (r) => r.topic === receipt.topic && r.partition === receipt.partition && r.offset === receipt.offset
        )
        assert.isDefined(found, `nothing at ${receipt.topic}/${receipt.partition}/${receipt.offset}`)
        assert.strictEqual(found!.headers["event-id"], request.id)
        assert.strictEqual(found!.key, request.key)
      })
      yield* assertCommitted(groupId, input, { 0: "7", 1: "3" })
    })
}

const successiveTransactions: Case = {
  name: "successive transactions append after one another and move the group's offsets forward",
  run: ({ topics }) =>
    Effect.gen(function* () {
      const producer = yield* TransactionalProducer
      const output = yield* topics.make(1)
      const input = yield* topics.make(1)
      const groupId = uniqueName("tx-group")
      const offsets = []
      for (let i = 1; i <= 3; i++) {
        const [receipt] = yield* producer.commit({
          groupId,
          records: [yield* record(output, `r${i}`)],
          offsets: [{ topic: input, partition: 0, offset: String(i) }]
        })
        offsets.push(BigInt(receipt!.offset))
      }
      assert.isTrue(offsets[0]! < offsets[1]! && offsets[1]! < offsets[2]!, `offsets ${offsets.join(",")}`)
      assert.deepStrictEqual(yield* payloads(output, 3), ["r1", "r2", "r3"])
      yield* assertCommitted(groupId, input, { 0: "3" })
    })
}

const offsetsAlone: Case = {
  name: "a transaction of offsets alone commits them; an empty one changes nothing",
  run: ({ topics }) =>
    Effect.gen(function* () {
      const producer = yield* TransactionalProducer
      const input = yield* topics.make(1)
      const groupId = uniqueName("tx-group")
      assert.deepStrictEqual(yield* producer.commit({ groupId, records: [], offsets: [] }), [])
      assert.deepStrictEqual(yield* committed(groupId, input), {})
      const receipts = yield* producer.commit({
        groupId,
        records: [],
        offsets: [{ topic: input, partition: 0, offset: "4" }]
      })
      assert.deepStrictEqual(receipts, [])
      yield* assertCommitted(groupId, input, { 0: "4" })
    })
}

/** The records (each built fresh) and offsets of a transaction that must abort. */
interface Doomed {
  readonly records: ReadonlyArray<Effect.Effect<PublishRequest>>
  readonly offsets: TransactionRequest["offsets"]
}

/**
 * A case where the transaction `doomed` describes (a good record to `output` among the bad,
 * offsets of `input`) must abort — not retriable unless `notRetriable` is `false` — and leave
 * nothing behind: a follow-up transaction is all that shows.
 */
const abortCase = (
  name: string,
  doomed: (topics: Topics, output: string, input: string) => Doomed,
  notRetriable = true
): Case => ({
  name,
  run: ({ topics }) =>
    Effect.gen(function* () {
      const output = yield* topics.make(2)
      const input = yield* topics.make(1)
      const groupId = uniqueName("tx-group")
      const { records, offsets } = doomed(topics, output, input)
      const error = yield* abortedBy({ groupId, records: yield* Effect.all(records), offsets })
      if (notRetriable) assert.isFalse(error.retriable, error.message)
      yield* onlyTheFollowUp(output, input, groupId)
    })
})

const inputAt1 = (input: string) => [{ topic: input, partition: 0, offset: "1" }]

const missingPartitionAborts = abortCase(
  "a record for a partition the topic lacks aborts the whole transaction, not retriable",
  (_, output, input) => ({
    records: [record(output, "doomed"), record(output, "nowhere", 5)],
    offsets: inputAt1(input)
  })
)

const missingTopicAborts = abortCase(
  "a record for a topic that does not exist aborts the whole transaction, not retriable",
  (topics, output, input) => ({
    records: [record(output, "doomed"), record(topics.name(), "nowhere")],
    offsets: inputAt1(input)
  })
)

const uncommittableOffsetsAbort = abortCase(
  "offsets the broker cannot commit (a missing topic) abort the transaction: its records never show",
  (topics, output, input) => ({
    records: [record(output, "doomed")],
    offsets: [...inputAt1(input), { topic: topics.name(), partition: 0, offset: "1" }]
  }),
  // The port promises the abort; whether Kafka's answer here is retriable is the client's call.
  false
)

const refusedRecordAborts = abortCase(
  "a record the broker refuses (over max.message.bytes) aborts the whole transaction, not retriable",
  (_, output, input) => ({
    records: [record(output, "doomed"), publishRequest(output, { partition: 0, payload: new Uint8Array(1_100_000) })],
    offsets: inputAt1(input)
  })
)

const newerProducerFences: Case = {
  name: "a newer producer with the same transactionalId fences the older: its commits abort, not retriable",
  needs: "producer",
  run: ({ topics, producer }) =>
    Effect.gen(function* () {
      const output = yield* topics.make(1)
      const input = yield* topics.make(1)
      const groupId = uniqueName("tx-group")
      const transactionalId = uniqueName("tx-fenced")
      const older = yield* producer(transactionalId)
      const offsets = (offset: string) => [{ topic: input, partition: 0, offset }]
      yield* older.commit({ groupId, records: [yield* record(output, "old")], offsets: offsets("1") })
      const newer = yield* producer(transactionalId)
      yield* newer.commit({ groupId, records: [yield* record(output, "new")], offsets: offsets("2") })
      const error = yield* Effect.flip(
        older.commit({ groupId, records: [yield* record(output, "zombie")], offsets: offsets("3") })
      )
      assert.strictEqual(error._tag, "TransactionAbortedError")
      assert.isFalse(error.retriable, error.message)
      yield* newer.commit({ groupId, records: [yield* record(output, "newest")], offsets: offsets("4") })
      assert.deepStrictEqual(yield* payloads(output, 3), ["new", "newest", "old"])
      yield* assertCommitted(groupId, input, { 0: "4" })
    })
}

/**
 * Every case of the suite, in the order it runs them.
 *
 * @since 0.1.0
 * @category suites
 */
export const cases: ReadonlyArray<Case> = [
  commitsRecordsAndOffsets,
  successiveTransactions,
  offsetsAlone,
  missingPartitionAborts,
  missingTopicAborts,
  uncommittableOffsetsAbort,
  refusedRecordAborts,
  newerProducerFences
]

/**
 * Registers the cases the adapter offers under `describe(name)`.
 *
 * @since 0.1.0
 * @category suites
 */
export const suite = <R = never>(name: string, options: Options<R>): void => {
  const prefix = options.topicPrefix ?? "tx-conformance"
  const producer = options.producer
  registerCases(`${name} (TransactionalProducer conformance)`, cases, {
    offered: (c) => c.needs !== "producer" || producer !== undefined,
    run: (c) =>
      withTopics(prefix, options.deleteTopics, (topics) =>
        c.run<R>({ topics, producer: producer ?? (() => Effect.die("no producer")) })
      ).pipe(Effect.scoped, Effect.provide(options.layer())),
    timeout: options.timeout ?? 120_000
  })
}
