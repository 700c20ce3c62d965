// One partition leader unavailable on a real multi-broker cluster: the claim relay on the library
// defaults keeps draining the partitions whose leaders serve, at no less than 0.8x their healthy
// rate measured in the same run, while the rows of the stopped broker's partitions wait PENDING
// with no attempt counted; after the broker returns everything drains, once and in key order.
//
// On the kafkajs adapter by default; FAULTS_PARTITION_ADAPTER=platformatic runs it on
// @platformatic/kafka.
//
// The cluster is `scripts/cluster` (a KRaft controller + brokers 1-3) in a state directory of its
// own under TMPDIR, on ports FAULTS_CLUSTER_PORT (default 27092) .. +7. The topic has 6 partitions
// with replication factor 1 and explicit replicas: partition p on broker (p % 3) + 1, so stopping
// broker 3 takes partitions 2 and 5 away and leaves 0, 1, 3 and 4 served.
//
// The drain rate is measured under a steady offered load (a backlog first, then events enqueued at
// a fixed rate throughout): healthy rows published per second in a healthy window, then in the
// whole outage window. On a shared machine a relay running flat out measures the machine as much as
// the relay; a steady load the relay can carry measures only whether the served partitions are
// held back by the stopped one (a relay that pauses every partition for one partition's outage
// publishes a fraction of them in the window).

import { mkdtempSync, rmSync } from "node:fs"
import { tmpdir } from "node:os"
import { join } from "node:path"
import { PgClient } from "@effect/sql-pg"
import { afterAll, assert, describe, it } from "@effect/vitest"
import * as KafkaOutbox from "@effect-outbox/adapter-kafka/KafkaOutbox"
import * as PlatformaticOutbox from "@effect-outbox/adapter-kafka-platformatic/PlatformaticOutbox"
import * as PgOutbox from "@effect-outbox/adapter-pg/PgOutbox"
import type { BrokerAdmin } from "@effect-outbox/core/BrokerAdmin"
import type { BrokerProbe } from "@effect-outbox/core/BrokerProbe"
import type { ConsumerSource } from "@effect-outbox/core/ConsumerSource"
import { keyPartition } from "@effect-outbox/core/KeyPartition"
import * as Outbox from "@effect-outbox/core/Outbox"
import type { Publisher } from "@effect-outbox/core/Publisher"
import * as Relay from "@effect-outbox/core/Relay"
import type { TopicReader } from "@effect-outbox/core/TopicReader"
import * as Effect from "effect/Effect"
import * as Exit from "effect/Exit"
import * as Layer from "effect/Layer"
import type * as LogLevel from "effect/LogLevel"
import * as ManagedRuntime from "effect/ManagedRuntime"
import * as Redacted from "effect/Redacted"
import * as References from "effect/References"
import * as Scope from "effect/Scope"
import * as Support from "./support.ts"

afterAll(() => {
  console.log(`\nfault tests (partition leader)\n${Support.table()}\n`)
})

const PARTITIONS = 6
const KEYS = 120
/** Broker 3 leads partitions 2 and 5. */
const STOPPED_BROKER = 3
const leaderOf = (partition: number) => (partition % 3) + 1
const BAD = [2, 5]
const BACKLOG = 3_000
/** Events per second offered throughout, over every partition. */
const RATE = 200
const HEALTHY_WINDOW_MILLIS = 10_000
const OUTAGE_MILLIS = 30_000

const cluster = () => {
  const state = mkdtempSync(join(tmpdir(), "effect-outbox-cluster-"))
  const port = Number(process.env.FAULTS_CLUSTER_PORT ?? 27092)
  const env = { KAFKA_CLUSTER_STATE: state, KAFKA_CLUSTER_PORT: String(port) }
  const script = join(Support.repoRoot, "scripts", "cluster")
  const cmd = (...args: ReadonlyArray<string>) => Support.run("bash", [script, ...args], env)
  return {
    brokers: [0, 1, 2].map((i) => `127.0.0.1:${port + i}`),
    up: () => cmd("up"),
    down: async () => {
      await cmd("down").catch(() => "")
      rmSync(state, { recursive: true, force: true })
    },
    stopBroker: (n: number) => cmd("stop-broker", String(n)),
    startBroker: (n: number) => cmd("start-broker", String(n))
  }
}

