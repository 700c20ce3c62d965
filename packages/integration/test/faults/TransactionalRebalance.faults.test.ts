// A rebalance in the middle of transactional batches: the exactly-once pipeline on
// @platformatic/kafka runs member A alone over a 4-partition input topic, with a slow transform,
// when member B (its own transactional id) joins the group, and later leaves it again. Every
// input's output must appear exactly once on the output topic read with read_committed: a member
// that lost a partition never commits its batch beside the new owner (the offsets carry the group
// generation and member id; revoked batches are dropped), and a new owner starts after the old
// owner's last transaction.

import { afterAll, assert, describe, it } from "@effect/vitest"
import * as PlatformaticOutbox from "@effect-outbox/adapter-kafka-platformatic/PlatformaticOutbox"
import * as PlatformaticTransactionalProducer from "@effect-outbox/adapter-kafka-platformatic/PlatformaticTransactionalProducer"
import { BrokerAdmin } from "@effect-outbox/core/BrokerAdmin"
import { ConsumerSource } from "@effect-outbox/core/ConsumerSource"
import { makeEventId } from "@effect-outbox/core/OutboxMessage"
import { Publisher } from "@effect-outbox/core/Publisher"
import * as TransactionalPipeline from "@effect-outbox/core/TransactionalPipeline"
import { TransactionalProducer } from "@effect-outbox/core/TransactionalProducer"
import * as Context from "effect/Context"
import * as Effect from "effect/Effect"
import * as Fiber from "effect/Fiber"
import * as Layer from "effect/Layer"
import * as ManagedRuntime from "effect/ManagedRuntime"
import * as Stream from "effect/Stream"
import * as Support from "./support.ts"

afterAll(() => {
  console.log(`\nfault tests\n${Support.table()}\n`)
})

const inputs = 1_500
const partitions = 4

/**
 * Every value of `topic` as a read_committed group sees it: read until `inputs` arrived, then
 * until 3 s pass without another (a duplicate would have its chance to show).
 */
const readCommitted = (topic: string) =>
  Effect.scoped(
    Effect.gen(function* () {
      const subscription = yield* (yield* ConsumerSource).subscribe({
        groupId: Support.uniqueName("faults-eos-checker"),
        topics: [topic],
        fromBeginning: true
      })
      const values: Array<string> = []
      let last = Date.now()
      const fiber = yield* subscription.batches.pipe(
        Stream.runForEach((batch) =>
          Effect.sync(() => {
            for (const r of batch.records) values.push(new TextDecoder().decode(r.value))
            last = Date.now()
          })
        ),
        Effect.forkChild
      )
      const deadline = Date.now() + 60_000
      while (Date.now() < deadline && (values.length < inputs || Date.now() - last < 3_000)) {
        yield* Effect.sleep("200 millis")
      }
      yield* Fiber.interrupt(fiber)
      return values
    })
  )

