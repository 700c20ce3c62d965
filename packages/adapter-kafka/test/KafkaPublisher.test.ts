// KafkaPublisher over a fake kafkajs, for what a real broker cannot be made to do on demand:
// review M5 (a producer reset must not disconnect the producer under sends still running on it;
// the test settles sends by hand, so "still running" is exact) and C1 (each broker error is
// attributed to the records it concerns; a size error splits the batch). The real-broker side is
// KafkaPublisher.integration.test.ts and the conformance suite.
import { assert, describe, it } from "@effect/vitest"
import type { EventId } from "@effect-outbox/core/OutboxMessage"
import type { PublishRequest } from "@effect-outbox/core/Publisher"
import * as ProducerLeases from "@effect-outbox/kafka/ProducerLeases"
import * as Effect from "effect/Effect"
import * as Fiber from "effect/Fiber"
import * as Result from "effect/Result"
import type Kafkajs from "kafkajs"
import { KafkaClient } from "../src/KafkaClient.ts"
import * as KafkaPublisher from "../src/KafkaPublisher.ts"

interface PendingSend {
  readonly producer: number
  /** The partitions the request holds, in the order they came. */
  readonly partitions: ReadonlyArray<number>
  readonly resolve: (metadata: Array<Kafkajs.RecordMetadata>) => void
  readonly reject: (error: unknown) => void
}

/**
 * A fake kafkajs: producers numbered from 1; disconnecting one fails its unsettled sends. With
 * `auto`, each send is settled at once: `auto` is asked for each partition of the request in turn
 * (metadata, an error, or `[]` for no answer). Like a broker, partitions answered with metadata
 * are written even when another partition of the request fails; like kafkajs, the request then
 * fails with the first error. `leaderOf` places partitions on brokers (default: all on broker 1).
 */
const fakeKafka = (
  topic: string,
  auto?: (partition: number, messages: ReadonlyArray<Kafkajs.Message>) => Array<Kafkajs.RecordMetadata> | Error,
  leaderOf: (partition: number) => number = () => 1
) => {
  const sends: Array<PendingSend> = []
  const disconnected: Array<number> = []
  let producers = 0
  const producer = () => {
    const id = ++producers
    const mine = new Set<PendingSend>()
    return {
      connect: async () => undefined,
      disconnect: async () => {
        disconnected.push(id)
        for (const send of mine)
          send.reject(Object.assign(new Error("The producer is disconnected"), { name: "KafkaJSError" }))
      },
      sendBatch: (batch: Kafkajs.ProducerBatch) =>
        new Promise<Array<Kafkajs.RecordMetadata>>((resolve, reject) => {
          const messages = batch.topicMessages!.flatMap((t) => t.messages)
          const partitions = [...new Set(messages.map((m) => m.partition!))]
          const send: PendingSend = {
            producer: id,
            partitions,
            resolve: (m) => {
              mine.delete(send)
              resolve(m)
            },
            reject: (e) => {
              mine.delete(send)
              reject(e)
            }
          }
          mine.add(send)
          sends.push(send)
          if (auto !== undefined) {
            const answers = partitions.map((partition) =>
              auto(
                partition,
                messages.filter((m) => m.partition === partition)
              )
            )
            const error = answers.find((a) => a instanceof Error)
            if (error !== undefined) send.reject(error)
            else if (answers.every((a) => (a as Array<unknown>).length > 0))
              send.resolve(answers.flat() as Array<Kafkajs.RecordMetadata>)
            // some partition without an answer: leave the send unanswered
          }
        })
    }
  }
  const admin = {
    fetchTopicMetadata: async () => ({
      topics: [
        {
          name: topic,
          partitions: [0, 1, 2].map((partitionId) => ({
            partitionId,
            leader: leaderOf(partitionId),
            replicas: [leaderOf(partitionId)],
            isr: [leaderOf(partitionId)]
          }))
        }
      ]
    }),
    describeConfigs: async () => ({
      resources: [{ configEntries: [{ configName: "max.message.bytes", configValue: "1048588" }] }]
    }),
    listTopics: async () => [topic]
  }
  const client = KafkaClient.of({
    kafka: { producer } as unknown as Kafkajs.Kafka,
    admin: admin as unknown as Kafkajs.Admin,
    clientId: "fake",
    brokers: ["fake:9092"]
  })
  return { sends, disconnected, producers: () => producers, client }
}