const createTopic = async (brokers: ReadonlyArray<string>, topic: string) => {
  const admin = Support.kafka(brokers).admin()
  await admin.connect()
  try {
    await admin.createTopics({
      topics: [
        {
          topic,
          replicaAssignment: Array.from({ length: PARTITIONS }, (_, partition) => ({
            partition,
            replicas: [leaderOf(partition)]
          }))
        }
      ],
      waitForLeaders: true
    })
    const metadata = await admin.fetchTopicMetadata({ topics: [topic] })
    for (const p of metadata.topics[0]!.partitions)
      assert.strictEqual(p.leader, leaderOf(p.partitionId), `partition ${p.partitionId}'s leader`)
  } finally {
    await admin.disconnect()
  }
}

type Adapter = "kafkajs" | "platformatic"

/** The claim relay's stack on the library defaults, over the Kafka adapter named. */
const relayStack = async (adapter: Adapter, schema: string, brokers: ReadonlyArray<string>) => {
  const client = PgClient.layer({
    url: Redacted.make(Support.databaseUrl),
    maxConnections: 4,
    applicationName: "effect-outbox-faults"
  })
  const pg = PgOutbox.layer({ schema }).pipe(Layer.provideMerge(client))
  const broker: Layer.Layer<Publisher | BrokerProbe | BrokerAdmin | ConsumerSource | TopicReader> =
    adapter === "kafkajs"
      ? KafkaOutbox.layer({ brokers, clientId: "faults" })
      : PlatformaticOutbox.layer({ brokers, clientId: "faults" })
  const logLevel = Layer.succeed(References.MinimumLogLevel)(
    (process.env.FAULTS_LOG_LEVEL ?? "Error") as LogLevel.LogLevel
  )
  const runtime = ManagedRuntime.make(
    Outbox.layer.pipe(Layer.provideMerge(Layer.merge(pg, broker)), Layer.provideMerge(logLevel))
  )
  await runtime.runPromise(Effect.void)
  return runtime
}

/** Enqueues RATE events a second (from `ids.length` on) until `stop` is set; catches up after a slow round. */
const stream = (stack: Support.Stack, topic: string, ids: Array<string>) => {
  let stopped = false
  const done = (async () => {
    const started = Date.now()
    const base = ids.length
    while (!stopped) {
      const due = base + Math.floor(((Date.now() - started) / 1000) * RATE) - ids.length
      if (due > 0) ids.push(...(await Support.enqueueMany(stack, topic, due, { keys: KEYS, from: ids.length })))
      await Support.sleep(100)
    }
  })()
  return {
    stop: async () => {
      stopped = true
      await done
    }
  }
}

const adapter = (process.env.FAULTS_PARTITION_ADAPTER ?? "kafkajs") as Adapter

