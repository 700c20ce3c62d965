/**
 * Where scenario 6's clock goes on @platformatic/kafka: the relay's drain with every publish call
 * timed (start, end, records), next to raw `send` of 100 with every `send` timed, interleaved.
 * Prints per run: the rate up to the last ack (as scenario 6), the time before the first publish
 * (lease, first read, the first window's probe; with `--fresh-kafka` the producer's connection
 * too), the time inside publish calls, the time between them (the relay's own work while the
 * producer is idle: fence, progress save, confirm, the next read), and the tail after the last ack
 * until the topic shows every record. Same sizes as `LogRelayCpu.ts`.
 *
 *   node bench/src/experiments/LogRelayTimeline.ts [--reps 3] [--backlog 50000] [--batch 100] [--per-tx 1000]
 *     [--max-window n] [--fresh-kafka]
 */

import { loadavg } from "node:os"
import * as LogRelay from "@effect-outbox/core/LogRelay"
import * as Outbox from "@effect-outbox/core/Outbox"
import type { Publisher } from "@effect-outbox/core/Publisher"
import * as Effect from "effect/Effect"
import * as Fiber from "effect/Fiber"
import * as Layer from "effect/Layer"
import * as ManagedRuntime from "effect/ManagedRuntime"
import * as Args from "../Args.ts"
import * as Env from "../Env.ts"
import { median } from "../Stats.ts"
import * as LogStack from "../support/logStack.ts"
import * as PlatformaticRaw from "../support/platformaticRaw.ts"

const reps = Args.number("reps", 3)
const backlog = Args.number("backlog", 50_000)
const batchSize = Args.number("batch", 100)
const perTx = Args.number("per-tx", 1000)
const maxWindow = Args.optional("max-window")

interface Call {
  readonly start: number
  readonly end: number
  readonly records: number
}

interface Timeline {
  readonly rate: number
  /** ms from the clock's start to the first call. */
  readonly beforeFirst: number
  /** ms inside calls. */
  readonly inCalls: number
  /** ms between one call's end and the next one's start. */
  readonly between: number
  /** ms from the last call's end to the clock's stop. */
  readonly tail: number
  readonly calls: number
  readonly recordsPerCall: number
}

const summarize = (calls: ReadonlyArray<Call>, started: number, stopped: number, n: number): Timeline => {
  let inCalls = 0
  let between = 0
  for (let i = 0; i < calls.length; i++) {
    inCalls += calls[i]!.end - calls[i]!.start
    if (i > 0) between += calls[i]!.start - calls[i - 1]!.end
  }
  // Up to the last ack, as scenario 6 (the tail is the wait until the topic shows every record).
  return {
    rate: (n / ((calls.at(-1)?.end ?? stopped) - started)) * 1000,
    beforeFirst: (calls[0]?.start ?? stopped) - started,
    inCalls,
    between,
    tail: stopped - (calls.at(-1)?.end ?? stopped),
    calls: calls.length,
    recordsPerCall: calls.length === 0 ? 0 : calls.reduce((s, c) => s + c.records, 0) / calls.length
  }
}

/** The calls of the run in progress. */
let calls: Array<Call> = []

const tap = (publisher: Publisher["Service"]): Publisher["Service"] => ({
  publish: (requests) =>
    Effect.suspend(() => {
      const start = performance.now()
      return Effect.tap(publisher.publish(requests), () =>
        Effect.sync(() => calls.push({ start, end: performance.now(), records: requests.length }))
      )
    })
})

// The relay's Kafka side as scenario 6 has it: built once, connected across runs (`--fresh-kafka`:
// a new one per run, its connection inside the clock).
const freshKafka = Args.flag("fresh-kafka")
const kafkaSide = ManagedRuntime.make(LogStack.brokerLayer("platformatic", tap))
const warmKafka = Layer.succeedContext(await kafkaSide.context())

const admin = Env.kafka().admin()
await admin.connect()

