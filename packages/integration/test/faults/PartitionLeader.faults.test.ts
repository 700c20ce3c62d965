// One partition's leader away on a real 3-broker cluster (scripts/cluster): a topic of 6
// partitions with replication factor 1, partition p led by broker p % 3 + 1, so stopping broker 3
// leaves partitions 2 and 5 without a leader while brokers 1 and 2 serve the other four. The claim
// relay on the library's defaults drains a backlog kept topped up, on kafkajs and on
// @platformatic/kafka.
//
// What is asserted: while the broker is away, each served partition keeps publishing at a good
// share of its rate before the stop (`servedShare`), over the whole outage and in its first
// seconds, although the waiting keys' rows keep arriving and are the oldest available rows; once
// the broker is back nothing is lost or reordered and the waiting partitions are published.
//
// The cluster takes its ports from FAULTS_CLUSTER_PORT (brokers on base..base+2, the controller on
// base+7; default scripts/cluster's 27092) and its state from TMPDIR. It is removed at the end,
// whatever the outcome.

import { rmSync } from "node:fs"
import { tmpdir } from "node:os"
import { join } from "node:path"
import { afterAll, assert, beforeAll, describe, it } from "@effect/vitest"
import { keyPartition } from "@effect-outbox/core/KeyPartition"
import * as Relay from "@effect-outbox/core/Relay"
import * as Exit from "effect/Exit"
import * as Scope from "effect/Scope"
import * as Support from "./support.ts"

const base = Support.privatePort("FAULTS_CLUSTER_PORT", 27092)
const state = join(tmpdir(), `effect-outbox-partition-leader-${base}`)
const brokers = [0, 1, 2].map((i) => `127.0.0.1:${base + i}`)
const cluster = (...command: ReadonlyArray<string>) =>
  Support.run("bash", [join(Support.repoRoot, "scripts", "cluster"), ...command], {
    KAFKA_CLUSTER_PORT: String(base),
    KAFKA_CLUSTER_STATE: state
  })

const partitions = 6
const stopped = 3
const leaderOf = (partition: number) => (partition % 3) + 1
const served = Array.from({ length: partitions }, (_, p) => p).filter((p) => leaderOf(p) !== stopped)
const paused = Array.from({ length: partitions }, (_, p) => p).filter((p) => leaderOf(p) === stopped)
const keys = 120
/** Rows each served partition keeps waiting: the load is topped up to it, so the relay always has work. */
const floor = 1_500
const healthyMillis = 10_000
const outageMillis = 30_000
/**
 * The share of its healthy rate each served partition keeps, at least, over the whole outage and
 * in the `firstMillis` after the broker's JVM exited. A send that waits on the stopped broker
 * holds every batch with a row for it (kafkajs re-reading the leaderless partition's metadata for
 * seconds published nothing then), and a claim that stalls behind the waiting keys' rows
 * publishes nothing later on. Kept below a quiet machine's ×0.8–1.1 so that a loaded one passes;
 * the ratios, the second half's included, are recorded in the faults table.
 */
const servedShare = 0.4
const firstMillis = 5_000
/** Which clients run; kafkajs (the default adapter) and @platformatic/kafka unless narrowed. */
const clients = (process.env.FAULTS_PARTITION_LEADER_CLIENTS ?? "kafkajs,platformatic")
  .split(",")
  .map((c) => c.trim()) as ReadonlyArray<"kafkajs" | "platformatic">

const clusterDown = async () => {
  await cluster("down").catch(() => "")
  rmSync(state, { recursive: true, force: true })
}

beforeAll(async () => {
  await clusterDown()
  await cluster("up")
}, 300_000)

afterAll(async () => {
  await clusterDown()
  console.log(`\nfault tests (one partition's leader away)\n${Support.table()}\n`)
}, 120_000)

