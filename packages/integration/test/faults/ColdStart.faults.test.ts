// A broker formatted seconds ago (item 7 of #12): the library's broker calls must work on their
// first try, with the defaults, while the broker still creates and loads its group-offsets topic.
// The broker is started by `scripts/services up` with the readiness check skipped
// (KAFKA_SKIP_READY=1), so the library meets the broker as a new machine's first test run did
// before `up` waited: topic creation, a publish, the probe, the topic reader, a consumer group
// (subscribe, consume, commit) and group offsets, right after "Kafka Server started".

import { mkdtempSync, rmSync } from "node:fs"
import { tmpdir } from "node:os"
import { join } from "node:path"
import { afterAll, assert, describe, it } from "@effect/vitest"
import * as KafkaOutbox from "@effect-outbox/adapter-kafka/KafkaOutbox"
import { BrokerAdmin } from "@effect-outbox/core/BrokerAdmin"
import { BrokerProbe } from "@effect-outbox/core/BrokerProbe"
import { ConsumerSource } from "@effect-outbox/core/ConsumerSource"
import { makeEventId } from "@effect-outbox/core/OutboxMessage"
import { Publisher } from "@effect-outbox/core/Publisher"
import { TopicReader } from "@effect-outbox/core/TopicReader"
import * as Effect from "effect/Effect"
import * as Option from "effect/Option"
import * as Result from "effect/Result"
import * as Stream from "effect/Stream"
import * as Support from "./support.ts"

afterAll(() => {
  console.log(`\nfault tests\n${Support.table()}\n`)
})

const events = 60

describe("a broker formatted seconds ago", () => {
  it("topic creation, publish, probe, reader, a consumer group and group offsets all work on the first run", async () => {
    const port = Support.privatePort("FAULTS_KAFKA_PORT", 19092)
    const controllerPort = Support.privatePort("FAULTS_KAFKA_CONTROLLER_PORT", 19093)
    const state = mkdtempSync(join(tmpdir(), "effect-outbox-cold-"))
    const broker = Support.privateBroker({ port, controllerPort, state })
    try {
      await Support.run("bash", [join(Support.repoRoot, "scripts", "services"), "up"], {
        KAFKA_PORT: String(port),
        KAFKA_CONTROLLER_PORT: String(controllerPort),
        EFFECT_OUTBOX_STATE: state,
        KAFKA_SKIP_READY: "1"
      })
      const started = Date.now()
      const topic = Support.uniqueName("faults-cold")
      const groupId = Support.uniqueName("faults-cold-group")
      const outcome = await Effect.runPromise(
        Effect.gen(function* () {
          const admin = yield* BrokerAdmin
          yield* admin.ensureTopic({ topic, partitions: 3 })
          const requests = yield* Effect.forEach(
            Array.from({ length: events }, (_, i) => i),
            (i) =>
              Effect.map(makeEventId, (id) => ({
                id,
                topic,
                key: `k${i % 10}`,
                partition: null,
                headers: {},
                payload: Support.payloadOf({ index: i })
              }))
          )
          const published = yield* (yield* Publisher).publish(requests)
          const firstGroupCall = Date.now() - started
          const found = yield* (yield* BrokerProbe).find({
            topic,
            partition: null,
            eventId: requests[0]!.id,
            since: started - 60_000
          })
          const read = yield* Stream.runCollect((yield* TopicReader).read(topic))
          const consumed = new Set<string>()
          yield* Effect.scoped(
            Effect.gen(function* () {
              const subscription = yield* (yield* ConsumerSource).subscribe({
                groupId,
                topics: [topic],
                fromBeginning: true
              })
              yield* subscription.batches.pipe(
                Stream.mapEffect((batch) =>
                  Effect.gen(function* () {
                    for (const r of batch.records) consumed.add(r.headers["event-id"] ?? "")
                    const last = batch.records[batch.records.length - 1]!
                    yield* subscription.commit([
                      { topic: batch.topic, partition: batch.partition, offset: (BigInt(last.offset) + 1n).toString() }
                    ])
                  })
                ),
                Stream.takeUntil(() => consumed.size >= events),
                Stream.runDrain
              )
            })
          )
          const offsets = yield* admin.groupOffsets({ groupId, topics: [topic] })
          return { requests, published, found, read: read.length, consumed, offsets, firstGroupCall }
        }).pipe(Effect.provide(KafkaOutbox.layer({ brokers: broker.brokers, clientId: "faults-cold" })))
      )
      const elapsed = Date.now() - started
      assert.isTrue(outcome.published.every(Result.isSuccess))
      assert.isTrue(Option.isSome(outcome.found), "the probe finds the first record")
      assert.strictEqual(outcome.read, events)
      const lost = outcome.requests.filter((r) => !outcome.consumed.has(r.id)).length
      assert.strictEqual(lost, 0)
      const committed = outcome.offsets.reduce((sum, o) => sum + Number(o.committed ?? 0), 0)
      assert.strictEqual(committed, events)
      Support.record({
        scenario: "7 cold broker (formatted seconds before)",
        events,
        lost,
        duplicatesDelivered: 0,
        duplicateEffects: 0,
        orderViolations: 0,
        note: `probe, reader, group subscribe/commit, group offsets ok; first group call ${outcome.firstGroupCall} ms after start, all done in ${(elapsed / 1000).toFixed(1)} s`
      })
    } finally {
      await broker.down()
      rmSync(state, { recursive: true, force: true })
    }
  })
})
