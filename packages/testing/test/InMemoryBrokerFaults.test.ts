// The production faults the in-memory broker models: outages (refuse, time out,
// freeze then append late), partitions a group learns about only at its metadata refresh, a
// group coordinator that is not ready on a fresh broker, and rebalances with batches in flight.
import { assert, describe, it } from "@effect/vitest"
import { BrokerAdmin } from "@effect-outbox/core/BrokerAdmin"
import { BrokerProbe } from "@effect-outbox/core/BrokerProbe"
import { type ConsumerBatch, ConsumerSource } from "@effect-outbox/core/ConsumerSource"
import type { EventId } from "@effect-outbox/core/OutboxMessage"
import { Publisher, type PublishRequest } from "@effect-outbox/core/Publisher"
import { Effect, Exit, Fiber, Option, Result, Stream } from "effect"
import * as TestClock from "effect/testing/TestClock"
import * as InMemoryBroker from "../src/InMemoryBroker.ts"

const request = (n: number, partition: number | null, key: string | null = null): PublishRequest => ({
  id: `00000000-0000-7000-8000-${n.toString(16).padStart(12, "0")}` as EventId,
  topic: "t",
  key,
  partition,
  headers: { "event-id": `00000000-0000-7000-8000-${n.toString(16).padStart(12, "0")}` },
  payload: new Uint8Array([n])
})

const failureTag = (outcome: Result.Result<unknown, { readonly _tag: string }>) =>
  Result.isFailure(outcome) ? outcome.failure._tag : "Success"

/** Lets forked fibers run without moving the TestClock. */
const settle = Effect.andThen(TestClock.adjust(0), Effect.yieldNow)

