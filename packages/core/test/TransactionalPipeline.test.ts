import { assert, describe, it } from "@effect/vitest"
import * as InMemoryBroker from "@effect-outbox/testing/InMemoryBroker"
import * as InMemoryTransactionalProducer from "@effect-outbox/testing/InMemoryTransactionalProducer"
import * as Context from "effect/Context"
import * as Effect from "effect/Effect"
import * as Fiber from "effect/Fiber"
import * as Layer from "effect/Layer"
import * as Ref from "effect/Ref"
import * as TestClock from "effect/testing/TestClock"
import type { EventId } from "../src/OutboxMessage.ts"
import { jsonPayload } from "../src/OutboxMessage.ts"
import { Publisher } from "../src/Publisher.ts"
import * as TransactionalPipeline from "../src/TransactionalPipeline.ts"
import { TransactionalProducer } from "../src/TransactionalProducer.ts"

const id = (n: number) => `0190a0a0-0000-7000-8000-${n.toString(16).padStart(12, "0")}` as EventId

const TestLayer = InMemoryTransactionalProducer.layer("eos-test").pipe(
  Layer.provideMerge(InMemoryBroker.layer({ topics: { in: 2, out: 1 }, maxBatchSize: 3 }))
)

const sendInputs = (count: number) =>
  Effect.gen(function* () {
    const publisher = yield* Publisher
    for (let n = 1; n <= count; n++) {
      yield* publisher.publish([
        {
          id: id(n),
          topic: "in",
          key: `k${n % 3}`,
          partition: n % 2,
          headers: { "event-id": id(n) },
          payload: jsonPayload({ n })
        }
      ])
    }
  })

/** One output per input, carrying where it came from. */
const options = (transformed: Ref.Ref<number>) => ({
  groupId: "eos",
  topics: ["in"],
  fromBeginning: true,
  transform: (record: {
    readonly topic: string
    readonly partition: number
    readonly offset: string
    readonly value: Uint8Array
  }) =>
    Ref.update(transformed, (n) => n + 1).pipe(
      Effect.andThen(Effect.sleep("10 millis")),
      Effect.as([
        {
          topic: "out",
          key: null,
          partition: 0,
          headers: { source: `${record.partition}/${record.offset}` },
          payload: record.value
        }
      ])
    )
})

const outputs = Effect.flatMap(InMemoryBroker.InMemoryBroker, (broker) => broker.records("out"))
const sources = Effect.map(outputs, (records) => records.map((r) => r.headers.source!).sort())

const settle = <R>(check: Effect.Effect<boolean, never, R>) =>
  Effect.gen(function* () {
    for (let i = 0; i < 1000; i++) {
      if (yield* check) return
      yield* TestClock.adjust("5 millis")
    }
    assert.fail("did not settle")
  })

