// Consumer-side fault scenarios (#13) against the real services, on the library's defaults:
// - PostgreSQL stopped for a minute while records stream in (a private cluster, so nothing else
//   is disturbed): the consumer waits for the database — nothing dead-lettered, nothing lost,
//   every effect once (H2);
// - a topic grown while records stream in: the records written to the new partitions before the
//   group noticed them are consumed (H4).
// The table printed at the end has, per scenario: events, lost, duplicate effects, dead-lettered,
// order violations.

import { rmSync } from "node:fs"
import { afterAll, assert, describe, it } from "@effect/vitest"
import { makeEventId } from "@effect-outbox/core/OutboxMessage"
import { Publisher, type PublishRequest } from "@effect-outbox/core/Publisher"
import * as Telemetry from "@effect-outbox/core/Telemetry"
import * as Effect from "effect/Effect"
import * as Metric from "effect/Metric"
import * as Support from "./support.ts"

afterAll(() => {
  console.log(`\nconsumer fault tests\n${Support.table()}\n`)
})

interface Produced {
  readonly id: string
  readonly key: string
  readonly index: number
}

/**
 * Streams records through the library's Publisher (keyed, partition by the key's hash), `perTick`
 * every 250 ms, until `stop`. Only records the broker acknowledged count as produced.
 */
const streamRecords = (stack: Support.Stack, topic: string, options: { keys: number; perTick: number }) => {
  const produced: Array<Produced> = []
  let running = true
  let index = 0
  const loop = (async () => {
    while (running) {
      const started = Date.now()
      const batch = await stack.runPromise(
        Effect.gen(function* () {
          const out: Array<{ readonly request: PublishRequest; readonly produced: Produced }> = []
          for (let j = 0; j < options.perTick; j++, index++) {
            const id = yield* makeEventId
            const key = `k${index % options.keys}`
            out.push({
              produced: { id, key, index },
              request: {
                id,
                topic,
                key,
                partition: null,
                headers: { "event-id": id },
                payload: Support.payloadOf({ index, pad: "x".repeat(100) })
              }
            })
          }
          return out
        })
      )
      const outcomes = await stack.runPromise(
        Effect.gen(function* () {
          return yield* (yield* Publisher).publish(batch.map((b) => b.request))
        })
      )
      outcomes.forEach((outcome, i) => {
        if (outcome._tag === "Success") produced.push(batch[i]!.produced)
      })
      await Support.sleep(Math.max(0, 250 - (Date.now() - started)))
    }
  })()
  return {
    produced,
    stop: async () => {
      running = false
      await loop
    }
  }
}

/** Waits until every produced event has its effect (or the deadline passes). */
const awaitEffects = async (stack: Support.Stack, schema: string, expected: number, deadlineMillis: number) => {
  const deadline = Date.now() + deadlineMillis
  while (Date.now() < deadline) {
    if ((await Support.effectCounts(stack, schema)).distinct >= expected) return
    await Support.sleep(500)
  }
}

/**
 * lost: produced events without an effect; duplicate effects: effects beyond the first per event;
 * order violations: keys whose events' first effects are not in production order.
 */
const consumerVerdict = async (stack: Support.Stack, schema: string, produced: ReadonlyArray<Produced>) => {
  const effects = await Support.query<{ event_id: string }>(
    stack,
    `SELECT event_id FROM "${schema}".effects ORDER BY n`
  )
  const byId = new Map(produced.map((p) => [p.id, p]))
  const seen = new Set<string>()
  const lastIndexOfKey = new Map<string, number>()
  const violatingKeys = new Set<string>()
  let duplicateEffects = 0
  for (const { event_id } of effects) {
    if (seen.has(event_id)) {
      duplicateEffects++
      continue
    }
    seen.add(event_id)
    const p = byId.get(event_id)
    if (p === undefined) continue
    if ((lastIndexOfKey.get(p.key) ?? -1) > p.index) violatingKeys.add(p.key)
    lastIndexOfKey.set(p.key, Math.max(p.index, lastIndexOfKey.get(p.key) ?? -1))
  }
  return {
    events: produced.length,
    lost: produced.filter((p) => !seen.has(p.id)).length,
    duplicatesDelivered: 0,
    duplicateEffects,
    orderViolations: violatingKeys.size
  }
}

const infrastructureRetries = (stack: Support.Stack) =>
  stack.runPromise(Effect.map(Metric.value(Telemetry.consumerInfrastructureRetriesTotal), (state) => state.count))