describe(`one partition leader unavailable for 30 s on a 3-broker cluster, claim relay on defaults (${adapter})`, () => {
  it("the served partitions drain at >= 0.8x their healthy rate; the stopped ones wait PENDING, 0 attempts; then all drain once, in order", async () => {
    const c = cluster()
    const schema = Support.uniqueName("faults_partition_leader")
    const topic = Support.uniqueName("faults-partition-leader")
    let relayRuntime: Awaited<ReturnType<typeof relayStack>> | undefined
    let writer: Support.Stack | undefined
    let relayScope: Scope.Closeable | undefined
    let producer: { stop: () => Promise<void> } | undefined
    try {
      await c.up()
      await createTopic(c.brokers, topic)
      // The relay on the library's defaults; the writer and the measurements on a pool of their own.
      relayRuntime = await relayStack(adapter, schema, c.brokers)
      writer = await Support.makeStack({ schema, brokers: c.brokers })
      const w = writer
      const t = await Support.tables(w)
      const bad = BAD.join(",")
      const n = async (where: string) =>
        (await Support.query<{ n: number }>(w, `SELECT count(*)::int AS n FROM ${t.message} WHERE ${where}`))[0]!.n
      const healthyPublished = () => n(`status = 'PUBLISHED' AND published_partition NOT IN (${bad})`)
      const latency = async (from: number, to: number) =>
        (
          await Support.query<{ p50: number; p95: number }>(
            w,
            `SELECT round(percentile_cont(0.5) WITHIN GROUP (ORDER BY ms))::int AS p50,
                    round(percentile_cont(0.95) WITHIN GROUP (ORDER BY ms))::int AS p95
             FROM (SELECT extract(epoch FROM published_at - created_at) * 1000 AS ms FROM ${t.message}
                   WHERE status = 'PUBLISHED' AND published_partition NOT IN (${bad})
                     AND created_at >= to_timestamp(${from / 1000}) AND created_at < to_timestamp(${to / 1000})) l`
          )
        )[0]!

      const ids: Array<string> = []
      ids.push(...(await Support.enqueueMany(w, topic, BACKLOG, { keys: KEYS })))
      const rs = relayRuntime
      relayScope = await rs.runPromise(Scope.make())
      await rs.runPromise(Relay.start().pipe(Scope.provide(relayScope), Effect.asVoid))
      producer = stream(w, topic, ids)

      // The backlog drains and the relay keeps up with the stream: less than a second's load waits.
      const warmDeadline = Date.now() + 90_000
      while ((await n("status <> 'PUBLISHED'")) > RATE || (await n("status = 'PUBLISHED'")) < BACKLOG) {
        if (Date.now() > warmDeadline) throw new Error("the backlog did not drain within 90 s on a healthy cluster")
        await Support.sleep(250)
      }
      // The publisher places keys as KeyPartition does: a key's partition is known before it is published.
      assert.strictEqual(
        await n(`status = 'PUBLISHED' AND published_partition IS NULL`),
        0,
        "every published row has its partition"
      )

      // Healthy window.
      const h0 = { at: Date.now(), n: await healthyPublished() }
      await Support.sleep(HEALTHY_WINDOW_MILLIS)
      const h1 = { at: Date.now(), n: await healthyPublished() }
      const healthyRate = ((h1.n - h0.n) * 1000) / (h1.at - h0.at)

      // Outage window: from the moment broker 3 is gone (its partitions leaderless) for 30 s.
      const o0 = { at: Date.now(), n: await healthyPublished() }
      await c.stopBroker(STOPPED_BROKER)
      const goneAt = Date.now()
      await Support.sleep(Math.max(0, OUTAGE_MILLIS - (Date.now() - o0.at)))
      const o1 = { at: Date.now(), n: await healthyPublished() }
      const outageRate = ((o1.n - o0.n) * 1000) / (o1.at - o0.at)

      // The stopped partitions' rows, still inside the outage: waiting, no attempt counted.
      const badKeys = Array.from({ length: KEYS }, (_, k) => `k${k}`).filter((k) =>
        BAD.includes(keyPartition(k, PARTITIONS))
      )
      const badRows = `key IN (${badKeys.map((k) => `'${k}'`).join(",")})`
      const badStatus = await Support.query<{ status: string; n: number; attempts: number }>(
        w,
        `SELECT status, count(*)::int AS n, max(attempts)::int AS attempts FROM ${t.message}
         WHERE ${badRows} AND status <> 'PUBLISHED' GROUP BY 1 ORDER BY 1`
      )
      const badWaiting = badStatus.reduce((s, r) => s + r.n, 0)
      const badPublishedDuringOutage = await n(
        `${badRows} AND status = 'PUBLISHED' AND published_at >= to_timestamp(${goneAt / 1000})`
      )

      await producer.stop()
      producer = undefined
      await c.startBroker(STOPPED_BROKER)
      const upAt = Date.now()
      const drainDeadline = upAt + 60_000
      while ((await n("status <> 'PUBLISHED'")) > 0) {
        if (Date.now() > drainDeadline) {
          const left = await Support.query(
            w,
            `SELECT status, count(*)::int AS n, max(attempts) AS attempts FROM ${t.message} GROUP BY 1`
          )
          throw new Error(`not drained within 60 s of the broker's return: ${JSON.stringify(left)}`)
        }
        await Support.sleep(250)
      }
      const drainedIn = Date.now() - upAt
      await rs.runPromise(Scope.close(relayScope, Exit.void))
      relayScope = undefined

      const maxAttempts = (
        await Support.query<{ n: number }>(w, `SELECT COALESCE(max(attempts), 0)::int AS n FROM ${t.message}`)
      )[0]!.n
      const wrongPartition = await Support.query<{ key: string; p: number }>(
        w,
        `SELECT key, published_partition AS p FROM ${t.message} GROUP BY 1, 2`
      ).then((rows) => rows.filter((r) => keyPartition(r.key, PARTITIONS) !== r.p).length)
      const records = await Support.readTopic(c.brokers, topic)
      const v = Support.verdict(
        ids.map((id, i) => ({ id, key: `k${i % KEYS}` })),
        records
      )
      const [hl, ol] = [await latency(h0.at, h1.at), await latency(o0.at, o1.at)]
      const ratio = outageRate / healthyRate
      Support.record({
        scenario: `L1 partition leader down 30 s, 3 brokers (claim relay, defaults, ${adapter})`,
        ...v,
        failureRows: await n("status = 'FAILURE'"),
        note:
          `served partitions ${(healthyRate).toFixed(0)} rows/s healthy, ${outageRate.toFixed(0)} rows/s during the outage ` +
          `(${ratio.toFixed(2)}x; offered ${((RATE * 4) / 6).toFixed(0)}/s); their p50/p95 latency ${hl.p50}/${hl.p95} ms healthy, ` +
          `${ol.p50}/${ol.p95} ms in the outage; stopped partitions: ${badWaiting} rows waiting ` +
          `${JSON.stringify(badStatus)}; max attempts on a row ${maxAttempts}; drained ${(drainedIn / 1000).toFixed(1)} s after the broker's return`
      })

      assert.isAbove(badWaiting, 0, "rows of the stopped partitions accumulated")
      assert.deepStrictEqual(
        badStatus.filter((r) => r.status !== "PENDING" && r.status !== "DISPATCHING"),
        [],
        "the stopped partitions' rows wait PENDING (or are claimed for a retry), none FAILURE"
      )
      assert.strictEqual(Math.max(0, ...badStatus.map((r) => r.attempts)), 0, "no attempt counted by the outage")
      assert.strictEqual(
        badPublishedDuringOutage,
        0,
        "nothing reached the stopped partitions while their leader was down"
      )
      assert.strictEqual(maxAttempts, 0)
      assert.strictEqual(wrongPartition, 0, "every key published on its KeyPartition partition")
      assert.strictEqual(v.lost, 0, `lost ${v.lostIds.join(", ")}`)
      assert.strictEqual(v.duplicatesDelivered, 0)
      assert.strictEqual(v.orderViolations, 0)
      assert.strictEqual(await n("status = 'PUBLISHED'"), ids.length)
      // Last, so a failure here says everything else held.
      assert.isAtLeast(
        ratio,
        0.8,
        `served partitions: ${outageRate.toFixed(1)} rows/s in the outage vs ${healthyRate.toFixed(1)} healthy`
      )
    } finally {
      await producer?.stop().catch(() => undefined)
      if (relayScope !== undefined)
        await relayRuntime?.runPromise(Scope.close(relayScope, Exit.void)).catch(() => undefined)
      if (writer !== undefined) {
        await Support.dropSchema(writer, schema).catch(() => undefined)
        await writer.dispose()
      }
      await relayRuntime?.dispose()
      await c.down()
    }
  })
})