const relay = async (n: number): Promise<Timeline> => {
  const topic = Env.uniqueName("bench-s6tl")
  await Env.createTopic(admin, topic)
  calls = []
  const stack = LogStack.make(
    4,
    "stream",
    undefined,
    "platformatic",
    freshKafka ? LogStack.brokerLayer("platformatic", tap) : warmKafka
  )
  try {
    await stack.runtime.runPromise(LogStack.ready)
    await stack.runtime.runPromise(
      Effect.gen(function* () {
        for (let i = 0; i < n; i += perTx) {
          yield* Outbox.enqueueAutocommit(
            Array.from({ length: Math.min(perTx, n - i) }, (_, j) => ({
              topic,
              key: Env.keyOf(i + j),
              payload: Env.payload(i + j)
            }))
          )
        }
      })
    )
    await Env.sleep(300)
    const started = performance.now()
    const fiber = stack.runtime.runFork(
      LogRelay.run({ batchSize, maxWindow: maxWindow === undefined ? undefined : Number(maxWindow) })
    )
    while ((await Env.topicRecords(admin, topic)) < n) {
      if (performance.now() - started > 120_000) throw new Error(`the relay published fewer than ${n} in 120 s`)
      await Env.sleep(20)
    }
    const stopped = performance.now()
    await stack.runtime.runPromise(Fiber.interrupt(fiber))
    return summarize(calls, started, stopped, n)
  } finally {
    await stack.close()
    await Env.deleteTopics(admin, [topic])
  }
}

const producer = PlatformaticRaw.producer()
const raw = async (n: number): Promise<Timeline> => {
  const topic = Env.uniqueName("bench-s6tl")
  await Env.createTopic(admin, topic)
  try {
    const sends: Array<Call> = []
    const records = PlatformaticRaw.records(topic, n)
    const started = performance.now()
    for (let i = 0; i < n; i += 100) {
      const start = performance.now()
      await producer.send({ messages: records.slice(i, i + 100) })
      sends.push({ start, end: performance.now(), records: Math.min(100, n - i) })
    }
    return summarize(sends, started, performance.now(), n)
  } finally {
    await Env.deleteTopics(admin, [topic])
  }
}

const runs: Record<"relay" | "raw", Array<Timeline>> = { relay: [], raw: [] }
await raw(5_000)
await relay(5_000)
const show = (t: Timeline) =>
  `${Math.round(t.rate)}/s: before first ${t.beforeFirst.toFixed(0)} ms, in ${t.calls} calls (${t.recordsPerCall.toFixed(0)} records each) ${t.inCalls.toFixed(0)} ms, between ${t.between.toFixed(0)} ms, tail ${t.tail.toFixed(0)} ms`
for (let rep = 0; rep < reps; rep++) {
  for (const side of rep % 2 === 0 ? (["raw", "relay"] as const) : (["relay", "raw"] as const)) {
    const t = side === "raw" ? await raw(backlog) : await relay(backlog)
    runs[side].push(t)
    console.log(`  rep ${rep + 1} ${side}: ${show(t)}`)
  }
}
const med = (side: "relay" | "raw", f: (t: Timeline) => number) => Number(median(runs[side].map(f)).toFixed(1))
const fields = {
  rate: (t: Timeline) => t.rate,
  beforeFirst: (t: Timeline) => t.beforeFirst,
  inCalls: (t: Timeline) => t.inCalls,
  between: (t: Timeline) => t.between,
  tail: (t: Timeline) => t.tail,
  calls: (t: Timeline) => t.calls
}
console.log(
  JSON.stringify({
    relay: Object.fromEntries(Object.entries(fields).map(([k, f]) => [k, med("relay", f)])),
    raw: Object.fromEntries(Object.entries(fields).map(([k, f]) => [k, med("raw", f)])),
    ratios: runs.relay.map((r, i) => Number((r.rate / runs.raw[i]!.rate).toFixed(2))),
    loadavg: loadavg().map((l) => Number(l.toFixed(1)))
  })
)
await producer.close()
await kafkaSide.dispose()
await admin.disconnect()
process.exit(0)
