/**
 * `TransactionalProducer` cases: a transaction the broker cannot carry out whole aborts and
 * leaves no record visible and no offset committed; a newer producer with the same
 * `transactionalId` fences the older.
 *
 * @internal
 */
import { assert } from "@effect/vitest"
import type { PublishRequest } from "@effect-outbox/core/Publisher"
import type { TransactionRequest } from "@effect-outbox/core/TransactionalProducer"
import * as Effect from "effect/Effect"
import { publishRequest, uniqueName } from "../../conformance.ts"
import type { Topics } from "../topics.ts"
import { abortedBy, assertCommitted, type Case, onlyTheFollowUp, payloads, record } from "./support.ts"

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
      const output = yield* topics.makeTopic(2)
      const input = yield* topics.makeTopic(1)
      const groupId = uniqueName("tx-group")
      const { records, offsets } = doomed(topics, output, input)
      const error = yield* abortedBy({ groupId, records: yield* Effect.all(records), offsets })
      if (notRetriable) assert.isFalse(error.retriable, error.message)
      yield* onlyTheFollowUp(output, input, groupId)
    })
})

const inputAt1 = (input: string) => [{ topic: input, partition: 0, offset: "1" }]

export const missingPartitionAborts = abortCase(
  "a record for a partition the topic lacks aborts the whole transaction, not retriable",
  (_, output, input) => ({
    records: [record(output, "doomed"), record(output, "nowhere", 5)],
    offsets: inputAt1(input)
  })
)

export const missingTopicAborts = abortCase(
  "a record for a topic that does not exist aborts the whole transaction, not retriable",
  (topics, output, input) => ({
    records: [record(output, "doomed"), record(topics.topicName(), "nowhere")],
    offsets: inputAt1(input)
  })
)

export const uncommittableOffsetsAbort = abortCase(
  "offsets the broker cannot commit (a missing topic) abort the transaction: its records never show",
  (topics, output, input) => ({
    records: [record(output, "doomed")],
    offsets: [...inputAt1(input), { topic: topics.topicName(), partition: 0, offset: "1" }]
  }),
  // The port promises the abort; whether Kafka's answer here is retriable is the client's call.
  false
)

export const refusedRecordAborts = abortCase(
  "a record the broker refuses (over max.message.bytes) aborts the whole transaction, not retriable",
  (_, output, input) => ({
    records: [record(output, "doomed"), publishRequest(output, { partition: 0, payload: new Uint8Array(1_100_000) })],
    offsets: inputAt1(input)
  })
)

export const newerProducerFences: Case = {
  name: "a newer producer with the same transactionalId fences the older: its commits abort, not retriable",
  requires: "producer",
  run: ({ topics, producer }) =>
    Effect.gen(function* () {
      const output = yield* topics.makeTopic(1)
      const input = yield* topics.makeTopic(1)
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
