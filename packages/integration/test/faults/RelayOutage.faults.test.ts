// Relay fault scenarios against the real PostgreSQL and Kafka: a broker outage much
// longer than the relay's whole retry budget used to last, a frozen broker (SIGSTOP), and a
// FAILURE head holding its key until an operator requeues it. Each records a row of the faults
// table (events, lost, duplicates delivered, duplicate effects, order violations, FAILURE rows).
//
// The private broker takes its ports from FAULTS_KAFKA_PORT / FAULTS_KAFKA_CONTROLLER_PORT and
// its state directory from TMPDIR, so parallel runs on one machine do not collide.

import { rmSync } from "node:fs"
import { tmpdir } from "node:os"
import { join } from "node:path"
import { afterAll, assert, describe, it } from "@effect/vitest"
import * as Outbox from "@effect-outbox/core/Outbox"
import type { OutboxDraft } from "@effect-outbox/core/OutboxMessage"
import * as Relay from "@effect-outbox/core/Relay"
import * as Telemetry from "@effect-outbox/core/Telemetry"
import * as Transition from "@effect-outbox/core/Transition"
import * as Metric from "effect/Metric"
import * as Support from "./support.ts"

afterAll(() => {
  console.log(`\nfault tests (relay)\n${Support.table()}\n`)
})

const privateBroker = () =>
  Support.privateBroker({
    port: Support.privatePort("FAULTS_KAFKA_PORT", 19092),
    controllerPort: Support.privatePort("FAULTS_KAFKA_CONTROLLER_PORT", 19093),
    // One fixed directory: a broker left running by an aborted run is found and stopped first.
    state: join(tmpdir(), "effect-outbox-relay-outage-broker")
  })

const counter = (stack: Support.Stack, message: string) => async (where: string) =>
  (await Support.query<{ n: number }>(stack, `SELECT count(*)::int AS n FROM ${message} WHERE ${where}`))[0]!.n

const statusCounts = async (stack: Support.Stack, message: string) =>
  JSON.stringify(
    await Support.query(
      stack,
      `SELECT status, count(*)::int AS n, max(attempts) AS attempts FROM ${message} GROUP BY 1`
    )
  )

const failureReasons = async (stack: Support.Stack, message: string) =>
  JSON.stringify(
    await Support.query(
      stack,
      `SELECT last_error, attempts, count(*)::int AS n FROM ${message} WHERE status = 'FAILURE' GROUP BY 1, 2`
    )
  )

