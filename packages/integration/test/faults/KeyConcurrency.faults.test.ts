// Key-ordered concurrency inside a partition on the real services:
// - a consumer with 32 handlers per partition SIGKILLed three times while it drains 20,000 records
//   over 200 keys on 2 partitions, then restarted to the end: nothing lost, no effect twice, and
//   per key the effects committed in offset order (records finish out of order across keys, so
//   each kill leaves finished-but-uncommitted records above the committed offset: the inbox
//   absorbs their redelivery);
// - a second member joining while the first runs many keys at once: records not started are
//   dropped by the revoked member, only records running at the revocation may start on both
//   (at most `perPartition` per partition), nothing lost, every effect once, per-key order kept.

import { join } from "node:path"
import { afterAll, assert, describe, it } from "@effect/vitest"
import type * as Consumer from "@effect-outbox/core/Consumer"
import { makeEventId } from "@effect-outbox/core/OutboxMessage"
import { Publisher, type PublishRequest } from "@effect-outbox/core/Publisher"
import * as Telemetry from "@effect-outbox/core/Telemetry"
import * as Effect from "effect/Effect"
import * as Metric from "effect/Metric"
import * as Support from "./support.ts"

afterAll(() => {
  console.log(`\nkey concurrency fault tests\n${Support.table()}\n`)
})

interface Produced {
  readonly id: string
  readonly key: string
  readonly index: number
}

/** Publishes `events` records (key `k<i % keys>`, partitioned by the key's hash), in order. */
const produce = async (stack: Support.Stack, topic: string, events: number, keys: number) => {
  const produced: Array<Produced> = []
  for (let from = 0; from < events; from += 500) {
    const batch = await stack.runPromise(
      Effect.gen(function* () {
        const out: Array<{ readonly request: PublishRequest; readonly produced: Produced }> = []
        for (let index = from; index < Math.min(events, from + 500); index++) {
          const id = yield* makeEventId
          const key = `k${index % keys}`
          out.push({
            produced: { id, key, index },
            request: {
              id,
              topic,
              key,
              partition: null,
              headers: { "event-id": id },
              payload: Support.payloadOf({ index, pad: "x" })
            }
          })
        }
        return out
      })
    )
    const outcomes = await stack.runPromise(
      Effect.flatMap(Effect.service(Publisher), (publisher) => publisher.publish(batch.map((b) => b.request)))
    )
    outcomes.forEach((outcome, i) => {
      assert.strictEqual(outcome._tag, "Success")
      produced.push(batch[i]!.produced)
    })
  }
  return produced
}

/**
 * Reads the effects in commit order per key (a key's handlers never overlap, so a key's rows are
 * inserted in its commit order): lost, duplicate effects, keys whose effects are not in offset
 * (= production) order.
 */
const effectVerdict = async (stack: Support.Stack, schema: string, produced: ReadonlyArray<Produced>) => {
  const effects = await Support.query<{ event_id: string }>(
    stack,
    `SELECT event_id FROM "${schema}".effects ORDER BY n`
  )
  const byId = new Map(produced.map((p) => [p.id, p]))
  const seen = new Set<string>()
  const last = new Map<string, number>()
  const violating = new Set<string>()
  let duplicateEffects = 0
  for (const { event_id } of effects) {
    if (seen.has(event_id)) {
      duplicateEffects++
      continue
    }
    seen.add(event_id)
    const p = byId.get(event_id)
    if (p === undefined) continue
    if ((last.get(p.key) ?? -1) > p.index) violating.add(p.key)
    last.set(p.key, Math.max(p.index, last.get(p.key) ?? -1))
  }
  return {
    events: produced.length,
    lost: produced.filter((p) => !seen.has(p.id)).length,
    duplicatesDelivered: 0,
    duplicateEffects,
    orderViolations: violating.size
  }
}