const request = (topic: string, partition: number, n: number): PublishRequest => {
  const id = `0193a0b4-5c6d-7e8f-9a0b-${String(n).padStart(12, "0")}` as EventId
  return { id, topic, key: null, partition, headers: { "event-id": id }, payload: new Uint8Array(8) }
}

const waitFor = (condition: () => boolean) =>
  Effect.gen(function* () {
    for (let i = 0; i < 500 && !condition(); i++) yield* Effect.sleep("2 millis")
    assert.isTrue(condition(), "condition not reached")
  })

describe("KafkaPublisher producer reset (M5)", () => {
  it.live("a reset retires the producer; it is disconnected only when its last send has settled", () => {
    const fake = fakeKafka("orders")
    return Effect.gen(function* () {
      const publisher = yield* KafkaPublisher.make()
      // A: a send in flight on producer 1.
      const a = yield* Effect.forkChild(publisher.publish([request("orders", 0, 1)]))
      yield* waitFor(() => fake.sends.length === 1)
      // B: another send on producer 1 loses its connection, which requests a reset.
      const b = yield* Effect.forkChild(publisher.publish([request("orders", 1, 2)]))
      yield* waitFor(() => fake.sends.length === 2)
      fake.sends[1]!.reject(
        Object.assign(new Error("Connection error: ECONNRESET"), { name: "KafkaJSConnectionError" })
      )
      const [bOutcome] = yield* Fiber.join(b)
      assert.isTrue(Result.isFailure(bOutcome!) && bOutcome.failure._tag === "BrokerUnavailableError")
      // C: the next send gets a fresh producer, and producer 1 stays connected for A.
      const c = yield* Effect.forkChild(publisher.publish([request("orders", 1, 3)]))
      yield* waitFor(() => fake.sends.length === 3)
      assert.strictEqual(fake.sends[2]!.producer, 2)
      yield* Effect.sleep("20 millis") // time for a disconnect of producer 1, were one started
      assert.deepStrictEqual(fake.disconnected, [], "producer 1 still has a send running")
      fake.sends[2]!.resolve([{ topicName: "orders", partition: 1, errorCode: 0, baseOffset: "7" }])
      assert.deepStrictEqual((yield* Fiber.join(c)).map(Result.isSuccess), [true])
      // A lands on producer 1; only then is producer 1 disconnected.
      fake.sends[0]!.resolve([{ topicName: "orders", partition: 0, errorCode: 0, baseOffset: "41" }])
      const [aOutcome] = yield* Fiber.join(a)
      assert.isTrue(Result.isSuccess(aOutcome!))
      if (Result.isSuccess(aOutcome!))
        assert.deepStrictEqual(aOutcome.success, { topic: "orders", partition: 0, offset: "41" })
      yield* waitFor(() => fake.disconnected.length === 1)
      assert.deepStrictEqual(fake.disconnected, [1])
      assert.strictEqual(fake.producers(), 2)
    }).pipe(Effect.scoped, Effect.provideService(KafkaClient, fake.client))
  })

  it.effect("leases: retired producers in use stay live; closing disconnects every producer", () =>
    Effect.gen(function* () {
      const disconnected: Array<number> = []
      let created = 0
      const leases = yield* ProducerLeases.make<number>({
        create: () => ++created,
        connect: async () => undefined,
        disconnect: async (p) => void disconnected.push(p)
      })
      const first = yield* leases.acquire
      const second = yield* leases.acquire
      assert.strictEqual(first.producer, second.producer)
      leases.requestReset()
      const third = yield* leases.acquire
      assert.strictEqual(third.producer, 2)
      assert.strictEqual(leases.live(), 2)
      first.release()
      first.release() // a second release of one lease is ignored
      assert.deepStrictEqual(disconnected, [])
      second.release()
      assert.deepStrictEqual(disconnected, [1])
      assert.strictEqual(leases.live(), 1)
      // An idle current producer is not disconnected by a release, only by a reset or closing.
      third.release()
      assert.deepStrictEqual(disconnected, [1])
      yield* leases.closeAll
      assert.deepStrictEqual(disconnected, [1, 2])
    })
  )
  it.effect("leases: a tainted partition replaces the producer only when a send needs it", () =>
    Effect.gen(function* () {
      let created = 0
      const leases = yield* ProducerLeases.make<number>({
        create: () => ++created,
        connect: async () => undefined,
        disconnect: async () => undefined
      })
      const first = yield* leases.acquireFor(["t\u00002"])
      first.taint(["t\u00002"])
      first.release()
      const other = yield* leases.acquireFor(["t\u00000", "t\u00001"])
      assert.strictEqual(other.producer, 1, "the other partitions keep the producer")
      other.release()
      const again = yield* leases.acquireFor(["t\u00002"])
      assert.strictEqual(again.producer, 2, "the tainted partition gets a fresh producer")
      again.release()
      assert.strictEqual((yield* leases.acquireFor(["t\u00002"])).producer, 2)
      yield* leases.closeAll
    })
  )
})