describe("InMemoryBroker production faults", () => {
  it.effect("a refusing broker fails every port with its outage error and appends nothing", () =>
    Effect.gen(function* () {
      const broker = yield* InMemoryBroker.InMemoryBroker
      yield* broker.outage({ mode: "refuse" })
      const outcomes = yield* (yield* Publisher).publish([request(1, 0), request(2, 1)])
      assert.deepStrictEqual(outcomes.map(failureTag), ["BrokerUnavailableError", "BrokerUnavailableError"])
      const probe = yield* Effect.exit(
        (yield* BrokerProbe).find({ topic: "t", partition: 0, eventId: request(1, 0).id, since: 0 })
      )
      assert.isTrue(Exit.isFailure(probe) && String(probe.cause).includes("ProbeError"))
      const admin = yield* Effect.exit((yield* BrokerAdmin).partitionCount("t"))
      assert.isTrue(Exit.isFailure(admin) && String(admin.cause).includes("BrokerAdminError"))
      const subscribe = yield* Effect.exit(
        Effect.scoped((yield* ConsumerSource).subscribe({ groupId: "g", topics: ["t"], fromBeginning: true }))
      )
      assert.isTrue(Exit.isFailure(subscribe) && String(subscribe.cause).includes("ConsumerSourceError"))
      assert.deepStrictEqual(yield* broker.records("t"), [])
      yield* broker.endOutage
      const after = yield* (yield* Publisher).publish([request(3, 0)])
      assert.deepStrictEqual(after.map(failureTag), ["Success"])
    }).pipe(Effect.provide(InMemoryBroker.layer({ topics: { t: 2 } })))
  )

  it.effect("a broker that times out answers only after its timeout, with BrokerUnavailableError", () =>
    Effect.gen(function* () {
      const broker = yield* InMemoryBroker.InMemoryBroker
      yield* broker.outage({ mode: "timeout", timeout: "5 seconds" })
      const fiber = yield* Effect.forkChild((yield* Publisher).publish([request(1, 0)]))
      yield* TestClock.adjust("4 seconds")
      assert.isUndefined(fiber.pollUnsafe())
      yield* TestClock.adjust("1 second")
      const outcomes = yield* Fiber.join(fiber)
      assert.deepStrictEqual(outcomes.map(failureTag), ["BrokerUnavailableError"])
      assert.deepStrictEqual(yield* broker.records("t"), [])
    }).pipe(Effect.provide(InMemoryBroker.layer({ topics: { t: 1 } })))
  )

  it.effect("a frozen broker appends late a publish whose caller gave up", () =>
    Effect.gen(function* () {
      const broker = yield* InMemoryBroker.InMemoryBroker
      yield* broker.outage({ mode: "freeze" })
      const gaveUp = yield* Effect.forkChild(
        (yield* Publisher).publish([request(1, 0)]).pipe(Effect.timeoutOption("10 seconds"))
      )
      yield* TestClock.adjust("10 seconds")
      assert.isTrue(Option.isNone(yield* Fiber.join(gaveUp)))
      assert.strictEqual((yield* broker.records("t")).length, 0)
      yield* broker.endOutage
      yield* settle
      const log = yield* broker.records("t")
      assert.deepStrictEqual(
        log.map((r) => r.headers["event-id"]),
        [request(1, 0).id]
      )
    }).pipe(Effect.provide(InMemoryBroker.layer({ topics: { t: 1 } })))
  )

  const receive = (groupId: string, fromBeginning: boolean, until: number) =>
    Effect.gen(function* () {
      const source = yield* ConsumerSource
      const subscription = yield* source.subscribe({ groupId, topics: ["t"], fromBeginning })
      const got: Array<string> = []
      const fiber = yield* Effect.forkScoped(
        Stream.runForEach(subscription.batches, (batch: ConsumerBatch) =>
          Effect.sync(() => {
            for (const r of batch.records) got.push(`${r.partition}:${r.headers["event-id"]!.slice(-2)}`)
          })
        )
      )
      return { got, fiber, subscription, until }
    })

  const growAndPublish = Effect.gen(function* () {
    yield* (yield* BrokerAdmin).growPartitions("t", 2)
    const outcomes = yield* (yield* Publisher).publish([request(1, 1), request(2, 1)])
    assert.deepStrictEqual(outcomes.map(failureTag), ["Success", "Success"])
  })

  it.effect("a group learns of a new partition only at its metadata refresh; latest then skips what was written", () =>
    Effect.scoped(
      Effect.gen(function* () {
        const latest = yield* receive("latest", false, 0)
        const earliest = yield* receive("earliest", true, 0)
        yield* settle
        yield* growAndPublish
        yield* TestClock.adjust("59 seconds")
        assert.deepStrictEqual([latest.got, earliest.got], [[], []], "nobody owns the new partition yet")
        yield* TestClock.adjust("1 second")
        yield* settle
        assert.deepStrictEqual(latest.got, [], "latest: the records written before the refresh are skipped")
        assert.deepStrictEqual(earliest.got, ["1:01", "1:02"])
        yield* (yield* Publisher).publish([request(3, 1)])
        yield* settle
        assert.deepStrictEqual(latest.got, ["1:03"])
      })
    ).pipe(Effect.provide(InMemoryBroker.layer({ topics: { t: 1 }, metadataMaxAge: "60 seconds" })))
  )

  it.effect("without a refresh delay a group sees a new partition at once", () =>
    Effect.scoped(
      Effect.gen(function* () {
        const earliest = yield* receive("earliest", true, 0)
        yield* settle
        yield* growAndPublish
        yield* settle
        assert.deepStrictEqual(earliest.got, ["1:01", "1:02"])
      })
    ).pipe(Effect.provide(InMemoryBroker.layer({ topics: { t: 1 } })))
  )

  it.effect("a fresh broker's coordinator delivers nothing and refuses commits while it loads", () =>
    Effect.scoped(
      Effect.gen(function* () {
        yield* (yield* Publisher).publish([request(1, 0)])
        const consumer = yield* receive("g", true, 0)
        yield* settle
        assert.deepStrictEqual(consumer.got, [])
        const early = yield* Effect.exit(consumer.subscription.commit([{ topic: "t", partition: 0, offset: "1" }]))
        assert.isTrue(Exit.isFailure(early) && String(early.cause).includes("COORDINATOR_LOAD_IN_PROGRESS"))
        yield* TestClock.adjust("3 seconds")
        yield* settle
        assert.deepStrictEqual(consumer.got, ["0:01"])
        yield* consumer.subscription.commit([{ topic: "t", partition: 0, offset: "1" }])
        assert.deepStrictEqual(yield* (yield* InMemoryBroker.InMemoryBroker).committed("g"), [
          { topic: "t", partition: 0, offset: "1" }
        ])
      })
    ).pipe(Effect.provide(InMemoryBroker.layer({ topics: { t: 1 }, coordinatorLoad: "3 seconds" })))
  )

  it.effect("a rebalance revokes partitions in flight: records come again, a stale commit is dropped", () =>
    Effect.scoped(
      Effect.gen(function* () {
        const broker = yield* InMemoryBroker.InMemoryBroker
        yield* (yield* Publisher).publish([request(1, 0), request(2, 1)])
        const first = yield* receive("g", true, 0)
        yield* settle
        assert.deepStrictEqual([...first.got].sort(), ["0:01", "1:02"])
        // A second member joins: partition 1 moves to it (nothing committed: read from the start).
        const second = yield* receive("g", true, 0)
        yield* settle
        assert.deepStrictEqual(second.got, ["1:02"])
        yield* broker.rebalance("g")
        yield* settle
        // The rotation swapped the partitions: each is read again from the committed offset.
        assert.deepStrictEqual(second.got, ["1:02", "0:01"])
        assert.deepStrictEqual([...first.got].sort(), ["0:01", "1:02", "1:02"])
        // The first member's commit of partition 0 (no longer its own) is dropped.
        yield* first.subscription.commit([{ topic: "t", partition: 0, offset: "1" }])
        assert.deepStrictEqual(yield* broker.committed("g"), [])
      })
    ).pipe(Effect.provide(InMemoryBroker.layer({ topics: { t: 2 } })))
  )

  describe("record-batch size limit (max.message.bytes, review C1)", () => {
    const LIMIT = 2_000
    /** Records of 800 bytes for key `hot` on partition 0 (two fit in a batch, three do not). */
    const hot = (n: number): PublishRequest => ({ ...request(n, 0, "hot"), payload: new Uint8Array(800).fill(n) })
    const call = [hot(1), request(2, 1, "cold"), hot(3), hot(4), request(5, 1, "cold"), hot(6)]
    const offsets = (outcomes: ReadonlyArray<Result.Result<{ readonly offset: string }, unknown>>) =>
      outcomes.map((o) => (Result.isSuccess(o) ? o.success.offset : "failed"))

    it.effect("by default a partition's records over the limit go in several batches and all land in order", () =>
      Effect.gen(function* () {
        const broker = yield* InMemoryBroker.InMemoryBroker
        const outcomes = yield* (yield* Publisher).publish(call)
        assert.deepStrictEqual(offsets(outcomes), ["0", "0", "1", "2", "1", "3"])
        assert.deepStrictEqual(
          (yield* broker.log("t", 0)).map((r) => r.value[0]),
          [1, 3, 4, 6]
        )
      }).pipe(Effect.provide(InMemoryBroker.layer({ topics: { t: 2 }, maxMessageBytes: LIMIT })))
    )

    it.effect("by default a lone record too large fails permanently; its key's younger records wait, others land", () =>
      Effect.gen(function* () {
        const huge: PublishRequest = { ...request(7, 0, "hot"), payload: new Uint8Array(LIMIT) }
        const outcomes = yield* (yield* Publisher).publish([hot(1), huge, hot(3), request(2, 0, "cold")])
        assert.deepStrictEqual(outcomes.map(failureTag), [
          "Success",
          "PermanentPublishError",
          "RetriablePublishError",
          "Success"
        ])
        const error = outcomes[1]!
        assert.isTrue(Result.isFailure(error) && error.failure.message.includes("over the limit of 2000"))
      }).pipe(Effect.provide(InMemoryBroker.layer({ topics: { t: 2 }, maxMessageBytes: LIMIT })))
    )

    it.effect(
      "wrong whole-call-batch: one oversized partition batch fails every record of the call, landed ones included",
      () =>
        Effect.gen(function* () {
          const broker = yield* InMemoryBroker.InMemoryBroker
          const outcomes = yield* (yield* Publisher).publish(call)
          assert.deepStrictEqual(
            outcomes.map(failureTag),
            call.map(() => "PermanentPublishError")
          )
          const error = outcomes[0]!
          assert.isTrue(Result.isFailure(error) && error.failure.message.includes("MESSAGE_TOO_LARGE"))
          // Partition 1's batch landed although its records were told they failed; partition 0's did not.
          assert.deepStrictEqual(
            (yield* broker.log("t", 1)).map((r) => r.value[0]),
            [2, 5]
          )
          assert.deepStrictEqual(yield* broker.log("t", 0), [])
          // Batches within the limit go through as before.
          const small = yield* (yield* Publisher).publish([hot(8), hot(9), request(10, 1)])
          assert.deepStrictEqual(offsets(small), ["0", "1", "2"])
        }).pipe(
          Effect.provide(InMemoryBroker.layer({ topics: { t: 2 }, maxMessageBytes: LIMIT, wrong: "whole-call-batch" }))
        )
    )
  })
})