/** A topic whose partition p has its only replica on broker p % 3 + 1, checked against metadata. */
const createTopic = async (topic: string) => {
  const admin = Support.kafka(brokers).admin()
  await admin.connect()
  try {
    await admin.createTopics({
      topics: [
        {
          topic,
          replicaAssignment: Array.from({ length: partitions }, (_, partition) => ({
            partition,
            replicas: [leaderOf(partition)]
          }))
        }
      ],
      waitForLeaders: false
    })
    // A broker just restarted may not know the topic yet: ask until every partition has its leader.
    const want = JSON.stringify(Array.from({ length: partitions }, (_, p) => [p, leaderOf(p)]))
    let leaders = ""
    for (let i = 0; i < 60 && leaders !== want; i++) {
      if (i > 0) await Support.sleep(500)
      const metadata = await admin.fetchTopicMetadata({ topics: [topic] }).catch(() => undefined)
      leaders = JSON.stringify(
        (metadata?.topics[0]?.partitions ?? []).map((p) => [p.partitionId, p.leader]).sort((a, b) => a[0]! - b[0]!)
      )
    }
    assert.strictEqual(leaders, want, "each partition led by its own broker")
  } finally {
    await admin.disconnect()
  }
}

/** Rows published per partition between two instants (epoch millis), per second. */
const ratesBetween = async (stack: Support.Stack, message: string, from: number, to: number) => {
  const rows = await Support.query<{ p: number; n: number }>(
    stack,
    `SELECT published_partition AS p, count(*)::int AS n FROM ${message}
      WHERE status = 'PUBLISHED' AND published_at >= to_timestamp(${from / 1000})
        AND published_at < to_timestamp(${to / 1000}) GROUP BY 1`
  )
  const seconds = (to - from) / 1000
  return Array.from({ length: partitions }, (_, p) => (rows.find((r) => r.p === p)?.n ?? 0) / seconds)
}

/** Rows still waiting, per partition (keyed rows: the partition of their key). */
const openPerPartition = async (stack: Support.Stack, message: string) => {
  const rows = await Support.query<{ key: string; n: number }>(
    stack,
    `SELECT key, count(*)::int AS n FROM ${message} WHERE status IN ('PENDING','DISPATCHING') GROUP BY 1`
  )
  const open = new Array<number>(partitions).fill(0)
  for (const row of rows) open[keyPartition(row.key, partitions)]! += row.n
  return open
}

const fmt = (rates: ReadonlyArray<number>) => rates.map((r, p) => `p${p} ${r.toFixed(1)}`).join(", ")