describe("KafkaPublisher attributes each broker error to its own records (C1)", () => {
  const protocolError = (type: string) =>
    Object.assign(new Error(`broker says ${type}`), { name: "KafkaJSProtocolError", type, retriable: true })

  // Partitions on different brokers go in separate requests; one broker's partitions in one
  // request are the next describe block's.
  const ownBroker = (partition: number) => partition + 1

  it.live("one partition without a leader fails its records only; the other partition's receipts are kept", () => {
    const offsets = new Map<number, number>()
    const fake = fakeKafka(
      "orders",
      (partition, messages) => {
        if (partition === 0) return protocolError("NOT_LEADER_FOR_PARTITION")
        const base = offsets.get(partition) ?? 0
        offsets.set(partition, base + messages.length)
        return [{ topicName: "orders", partition, errorCode: 0, baseOffset: String(base) }]
      },
      ownBroker
    )
    return Effect.gen(function* () {
      const publisher = yield* KafkaPublisher.make()
      const outcomes = yield* publisher.publish([1, 0, 1, 0, 1].map((p, i) => request("orders", p, i)))
      assert.deepStrictEqual(
        outcomes.map((o) => (Result.isSuccess(o) ? o.success.offset : o.failure._tag)),
        ["0", "BrokerUnavailableError", "1", "BrokerUnavailableError", "2"]
      )
    }).pipe(Effect.scoped, Effect.provideService(KafkaClient, fake.client))
  })

  it.live("a partition that does not answer in time is unavailable; the other partition's receipt is kept", () => {
    const fake = fakeKafka(
      "orders",
      (partition, messages) =>
        partition === 0
          ? [] // never settles (see below)
          : [{ topicName: "orders", partition, errorCode: 0, baseOffset: String(messages.length - 1) }],
      ownBroker
    )
    return Effect.gen(function* () {
      const publisher = yield* KafkaPublisher.make({ publishTimeoutMillis: 300 })
      const outcomes = yield* publisher.publish([request("orders", 0, 1), request("orders", 1, 2)])
      assert.deepStrictEqual(
        outcomes.map((o) => (Result.isSuccess(o) ? o.success.offset : o.failure._tag)),
        ["BrokerUnavailableError", "0"]
      )
      if (Result.isFailure(outcomes[0]!)) assert.match(outcomes[0].failure.message, /may have reached the broker/)
      // The timed-out partition is tainted on its producer: the other partition keeps it, the
      // next send to the timed-out one gets a fresh producer, and the old one is not
      // disconnected under its unanswered send.
      yield* publisher.publish([request("orders", 1, 3)])
      assert.strictEqual(fake.sends.at(-1)!.producer, 1)
      yield* publisher.publish([request("orders", 0, 4)])
      assert.strictEqual(fake.sends.at(-1)!.producer, 2)
      assert.deepStrictEqual(fake.disconnected, [])
    }).pipe(Effect.scoped, Effect.provideService(KafkaClient, fake.client))
  })

  it.live("a size error on a batch of several records splits it; a record refused alone is permanent", () => {
    let next = 0
    const sizes: Array<number> = []
    const fake = fakeKafka("orders", (partition, messages) => {
      sizes.push(messages.length)
      // This broker takes at most 2 records per batch (a limit below the one it described), and
      // never the record with the 9-byte payload.
      if (messages.length > 2 || messages.some((m) => (m.value as Buffer).length === 9)) {
        return protocolError("MESSAGE_TOO_LARGE")
      }
      const base = next
      next += messages.length
      return [{ topicName: "orders", partition, errorCode: 0, baseOffset: String(base) }]
    })
    return Effect.gen(function* () {
      const publisher = yield* KafkaPublisher.make()
      const requests = [0, 1, 2, 3, 4, 5].map((i) => request("orders", 0, i))
      requests[4] = { ...requests[4]!, payload: new Uint8Array(9) }
      const outcomes = yield* publisher.publish(requests)
      assert.deepStrictEqual(
        outcomes.map((o) => (Result.isSuccess(o) ? o.success.offset : o.failure._tag)),
        ["0", "1", "2", "3", "PermanentPublishError", "4"]
      )
      // 6 refused -> 3 + 3; 3 refused -> 2 + 1; 3 refused -> 2 (refused: 1 + 1) + 1.
      assert.deepStrictEqual(sizes, [6, 3, 2, 1, 3, 2, 1, 1, 1])
      const refused = outcomes[4]!
      if (Result.isFailure(refused)) assert.match(refused.failure.message, /MESSAGE_TOO_LARGE.*over the limit/)
    }).pipe(Effect.scoped, Effect.provideService(KafkaClient, fake.client))
  })
})