describe("the broker down for longer than the relay's whole retry budget used to last, 100 keys streaming", () => {
  it("no FAILURE, nothing lost, per-key order kept: an outage spends no attempts", async () => {
    const broker = privateBroker()
    await broker.down()
    rmSync(broker.state, { recursive: true, force: true })
    await broker.up()
    const schema = Support.uniqueName("faults_relay_outage")
    const topic = Support.uniqueName("faults-relay-outage")
    let stack: Support.Stack | undefined
    let stopRelay: (() => Promise<void>) | undefined
    try {
      await Support.createTopics(broker.brokers, [topic])
      stack = await Support.makeStack({ schema, brokers: broker.brokers })
      const s = stack
      const t = await Support.tables(s)
      const count = counter(s, t.message)
      // The attempt budget lowered on purpose, so the old rule would spend it within seconds:
      // 2 attempts, 0.2 s between them, each attempt at most the 8 s publish timeout of the
      // stack's publisher: at most ~16 s in all. Everything else is the relay's default
      // (outage backoff 0.5 s -> 10 s, publish timeout 10 s, pipeline depth 2).
      const maxAttempts = 2
      const oldBudgetMillis = 200 + maxAttempts * 8_000
      stopRelay = await Support.startRelay(s, { maxAttempts, backoff: Relay.backoff("200 millis", "1 second") })

      // 100 events/s over 100 keys for 75 s; the broker is down from 5 s to 65 s.
      const outageMillis = 60_000
      const ids: Array<string> = []
      const started = Date.now()
      let downAt: number | undefined
      let upAt: number | undefined
      let peakBacklog = 0
      const outage = (async () => {
        await Support.sleep(5_000)
        await broker.down()
        downAt = Date.now()
        await Support.sleep(outageMillis)
        await broker.up()
        upAt = Date.now()
      })()
      while (Date.now() - started < 75_000 || upAt === undefined) {
        ids.push(...(await Support.enqueueMany(s, topic, 25, { keys: 100, from: ids.length, chunk: 25 })))
        if (downAt !== undefined && upAt === undefined)
          peakBacklog = Math.max(peakBacklog, await count("status IN ('PENDING','DISPATCHING')"))
        await Support.sleep(250)
      }
      await outage
      const deadline = Date.now() + 150_000
      while ((await count("status IN ('PENDING','DISPATCHING')")) > 0) {
        if (Date.now() > deadline) {
          throw new Error(
            `the outbox did not drain within 150 s of the broker's return: ${await statusCounts(s, t.message)}; ` +
              `FAILURE: ${await failureReasons(s, t.message)}`
          )
        }
        await Support.sleep(200)
      }
      const drainedAt = Date.now()
      await stopRelay()

      const failed = await count("status = 'FAILURE'")
      const maxSeenAttempts = (
        await Support.query<{ n: number }>(s, `SELECT COALESCE(max(attempts), 0)::int AS n FROM ${t.message}`)
      )[0]!.n
      const records = await Support.readTopic(broker.brokers, topic)
      const v = Support.verdict(
        ids.map((id, i) => ({ id, key: `k${i % 100}` })),
        records
      )
      const actualOutage = upAt! - downAt!
      Support.record({
        scenario: "R1 broker down 60 s, 100 keys (relay)",
        ...v,
        failureRows: failed,
        note:
          `outage ${(actualOutage / 1000).toFixed(0)} s = ${(actualOutage / oldBudgetMillis).toFixed(1)}x the old budget ` +
          `(maxAttempts ${maxAttempts}, backoff 0.2-1 s, <= ${oldBudgetMillis / 1000} s); peak backlog ${peakBacklog}; ` +
          `max attempts on a row ${maxSeenAttempts}; drained ${((drainedAt - upAt!) / 1000).toFixed(1)} s after restart`
      })
      assert.strictEqual(failed, 0, `no row ends in FAILURE; got ${await failureReasons(s, t.message)}`)
      assert.isAbove(peakBacklog, 1_000, "the outbox accumulated while the broker was down")
      assert.strictEqual(v.lost, 0, `lost ${v.lostIds.join(", ")}`)
      assert.strictEqual(v.orderViolations, 0)
      assert.strictEqual(await count("status = 'PUBLISHED'"), ids.length)
    } finally {
      await stopRelay?.()
      if (stack !== undefined) {
        await Support.dropSchema(stack, schema)
        await stack.dispose()
      }
      await broker.down().catch(() => undefined)
      rmSync(broker.state, { recursive: true, force: true })
    }
  })
})