/** Records below the group's committed offsets, summed over the topic's partitions. */
const committedRecords = async (groupId: string, topic: string) => {
  const admin = Support.kafka().admin()
  await admin.connect()
  try {
    const [offsets] = await admin.fetchOffsets({ groupId, topics: [topic] })
    return (offsets?.partitions ?? []).reduce((sum, p) => sum + Math.max(0, Number(p.offset)), 0)
  } finally {
    await admin.disconnect()
  }
}

describe("key-ordered concurrency on the real services", () => {
  it("SIGKILLed 3 times while draining 20,000 records over 200 keys: 0 lost, 0 duplicate effects, 0 per-key order violations", async () => {
    const events = 20_000
    const keys = 200
    const schema = Support.uniqueName("faults_keyed")
    const topic = Support.uniqueName("faults-keyed")
    const groupId = `${schema}-group`
    await Support.createTopics(Support.sharedBrokers, [topic, `${topic}.DLT`], 2)
    const stack = await Support.makeStack({ schema })
    try {
      await Support.createEffects(stack, schema)
      const produced = await produce(stack, topic, events, keys)
      const script = join(Support.here, "consumer-keyed-process.ts")
      const env = {
        FAULTS_SCHEMA: schema,
        FAULTS_TOPIC: topic,
        FAULTS_GROUP: groupId,
        FAULTS_PER_PARTITION: "32",
        KAFKA_BROKERS: Support.sharedBrokers.join(",")
      }
      const killedAt: Array<number> = []
      // Effects applied beyond the group's committed offsets at each kill: finished above the
      // lowest unfinished record, redelivered on restart (the inbox absorbs them).
      const aboveCommit: Array<number> = []
      for (const threshold of [3_000, 8_000, 13_000]) {
        const child = Support.spawnNode(script, env)
        const deadline = Date.now() + 120_000
        while ((await Support.effectCounts(stack, schema)).distinct < threshold) {
          if (Date.now() > deadline || child.process.exitCode !== null) {
            throw new Error(`the consumer did not reach ${threshold} effects (exit ${child.process.exitCode})`)
          }
          await Support.sleep(25)
        }
        child.process.kill("SIGKILL")
        await child.exited
        assert.strictEqual(child.process.signalCode, "SIGKILL")
        const applied = (await Support.effectCounts(stack, schema)).distinct
        killedAt.push(applied)
        aboveCommit.push(applied - (await committedRecords(groupId, topic)))
      }
      const last = Support.spawnNode(script, env)
      const deadline = Date.now() + 180_000
      while ((await Support.effectCounts(stack, schema)).distinct < events) {
        if (Date.now() > deadline || last.process.exitCode !== null) throw new Error("the last consumer did not drain")
        await Support.sleep(200)
      }
      // Time for redeliveries of the last kill's finished-but-uncommitted records to show.
      await Support.sleep(2_000)
      last.process.kill("SIGTERM")
      await Promise.race([last.exited, Support.sleep(30_000)])
      if (last.process.exitCode === null && last.process.signalCode === null) last.process.kill("SIGKILL")

      const v = await effectVerdict(stack, schema, produced)
      const effects = await Support.effectCounts(stack, schema)
      Support.record({
        scenario: "key concurrency 32/partition, SIGKILL x3 while draining",
        ...v,
        note:
          `killed with ${killedAt.join(", ")} effects applied, of which ${aboveCommit.join(", ")} above the ` +
          `committed offsets; 200 keys on 2 partitions`
      })
      assert.strictEqual(v.lost, 0, "no record lost")
      assert.strictEqual(v.duplicateEffects, 0, "no effect twice")
      assert.strictEqual(effects.total, events)
      assert.strictEqual(v.orderViolations, 0, "per key, effects in offset order")
      assert.isTrue(
        aboveCommit.some((n) => n > 0),
        "a kill left finished records above the committed offset"
      )
    } finally {
      await Support.dropSchema(stack, schema)
      await stack.dispose()
      await Support.deleteTopics(Support.sharedBrokers, [topic, `${topic}.DLT`])
    }
  })

  it("a second member joins mid concurrent work: not-started records dropped, starts twice within the bound, effects once, per-key order", async () => {
    const events = 3_000
    const keys = 100
    const partitions = 2
    const perPartition = 8
    const schema = Support.uniqueName("faults_keyed_rebalance")
    const topic = Support.uniqueName("faults-keyed-rebalance")
    const groupId = `${schema}-group`
    await Support.createTopics(Support.sharedBrokers, [topic, `${topic}.DLT`], partitions)
    const stack = await Support.makeStack({ schema, maxConnections: 2 * partitions * perPartition + 4 })
    const starts: Array<{ readonly member: "A" | "B"; readonly id: string; readonly at: number }> = []
    let joined = false
    const consumerOptions = (member: "A" | "B") => ({
      groupId,
      topics: [topic],
      lifecycle: false,
      concurrency: { by: "key" as const, perPartition },
      handler: (m: Consumer.Message<typeof Support.EventPayload.Type>) =>
        Effect.sync(() => starts.push({ member, id: m.idempotencyKey, at: Date.now() })).pipe(
          // Slower once B joins: the work left (about 17 s) outlasts the rebalance by far.
          Effect.andThen(Effect.suspend(() => Effect.sleep(joined ? "100 millis" : "20 millis"))),
          Effect.andThen(Support.insertEffect(schema, m.idempotencyKey, m.record))
        )
    })
    const running: Array<Support.RunningConsumer> = []
    try {
      await Support.createEffects(stack, schema)
      const produced = await produce(stack, topic, events, keys)
      const revokedBefore = (await stack.runPromise(Metric.value(Telemetry.consumerRevokedRecordsTotal))).count
      running.push(await Support.startConsumer(stack, consumerOptions("A")))
      while (starts.length < 200) {
        assert.isUndefined(running[0]!.failure())
        await Support.sleep(20)
      }
      joined = true
      running.push(await Support.startConsumer(stack, consumerOptions("B")))
      const deadline = Date.now() + 150_000
      while ((await Support.effectCounts(stack, schema)).distinct < events) {
        for (const r of running) assert.isUndefined(r.failure())
        if (Date.now() > deadline) throw new Error("not drained")
        await Support.sleep(200)
      }
      for (const r of running.splice(0)) await r.stop()

      const revoked =
        (await stack.runPromise(Metric.value(Telemetry.consumerRevokedRecordsTotal))).count - revokedBefore
      const startsById = new Map<string, Array<"A" | "B">>()
      for (const s of starts) startsById.set(s.id, [...(startsById.get(s.id) ?? []), s.member])
      const twice = [...startsById.values()].filter((members) => members.length > 1)
      const v = await effectVerdict(stack, schema, produced)
      const effects = await Support.effectCounts(stack, schema)
      Support.record({
        scenario: `key concurrency ${perPartition}/partition, second member joins`,
        ...v,
        note:
          `${twice.length} handler starts twice (bound ${partitions * perPartition}); ${revoked} not-started records ` +
          `dropped by the revoked member; A ${starts.filter((s) => s.member === "A").length}, B ${starts.filter((s) => s.member === "B").length}`
      })
      assert.strictEqual(v.lost, 0)
      assert.strictEqual(effects.total, events, "each effect happened once")
      assert.strictEqual(v.orderViolations, 0, "per key, effects in offset order")
      assert.isAtMost(twice.length, partitions * perPartition, "only records running at the revocation start twice")
      assert.isAbove(revoked, 0, "the revoked member dropped records it had not started")
      assert.isAbove(starts.filter((s) => s.member === "B").length, 0, "the new member got partitions")
    } finally {
      for (const r of running) await r.stop().catch(() => undefined)
      await Support.dropSchema(stack, schema)
      await stack.dispose()
      await Support.deleteTopics(Support.sharedBrokers, [topic, `${topic}.DLT`])
    }
  })
})