describe("one partition's leader away for 30 s on a 3-broker cluster (claim relay, library defaults)", () => {
  for (const client of clients) {
    it(`${client}: the served partitions keep publishing; nothing lost or reordered`, async () => {
      const schema = Support.uniqueName("faults_partition_leader")
      const topic = Support.uniqueName("faults-partition-leader")
      await createTopic(topic)
      const stack = await Support.makeDefaultsStack({ schema, brokers, kafka: client })
      const t = await Support.tables(stack)
      let stopRelay: (() => Promise<void>) | undefined
      let brokerDown = false
      let arriving = true
      let arrivals: Promise<void> = Promise.resolve()
      let sampleOpen = true
      let sampling: Promise<void> = Promise.resolve()
      const timeline: Array<string> = []
      try {
        const ids = [...(await Support.enqueueMany(stack, topic, 6 * floor, { keys, chunk: 500 }))]
        // The load, until the broker is back: 20 events/s, and whenever a served partition has
        // fewer than `floor` rows waiting, enough more to lift it to twice that, so what is measured
        // is how fast the relay drains them, whichever client publishes. Rows waiting per
        // partition are counted as enqueued minus published since the last look (an index range
        // of the rows just marked), so the load costs the database little beside the relay.
        const enqueued = new Array<number>(partitions).fill(0)
        const published = new Array<number>(partitions).fill(0)
        const countEnqueued = (from: number, n: number) => {
          for (let i = from; i < from + n; i++) enqueued[keyPartition(`k${i % keys}`, partitions)]! += 1
        }
        countEnqueued(0, ids.length)
        // updated_at is written from the relay's millisecond clock
        let seenUpTo = 0
        const catchUp = async () => {
          const rows = await Support.query<{ p: number; n: number; upto: number }>(
            stack,
            `SELECT published_partition AS p, count(*)::int AS n,
                    round(extract(epoch FROM max(updated_at)) * 1000)::float8 AS upto
               FROM ${t.message}
              WHERE status = 'PUBLISHED' AND updated_at > to_timestamp(${seenUpTo / 1000}) GROUP BY 1`
          )
          for (const row of rows) published[row.p]! += row.n
          seenUpTo = Math.max(seenUpTo, ...rows.map((row) => row.upto))
        }
        const enqueue = async (n: number, chunk: number) => {
          const from = ids.length
          ids.push(...(await Support.enqueueMany(stack, topic, n, { keys, from, chunk })))
          countEnqueued(from, n)
        }
        arrivals = (async () => {
          let checked = 0
          while (arriving) {
            await enqueue(5, 5)
            if (Date.now() - checked > 500) {
              checked = Date.now()
              await catchUp()
              const least = Math.min(...served.map((p) => enqueued[p]! - published[p]!))
              if (least < floor) await enqueue(Math.max(2_000, partitions * (2 * floor - least)), 500)
            }
            await Support.sleep(250)
          }
        })()

        const scope = await stack.runPromise(Scope.make())
        stopRelay = () => stack.runPromise(Scope.close(scope, Exit.void))
        await stack.runPromise(Relay.start().pipe(Scope.provide(scope)))
        const relayStarted = Date.now()
        // Published rows per partition every 5 s, printed at the end (where the time went).
        sampling = (async () => {
          while (arriving || sampleOpen) {
            await Support.sleep(5_000)
            const total = await ratesBetween(stack, t.message, relayStarted, Date.now() + 1_000)
            const seconds = (Date.now() + 1_000 - relayStarted) / 1000
            timeline.push(
              `${((Date.now() - relayStarted) / 1000).toFixed(0)}s ${total.map((r) => Math.round(r * seconds)).join("/")}`
            )
          }
        })()
        await Support.sleep(3_000 + healthyMillis)
        const healthy = await ratesBetween(stack, t.message, relayStarted + 3_000, relayStarted + 3_000 + healthyMillis)

        // The outage window runs from the stop command (the controlled shutdown included) to the
        // start command: the broker is gone for `outageMillis` after its JVM has exited.
        const stopAt = Date.now()
        brokerDown = true
        await cluster("stop-broker", String(stopped))
        const goneAt = Date.now()
        await Support.sleep(outageMillis)
        const restartAt = Date.now()
        const outage = await ratesBetween(stack, t.message, stopAt, restartAt)
        const halfway = stopAt + (restartAt - stopAt) / 2
        const secondHalf = await ratesBetween(stack, t.message, halfway, restartAt)
        const first = await ratesBetween(stack, t.message, goneAt, goneAt + firstMillis)
        const openAtRestart = await openPerPartition(stack, t.message)
        await cluster("start-broker", String(stopped))
        brokerDown = false
        const servingAt = Date.now()
        arriving = false
        await arrivals

        const count = async (where: string) =>
          (await Support.query<{ n: number }>(stack, `SELECT count(*)::int AS n FROM ${t.message} WHERE ${where}`))[0]!
            .n
        const deadline = Date.now() + 180_000
        while ((await count("status IN ('PENDING','DISPATCHING')")) > 0 && Date.now() < deadline) {
          await Support.sleep(500)
        }
        const drainedAt = Date.now()
        sampleOpen = false
        await sampling
        console.log(`${client}: published per partition since the relay started: ${timeline.join(" | ")}`)
        await stopRelay()
        stopRelay = undefined

        const statuses = await Support.query<{ status: string; n: number }>(
          stack,
          `SELECT status, count(*)::int AS n FROM ${t.message} GROUP BY 1 ORDER BY 1`
        )
        const pausedAfter = await count(
          `status = 'PUBLISHED' AND published_partition IN (${paused.join(",")}) AND published_at >= to_timestamp(${restartAt / 1000})`
        )
        const records = await Support.readTopic(brokers, topic)
        const v = Support.verdict(
          ids.map((id, i) => ({ id, key: `k${i % keys}` })),
          records
        )
        const ratios = served.map((p) => outage[p]! / healthy[p]!)
        Support.record({
          scenario: `partition leader away 30 s, ${client}`,
          ...v,
          failureRows: statuses.find((s) => s.status === "FAILURE")?.n ?? 0,
          note:
            `rows/s healthy ${fmt(healthy)}; during the outage ${fmt(outage)}; ` +
            `served ratios ${ratios.map((r) => r.toFixed(2)).join("/")} ` +
            `(first ${firstMillis / 1000} s ${served.map((p) => (first[p]! / healthy[p]!).toFixed(2)).join("/")}; second half ${served.map((p) => (secondHalf[p]! / healthy[p]!).toFixed(2)).join("/")}); ` +
            `paused partitions published ${pausedAfter} after the restart; drained ${((drainedAt - restartAt) / 1000).toFixed(0)} s after it`
        })
        console.log(
          `${client}: broker ${stopped} stopped at ${((stopAt - relayStarted) / 1000).toFixed(0)} s, started at ${((restartAt - relayStarted) / 1000).toFixed(0)} s, serving at ${((servingAt - relayStarted) / 1000).toFixed(0)} s; ` +
            `healthy ${fmt(healthy)} | outage ${fmt(outage)} | ratios ${ratios.map((r) => r.toFixed(2)).join(" ")} (first ${firstMillis / 1000} s ${served.map((p) => (first[p]! / healthy[p]!).toFixed(2)).join(" ")}; second half ${served.map((p) => (secondHalf[p]! / healthy[p]!).toFixed(2)).join(" ")}) | open at restart ${openAtRestart.join(" ")}`
        )

        // The measurement says something only if the served partitions still had work throughout.
        for (const p of served) {
          assert.isAbove(openAtRestart[p]!, 0, `partition ${p} ran out of rows to publish`)
          assert.isAbove(healthy[p]!, 0, `partition ${p} published before the outage`)
        }
        for (const p of served) {
          const against = `against ${healthy[p]!.toFixed(1)} rows/s before it`
          assert.isAtLeast(
            outage[p]!,
            servedShare * healthy[p]!,
            `partition ${p} (broker ${leaderOf(p)}) published ${outage[p]!.toFixed(1)} rows/s over the outage ${against}`
          )
          assert.isAtLeast(
            first[p]!,
            servedShare * healthy[p]!,
            `partition ${p} (broker ${leaderOf(p)}) published ${first[p]!.toFixed(1)} rows/s in the first ` +
              `${firstMillis / 1000} s after the broker exited ${against}`
          )
        }
        assert.deepStrictEqual(
          statuses.map((s) => [s.status, s.n]),
          [["PUBLISHED", ids.length]],
          "every row ends PUBLISHED"
        )
        assert.isAbove(pausedAfter, 0, "the paused partitions' rows were published after the broker returned")
        assert.strictEqual(v.lost, 0, `lost ${v.lostIds.join(", ")}`)
        assert.strictEqual(v.orderViolations, 0)
      } finally {
        arriving = false
        sampleOpen = false
        await arrivals.catch(() => undefined)
        await sampling.catch(() => undefined)
        await stopRelay?.().catch(() => undefined)
        await Support.dropSchema(stack, schema).catch(() => undefined)
        await stack.dispose()
        if (brokerDown) await cluster("start-broker", String(stopped)).catch(() => "")
        await Support.deleteTopics(brokers, [topic])
      }
    })
  }
})