describe("a frozen broker (SIGSTOP on its JVM until sends time out, then SIGCONT)", () => {
  it("none FAILURE, nothing lost, order kept, duplicates within the batches in flight", async () => {
    const broker = privateBroker()
    await broker.down()
    rmSync(broker.state, { recursive: true, force: true })
    await broker.up()
    const schema = Support.uniqueName("faults_relay_frozen")
    const topic = Support.uniqueName("faults-relay-frozen")
    let stack: Support.Stack | undefined
    let stopRelay: (() => Promise<void>) | undefined
    let frozen = false
    try {
      await Support.createTopics(broker.brokers, [topic])
      stack = await Support.makeStack({ schema, brokers: broker.brokers })
      const s = stack
      const t = await Support.tables(s)
      const count = counter(s, t.message)
      // maxAttempts 1: any timed-out send that counts as an attempt goes straight to the
      // probe-before-FAILURE; a send that landed must end PUBLISHED, never FAILURE.
      const settings = { maxAttempts: 1 }
      const landedCounter = Metric.withAttributes(Telemetry.publishFailed, { kind: "landed" })
      const landedBefore = (await s.runPromise(Metric.value(landedCounter))).count
      stopRelay = await Support.startRelay(s, settings)
      const depth = Relay.defaults.pipelineDepth
      const batchSize = 100

      const ids: Array<string> = []
      const started = Date.now()
      let thawedAt: number | undefined
      const freeze = (async () => {
        await Support.sleep(5_000)
        assert.isAbove(Support.signalBroker(broker.state, "SIGSTOP"), 0, "the broker JVM was found")
        frozen = true
        // Longer than the relay's publish timeout (10 s) and the publisher's (8 s).
        await Support.sleep(25_000)
        Support.signalBroker(broker.state, "SIGCONT")
        frozen = false
        thawedAt = Date.now()
      })()
      while (Date.now() - started < 40_000 || thawedAt === undefined) {
        ids.push(...(await Support.enqueueMany(s, topic, 25, { keys: 20, from: ids.length, chunk: 25 })))
        await Support.sleep(250)
      }
      await freeze
      const deadline = Date.now() + 150_000
      while ((await count("status IN ('PENDING','DISPATCHING')")) > 0) {
        if (Date.now() > deadline) {
          throw new Error(
            `the outbox did not drain within 150 s of the thaw: ${await statusCounts(s, t.message)}; ` +
              `FAILURE: ${await failureReasons(s, t.message)}`
          )
        }
        await Support.sleep(200)
      }
      const drainedAt = Date.now()
      await stopRelay()
      const landed = (await s.runPromise(Metric.value(landedCounter))).count - landedBefore

      const failed = await count("status = 'FAILURE'")
      const records = await Support.readTopic(broker.brokers, topic)
      const v = Support.verdict(
        ids.map((id, i) => ({ id, key: `k${i % 20}` })),
        records
      )
      // Every PUBLISHED row's receipt names a record carrying its event id (found by the send or
      // by the probe).
      const receipts = await Support.query<{ id: string; partition: number; offset: string }>(
        s,
        `SELECT id::text, published_partition AS partition, published_offset::text AS offset FROM ${t.message}`
      )
      const at = new Map(records.map((r) => [`${r.partition}/${r.offset}`, r.eventId]))
      const wrongReceipts = receipts.filter((r) => at.get(`${r.partition}/${r.offset}`) !== r.id).length
      const bound = depth * batchSize
      Support.record({
        scenario: "R2 broker frozen 25 s (SIGSTOP)",
        ...v,
        failureRows: failed,
        note:
          `maxAttempts 1; ${landed} rows found on the broker by the probe before FAILURE (PUBLISHED); ` +
          `duplicates bound ${bound} (pipeline depth ${depth} x batch ${batchSize}); ` +
          `receipts not matching their record ${wrongReceipts}; drained ${((drainedAt - thawedAt!) / 1000).toFixed(1)} s after SIGCONT`
      })
      assert.strictEqual(failed, 0, `no row ends in FAILURE; got ${await failureReasons(s, t.message)}`)
      assert.strictEqual(v.lost, 0, `lost ${v.lostIds.join(", ")}`)
      assert.strictEqual(v.orderViolations, 0)
      assert.isAtMost(v.duplicatesDelivered, bound)
      assert.strictEqual(wrongReceipts, 0)
      assert.strictEqual(await count("status = 'PUBLISHED'"), ids.length)
    } finally {
      if (frozen) Support.signalBroker(broker.state, "SIGCONT")
      await stopRelay?.()
      if (stack !== undefined) {
        await Support.dropSchema(stack, schema)
        await stack.dispose()
      }
      await broker.down().catch(() => undefined)
      rmSync(broker.state, { recursive: true, force: true })
    }
  })
})