describe("PostgreSQL stopped while records stream to a consumer (H2)", () => {
  it("nothing is dead-lettered, nothing lost, every effect once", async () => {
    const outageSeconds = Number(process.env.FAULTS_PG_OUTAGE_SECONDS ?? 60)
    const pg = Support.privatePostgres()
    const schema = Support.uniqueName("faults_pgstop")
    const topic = Support.uniqueName("faults-pgstop")
    const dlt = `${topic}.DLT`
    await pg.up()
    await Support.createTopics(Support.sharedBrokers, [topic, dlt])
    const stack = await Support.makeStack({ schema, databaseUrl: pg.url })
    try {
      await Support.createEffects(stack, schema)
      const retriesBefore = await infrastructureRetries(stack)
      // Library defaults: only what a consumer must say.
      const consumer = await Support.startConsumer(stack, {
        groupId: `${schema}-group`,
        topics: [topic],
        handler: (m) => Support.insertEffect(schema, m.eventId!, m.record)
      })
      const stream = streamRecords(stack, topic, { keys: 50, perTick: 20 })
      await Support.sleep(10_000)
      const beforeOutage = (await Support.effectCounts(stack, schema)).distinct
      await pg.stop()
      await Support.sleep(outageSeconds * 1000)
      await pg.start()
      const restartedAt = Date.now()
      await Support.sleep(10_000)
      await stream.stop()
      await awaitEffects(stack, schema, stream.produced.length, 180_000)
      const caughtUp = Math.round((Date.now() - restartedAt) / 1000)
      const retries = (await infrastructureRetries(stack)) - retriesBefore
      assert.strictEqual(consumer.failure(), undefined)
      await consumer.stop()

      const deadLettered = (await Support.readTopic(Support.sharedBrokers, dlt)).length
      const v = await consumerVerdict(stack, schema, stream.produced)
      Support.record({
        scenario: `PostgreSQL stopped ${outageSeconds} s, consumer on defaults`,
        ...v,
        deadLettered,
        note:
          `${beforeOutage} processed before the stop; ${retries} infrastructure retries, none counted as attempts; ` +
          `every effect in ${caughtUp} s after the restart (streaming went on 10 s)`
      })
      assert.isAbove(beforeOutage, 0)
      assert.isAbove(retries, 0)
      assert.strictEqual(deadLettered, 0)
      assert.strictEqual(v.lost, 0)
      assert.strictEqual(v.duplicateEffects, 0)
      assert.strictEqual(v.orderViolations, 0)
    } finally {
      await Support.dropSchema(stack, schema).catch(() => undefined)
      await stack.dispose()
      await Support.deleteTopics(Support.sharedBrokers, [topic, dlt])
      await pg.down()
      rmSync(pg.state, { recursive: true, force: true })
    }
  })
})

describe("a topic grown while records stream to a consumer on defaults (H4)", () => {
  it("records on the new partitions are consumed: nothing lost", async () => {
    const schema = Support.uniqueName("faults_grow")
    const topic = Support.uniqueName("faults-grow")
    const dlt = `${topic}.DLT`
    await Support.createTopics(Support.sharedBrokers, [topic, dlt], 2)
    const stack = await Support.makeStack({ schema })
    try {
      await Support.createEffects(stack, schema)
      const consumer = await Support.startConsumer(stack, {
        groupId: `${schema}-group`,
        topics: [topic],
        handler: (m) => Support.insertEffect(schema, m.eventId!, m.record)
      })
      const stream = streamRecords(stack, topic, { keys: 200, perTick: 20 })
      await Support.sleep(8_000)
      const admin = Support.kafka().admin()
      await admin.connect()
      await admin.createPartitions({ topicPartitions: [{ topic, count: 4 }] })
      await admin.disconnect()
      const grownAt = Date.now()
      await Support.sleep(17_000)
      await stream.stop()
      await awaitEffects(stack, schema, stream.produced.length, 120_000)
      const consumedAt = Date.now()
      assert.strictEqual(consumer.failure(), undefined)
      await consumer.stop()

      // The scenario proves something only if records landed on the new partitions.
      const onNew = await Support.query<{ n: number; first: string | null }>(
        stack,
        `SELECT count(*)::int AS n, min(at)::text AS first FROM "${schema}".effects WHERE part >= 2`
      )
      const records = await Support.readTopic(Support.sharedBrokers, topic)
      const writtenToNew = records.filter((r) => r.partition >= 2).length
      const deadLettered = (await Support.readTopic(Support.sharedBrokers, dlt)).length
      const v = await consumerVerdict(stack, schema, stream.produced)
      Support.record({
        scenario: "topic grown 2 → 4 partitions while producing, consumer on defaults",
        ...v,
        deadLettered,
        note:
          `${writtenToNew} records written to the new partitions, ${onNew[0]!.n} consumed; ` +
          `grown 8 s into a 25 s stream; all consumed ${Math.round((consumedAt - grownAt) / 1000)} s after the growth; ` +
          "keys that moved partition have no order guarantee"
      })
      assert.isAbove(writtenToNew, 0)
      assert.strictEqual(onNew[0]!.n, writtenToNew)
      assert.strictEqual(v.lost, 0)
      assert.strictEqual(v.duplicateEffects, 0)
      assert.strictEqual(deadLettered, 0)
    } finally {
      await Support.dropSchema(stack, schema).catch(() => undefined)
      await stack.dispose()
      await Support.deleteTopics(Support.sharedBrokers, [topic, dlt])
    }
  })
})