describe("a rebalance in the middle of transactional batches", () => {
  it("every input's output appears exactly once on the output topic (read_committed)", async () => {
    const input = Support.uniqueName("faults-eos-in")
    const output = Support.uniqueName("faults-eos-out")
    const groupId = Support.uniqueName("faults-eos-group")
    await Support.createTopics(Support.sharedBrokers, [input, output], partitions)
    const runtime = ManagedRuntime.make(
      PlatformaticOutbox.layer(
        { brokers: Support.sharedBrokers, clientId: "faults-eos" },
        {
          consumer: {
            sessionTimeoutMillis: 6_000,
            rebalanceTimeoutMillis: 6_000,
            heartbeatIntervalMillis: 500,
            maxWaitTimeMillis: 200,
            maxBatchRecords: 25
          }
        }
      )
    )
    const transformed = { A: 0, B: 0 }
    // What each member did, to explain a lost output: every transaction, committed or aborted.
    const started = Date.now()
    const trace: Array<string> = []
    const note = (line: string) => trace.push(`${String(Date.now() - started).padStart(6)} ms ${line}`)
    const traced = (name: "A" | "B", producer: TransactionalProducer["Service"]): TransactionalProducer["Service"] =>
      TransactionalProducer.of({
        ...producer,
        commit: (request) => {
          const inputs = request.records.map((r) => new TextDecoder().decode(r.payload).replace("input-", ""))
          const what =
            `${name} gen ${request.group?.generationId} ` +
            `${request.offsets.map((o) => `p${o.partition}->${o.offset}`).join(",")} [${inputs.join(" ")}]`
          return producer.commit(request).pipe(
            Effect.tap(() => Effect.sync(() => note(`commit ${what}`))),
            Effect.tapError((e) => Effect.sync(() => note(`ABORT ${what}: ${e.reason}`)))
          )
        }
      })
    const member = (name: "A" | "B") =>
      Effect.gen(function* () {
        const context = yield* Layer.build(
          PlatformaticTransactionalProducer.layer({ transactionalId: `${groupId}-${name}` })
        )
        return yield* TransactionalPipeline.run({
          groupId,
          topics: [input],
          fromBeginning: true,
          // Slow: a batch of 25 takes about 100 ms, so a rebalance lands in the middle of one.
          transform: (record) =>
            Effect.sync(() => transformed[name]++).pipe(
              Effect.andThen(Effect.sleep("4 millis")),
              Effect.as([{ topic: output, key: record.key, payload: record.value }])
            )
        }).pipe(Effect.provideService(TransactionalProducer, traced(name, Context.get(context, TransactionalProducer))))
      }).pipe(Effect.scoped)
    const committed = () =>
      runtime.runPromise(
        Effect.map(
          Effect.flatMap(Effect.service(BrokerAdmin), (admin) => admin.groupOffsets({ groupId, topics: [input] })),
          (offsets) => offsets.reduce((sum, o) => sum + Number(o.committed ?? 0), 0)
        )
      )
    const fibers: Array<Fiber.Fiber<unknown, unknown>> = []
    try {
      await runtime.runPromise(
        Effect.gen(function* () {
          const publisher = yield* Publisher
          const requests = yield* Effect.forEach(
            Array.from({ length: inputs }, (_, i) => i),
            (i) =>
              Effect.map(makeEventId, (id) => ({
                id,
                topic: input,
                key: `k${i % 40}`,
                partition: null,
                headers: {},
                payload: new TextEncoder().encode(`input-${i}`)
              }))
          )
          for (let i = 0; i < requests.length; i += 500) yield* publisher.publish(requests.slice(i, i + 500))
        })
      )
      const failed = () => {
        for (const fiber of fibers) {
          const exit = fiber.pollUnsafe()
          if (exit !== undefined) throw new Error(`a pipeline stopped: ${String(exit)}`)
        }
      }
      const until = async (what: string, check: () => Promise<boolean> | boolean, seconds = 120) => {
        const deadline = Date.now() + seconds * 1_000
        while (!(await check())) {
          failed()
          if (Date.now() > deadline) throw new Error(`timed out waiting for ${what}`)
          await Support.sleep(100)
        }
      }
      fibers.push(runtime.runFork(member("A")))
      await until("A to commit a third of the inputs", async () => (await committed()) >= inputs / 3)
      // B joins: A loses half the partitions in the middle of its batches.
      note("B starts")
      const b = runtime.runFork(member("B"))
      fibers.push(b)
      await until("B to transform", () => transformed.B >= 100)
      await until("two thirds committed", async () => (await committed()) >= (2 * inputs) / 3)
      // B leaves in the middle of its batches: its partitions go back to A.
      fibers.splice(fibers.indexOf(b), 1)
      note("B leaves")
      await runtime.runPromise(Fiber.interrupt(b))
      note("B left")
      await until("every input committed", async () => (await committed()) === inputs)
      for (const fiber of fibers.splice(0)) await runtime.runPromise(Fiber.interrupt(fiber))

      const records = await runtime.runPromise(readCommitted(output))
      const copies = new Map<string, number>()
      for (const value of records) copies.set(value, (copies.get(value) ?? 0) + 1)
      const duplicates = [...copies.values()].reduce((sum, n) => sum + n - 1, 0)
      const lostValues = Array.from({ length: inputs }, (_, i) => `input-${i}`).filter((v) => !copies.has(v))
      const lost = lostValues.length
      if (lost > 0) {
        const where = new Map(
          (await Support.readTopic(Support.sharedBrokers, input)).map((r) => [r.value?.toString(), r])
        )
        const lines = lostValues.map((v) => `${v}: p${where.get(v)?.partition}@${where.get(v)?.offset}`)
        console.log(`LOST ${lost}\n${lines.join("\n")}\n--- trace\n${trace.join("\n")}`)
      }
      Support.record({
        scenario: "transactional pipeline, rebalance mid-batch (B joins, then leaves)",
        events: inputs,
        lost,
        duplicatesDelivered: duplicates,
        duplicateEffects: 0,
        orderViolations: 0,
        note:
          `${records.length} committed outputs; transform ran ${transformed.A + transformed.B} times ` +
          `(A ${transformed.A}, B ${transformed.B}): the extra runs were aborted or dropped, never visible`
      })
      assert.strictEqual(duplicates, 0, "no output appears twice")
      assert.strictEqual(lost, 0, "every input has its output")
      assert.strictEqual(records.length, inputs)
      assert.isAbove(transformed.B, 0, "B owned partitions")
    } finally {
      for (const fiber of fibers) await runtime.runPromise(Fiber.interrupt(fiber)).catch(() => undefined)
      await runtime.dispose()
      await Support.deleteTopics(Support.sharedBrokers, [input, output])
    }
  })
})