describe("a FAILURE head on the relay's defaults", () => {
  it("its younger events wait (PENDING, no attempt spent); after requeue they follow in order", async () => {
    const schema = Support.uniqueName("faults_relay_head")
    const topic = Support.uniqueName("faults-relay-head")
    let stack: Support.Stack | undefined
    let stopRelay: (() => Promise<void>) | undefined
    try {
      await Support.createTopics(Support.sharedBrokers, [topic], 3)
      stack = await Support.makeStack({ schema })
      const s = stack
      const t = await Support.tables(s)
      const count = counter(s, t.message)
      // Key "held" goes to partition 5 of a 3-partition topic: its head fails (unknown partition,
      // the default "fail" policy), its younger events must wait. 50 other keys flow meanwhile.
      const drafts: Array<OutboxDraft> = []
      const committed: Array<{ readonly key: string; readonly index: number }> = []
      for (let i = 0; i < 500; i++) {
        const held = i % 25 === 0
        const key = held ? "held" : `k${i % 50}`
        committed.push({ key, index: i })
        drafts.push({
          topic,
          key,
          ...(held ? { partition: 5 } : {}),
          payload: Support.payloadOf({ index: i, pad: "x".repeat(100) })
        })
      }
      const enqueue = (batch: ReadonlyArray<OutboxDraft>) => s.runPromise(Outbox.withTransaction(Outbox.enqueue(batch)))
      const ids = [...(await enqueue(drafts))]
      stopRelay = await Support.startRelay(s)

      const deadline = Date.now() + 60_000
      while ((await count("status = 'PUBLISHED'")) < 480 || (await count("status = 'FAILURE'")) < 1) {
        if (Date.now() > deadline) throw new Error("the other keys did not publish, or the head did not fail")
        await Support.sleep(200)
      }
      // More events of the held key while it is blocked; then watch it stay blocked.
      const later = Array.from({ length: 5 }, (_, j) => {
        committed.push({ key: "held", index: 500 + j })
        return {
          topic,
          key: "held",
          partition: 5,
          payload: Support.payloadOf({ index: 500 + j, pad: "x".repeat(100) })
        } satisfies OutboxDraft
      })
      ids.push(...(await enqueue(later)))
      await Support.sleep(5_000)
      const heldIds = ids.filter((_, i) => committed[i]!.key === "held")
      const heldRows = await Support.query<{ id: string; status: string; attempts: number }>(
        s,
        `SELECT id::text, status, attempts FROM ${t.message} WHERE key = 'held' ORDER BY seq`
      )
      assert.strictEqual(heldRows.length, 25)
      assert.strictEqual(heldRows[0]!.status, "FAILURE")
      assert.deepStrictEqual(
        heldRows.slice(1).map((r) => `${r.status}/${r.attempts}`),
        heldRows.slice(1).map(() => "PENDING/0"),
        "the younger events wait behind the FAILURE head without spending attempts"
      )
      const blockedFor = Date.now()

      // The operator fixes the cause (the topic grows to 6 partitions) and requeues the head.
      const admin = Support.kafka().admin()
      await admin.connect()
      await admin.createPartitions({ topicPartitions: [{ topic, count: 6 }] })
      await admin.disconnect()
      await s.runPromise(Transition.requeue({ ids: [heldIds[0]!], operator: "faults", reason: "topic grown" }))
      const drain = Date.now() + 60_000
      while ((await count("status <> 'PUBLISHED'")) > 0) {
        if (Date.now() > drain) throw new Error(`not drained after requeue: ${await failureReasons(s, t.message)}`)
        await Support.sleep(200)
      }
      const drainedAfter = Date.now() - blockedFor
      await stopRelay()

      const records = await Support.readTopic(Support.sharedBrokers, topic)
      const v = Support.verdict(
        ids.map((id, i) => ({ id, key: committed[i]!.key })),
        records
      )
      const heldOrder = records.filter((r) => r.key === "held").map((r) => r.eventId)
      Support.record({
        scenario: "R3 FAILURE head, then requeue",
        ...v,
        failureRows: await count("status = 'FAILURE'"),
        note: `key "held": head FAILURE (unknown partition), 24 younger waited PENDING with 0 attempts; all 25 published in order ${(drainedAfter / 1000).toFixed(1)} s after the requeue`
      })
      assert.strictEqual(v.lost, 0, `lost ${v.lostIds.join(", ")}`)
      assert.strictEqual(v.orderViolations, 0)
      assert.strictEqual(v.duplicatesDelivered, 0)
      assert.deepStrictEqual(heldOrder, heldIds, "the held key follows its head in creation order")
    } finally {
      await stopRelay?.()
      if (stack !== undefined) {
        await Support.dropSchema(stack, schema)
        await stack.dispose()
      }
      await Support.deleteTopics(Support.sharedBrokers, [topic])
    }
  })
})