describe("KafkaPublisher sends one broker's partitions in one request", () => {
  const notLeader = Object.assign(new Error("broker says NOT_LEADER_FOR_PARTITION"), {
    name: "KafkaJSProtocolError",
    type: "NOT_LEADER_FOR_PARTITION",
    retriable: true
  })
  /** A broker's partition logs: `auto` appends each partition's records and answers its base offset. */
  const logs = () => {
    const written = new Map<number, Array<string>>()
    const append = (partition: number, messages: ReadonlyArray<Kafkajs.Message>): Array<Kafkajs.RecordMetadata> => {
      const log = written.get(partition) ?? []
      written.set(partition, log)
      const base = log.length
      log.push(...messages.map((m) => String(m.headers!["event-id"])))
      return [{ topicName: "orders", partition, errorCode: 0, baseOffset: String(base) }]
    }
    return { written, append }
  }
  const summary = (outcomes: ReadonlyArray<Result.Result<{ readonly offset: string }, { readonly _tag: string }>>) =>
    outcomes.map((o) => (Result.isSuccess(o) ? o.success.offset : o.failure._tag))

  it.live("partitions led by one broker go out in one request; each partition's receipts come from its answer", () => {
    const broker = logs()
    const fake = fakeKafka("orders", broker.append)
    return Effect.gen(function* () {
      const publisher = yield* KafkaPublisher.make()
      const outcomes = yield* publisher.publish([0, 1, 2, 0, 1].map((p, i) => request("orders", p, i)))
      assert.deepStrictEqual(summary(outcomes), ["0", "0", "0", "1", "1"])
      assert.deepStrictEqual(
        fake.sends.map((s) => s.partitions),
        [[0, 1, 2]]
      )
      // Each partition holds its records in request order.
      assert.deepStrictEqual(broker.written.get(0), [request("orders", 0, 0).id, request("orders", 0, 3).id])
    }).pipe(Effect.scoped, Effect.provideService(KafkaClient, fake.client))
  })

  it.live("partitions on two brokers: one request per broker; combinePartitions false: one per partition", () => {
    const broker = logs()
    const fake = fakeKafka("orders", broker.append, (p) => (p === 2 ? 2 : 1))
    return Effect.gen(function* () {
      const combined = yield* KafkaPublisher.make()
      yield* combined.publish([0, 1, 2].map((p, i) => request("orders", p, i)))
      assert.deepStrictEqual(
        fake.sends.map((s) => s.partitions).sort((a, b) => a.length - b.length),
        [[2], [0, 1]]
      )
      const separate = yield* KafkaPublisher.make({ combinePartitions: false })
      const outcomes = yield* separate.publish([0, 1, 2].map((p, i) => request("orders", p, 10 + i)))
      assert.deepStrictEqual(summary(outcomes), ["1", "1", "1"])
      assert.deepStrictEqual(
        fake.sends
          .slice(2)
          .map((s) => s.partitions)
          .sort(),
        [[0], [1], [2]]
      )
    }).pipe(Effect.scoped, Effect.provideService(KafkaClient, fake.client))
  })

  it.live(
    "a failed combined request: a fresh producer sends it again per partition, each verdict on its own records; a partition that had landed is written twice, never lost",
    () => {
      const broker = logs()
      const fake = fakeKafka("orders", (partition, messages) =>
        partition === 0 ? notLeader : broker.append(partition, messages)
      )
      return Effect.gen(function* () {
        const publisher = yield* KafkaPublisher.make()
        const requests = [1, 0, 1, 0, 1].map((p, i) => request("orders", p, i))
        const outcomes = yield* publisher.publish(requests)
        // Partition 1 landed in the combined request (offsets 0–2), which failed as a whole for
        // partition 0; sent again on its own, it lands at 3–5.
        assert.deepStrictEqual(summary(outcomes), ["3", "BrokerUnavailableError", "4", "BrokerUnavailableError", "5"])
        const ones = [0, 2, 4].map((i) => requests[i]!.id)
        assert.deepStrictEqual(broker.written.get(1), [...ones, ...ones])
        // kafkajs rolled back every partition's sequence on the failed request: the producer that
        // sent it is never used again.
        assert.deepStrictEqual(
          fake.sends.map((s) => [s.producer, s.partitions]),
          [
            [1, [1, 0]],
            [2, [1]],
            [2, [0]]
          ]
        )
      }).pipe(Effect.scoped, Effect.provideService(KafkaClient, fake.client))
    }
  )

  it.live(
    "a combined request unanswered by the deadline: every record is unavailable and nothing is sent again",
    () => {
      const broker = logs()
      const fake = fakeKafka("orders", (partition, messages) =>
        partition === 0 ? [] : broker.append(partition, messages)
      )
      return Effect.gen(function* () {
        const publisher = yield* KafkaPublisher.make({ publishTimeoutMillis: 300 })
        const outcomes = yield* publisher.publish([request("orders", 0, 1), request("orders", 1, 2)])
        assert.deepStrictEqual(summary(outcomes), ["BrokerUnavailableError", "BrokerUnavailableError"])
        assert.strictEqual(fake.sends.length, 1)
        yield* publisher.publish([request("orders", 1, 3)])
        assert.strictEqual(fake.sends.at(-1)!.producer, 2)
      }).pipe(Effect.scoped, Effect.provideService(KafkaClient, fake.client))
    }
  )

  it.live("a partition whose records need more than one record batch: the call goes per partition", () => {
    const broker = logs()
    const fake = fakeKafka("orders", broker.append)
    return Effect.gen(function* () {
      const publisher = yield* KafkaPublisher.make()
      // Two records of 600 KB on partition 0: over the 1,048,588-byte limit together.
      const big = (n: number) => ({ ...request("orders", 0, n), payload: new Uint8Array(600_000) })
      const outcomes = yield* publisher.publish([big(1), big(2), request("orders", 1, 3)])
      assert.deepStrictEqual(summary(outcomes), ["0", "1", "0"])
      assert.deepStrictEqual(fake.sends.map((s) => s.partitions).sort(), [[0], [0], [1]])
    }).pipe(Effect.scoped, Effect.provideService(KafkaClient, fake.client))
  })
})