describe("TransactionalPipeline (R7)", () => {
  it.effect(
    "outputs and input offsets commit together: every input's output appears exactly once across crashes and aborts",
    () =>
      Effect.gen(function* () {
        const broker = yield* InMemoryBroker.InMemoryBroker
        const transactions = yield* InMemoryTransactionalProducer.InMemoryTransactions
        const transformed = yield* Ref.make(0)
        yield* sendInputs(20)
        yield* transactions.failNext(2) // two retriable aborts along the way

        // crash the pipeline three times in the middle of batches
        for (let crash = 0; crash < 3; crash++) {
          const fiber = yield* Effect.forkChild(TransactionalPipeline.run(options(transformed)))
          yield* TestClock.adjust("25 millis")
          yield* Fiber.interrupt(fiber)
        }
        const fiber = yield* Effect.forkChild(TransactionalPipeline.run(options(transformed)))
        yield* settle(Effect.map(outputs, (r) => r.length >= 20))
        for (let i = 0; i < 50; i++) yield* TestClock.adjust("10 millis")
        yield* Fiber.interrupt(fiber)

        // even inputs went to partition 0, odd ones to partition 1: ten offsets each
        const expected = [0, 1].flatMap((p) => Array.from({ length: 10 }, (_, o) => `${p}/${o}`)).sort()
        assert.deepStrictEqual(yield* sources, expected)
        // crashes and aborts made the transform run more often than there are inputs: the
        // duplicates were never visible
        assert.isAbove(yield* Ref.get(transformed), 20)
        assert.strictEqual(yield* transactions.aborted, 2)
        const committed = yield* broker.committed("eos")
        assert.deepStrictEqual(
          committed
            .filter((c) => c.topic === "in")
            .map((c) => `${c.partition}:${c.offset}`)
            .sort(),
          ["0:10", "1:10"]
        )
      }).pipe(Effect.provide(TestLayer))
  )

  it.effect("a non-retriable abort stops the pipeline and leaves neither outputs nor offsets of that batch", () =>
    Effect.gen(function* () {
      const broker = yield* InMemoryBroker.InMemoryBroker
      const transactions = yield* InMemoryTransactionalProducer.InMemoryTransactions
      const transformed = yield* Ref.make(0)
      yield* sendInputs(2)
      yield* transactions.failNext(1, { retriable: false })
      const fiber = yield* Effect.forkChild(TransactionalPipeline.run(options(transformed)))
      yield* TestClock.adjust("1 second")
      const exit = yield* Fiber.await(fiber)
      assert.strictEqual(exit._tag, "Failure")
      if (exit._tag === "Failure") {
        const failure = exit.cause.reasons.find((r) => r._tag === "Fail") as { error: { _tag: string } } | undefined
        assert.strictEqual(failure?.error._tag, "TransactionAbortedError")
      }
      assert.deepStrictEqual(yield* outputs, [])
      assert.deepStrictEqual(yield* broker.committed("eos"), [])
    }).pipe(Effect.provide(TestLayer))
  )

  it.effect("a rebalance in the middle of transactional batches: the old owner never commits a revoked partition", () =>
    Effect.gen(function* () {
      const broker = yield* InMemoryBroker.InMemoryBroker
      const transformed = yield* Ref.make(0)
      yield* sendInputs(20)
      // Member A alone owns both partitions; member B (its own transactional id) joins while A
      // is in the middle of a batch and takes partition 1.
      const a = yield* Effect.forkChild(TransactionalPipeline.run(options(transformed)))
      yield* TestClock.adjust("45 millis")
      const other = Context.get(
        yield* Layer.build(InMemoryTransactionalProducer.layer("eos-test-b")),
        TransactionalProducer
      )
      const b = yield* Effect.forkChild(
        TransactionalPipeline.run(options(transformed)).pipe(Effect.provideService(TransactionalProducer, other))
      )
      yield* settle(Effect.map(outputs, (r) => r.length >= 20))
      for (let i = 0; i < 50; i++) yield* TestClock.adjust("10 millis")
      yield* Fiber.interrupt(a)
      yield* Fiber.interrupt(b)

      const expected = [0, 1].flatMap((p) => Array.from({ length: 10 }, (_, o) => `${p}/${o}`)).sort()
      assert.deepStrictEqual(yield* sources, expected)
      const committed = yield* broker.committed("eos")
      assert.deepStrictEqual(committed.map((c) => `${c.partition}:${c.offset}`).sort(), ["0:10", "1:10"])
    }).pipe(Effect.provide(TestLayer))
  )

  it.effect("a producer that cannot send the group's metadata: run refuses with TransactionalFencingError", () =>
    Effect.gen(function* () {
      const unfenced = TransactionalProducer.of({
        transactionalId: "unfenced",
        fencing: { _tag: "Unsupported", reason: "the client sends offsets without the group generation" },
        commit: () => Effect.die("never called")
      })
      const error = yield* TransactionalPipeline.run(options(yield* Ref.make(0))).pipe(
        Effect.provideService(TransactionalProducer, unfenced),
        Effect.flip
      )
      assert.strictEqual(error._tag, "TransactionalFencingError")
      assert.include(error.message, "the client sends offsets without the group generation")
      assert.deepStrictEqual(yield* outputs, [])
    }).pipe(Effect.provide(TestLayer))
  )
})
