/**
 * What-if (not part of `pnpm bench`): where the log relay's commit → publish tail goes. Runs
 * LogTargets' latency load (one transaction every 10 ms at `--rate`, streaming transport) with
 * the relay's ports wrapped to stamp each event: committed (the writer's commit returned), read
 * (the lease handed it to the relay), publish called, publish returned, appended (the broker's
 * LogAppendTime). Prints the split of the slowest 1 % and of all events, the node event loop's
 * delay and the GC pauses during the run. Needs LOGICAL_DATABASE_URL and KAFKA_BROKERS.
 *
 * Also every kafkajs request of the run (instrumentation events: queued and round-trip time).
 *
 *   node [--max-semi-space-size=4] bench/src/experiments/LogLatencyTrace.ts [--rate 1000] [--seconds 10]
 *     [--synchronous-commit on] [--writer-thread] [--raw] [--raw-per-partition] [--client platformatic]
 *
 * `--writer-thread`: the writer on a worker thread (its own heap); `--raw`: then raw kafkajs at the
 * same rate with the same monitors; `--raw-per-partition`: raw sends one `sendBatch` per partition.
 * Findings: bench/JOURNAL.md, "The commit → publish tail, traced".
 */
import { monitorEventLoopDelay, PerformanceObserver } from "node:perf_hooks"
import * as LogRelay from "@effect-outbox/core/LogRelay"
import { LogSource } from "@effect-outbox/core/LogSource"
import { Publisher } from "@effect-outbox/core/Publisher"
import * as Effect from "effect/Effect"
import * as Layer from "effect/Layer"
import * as Option from "effect/Option"
import Kafkajs from "kafkajs"
import * as Args from "../Args.ts"
import * as Env from "../Env.ts"
import * as Raw from "../Raw.ts"
import { maximum, quantile } from "../Stats.ts"
import * as LogStack from "../support/logStack.ts"
import * as WriterThread from "../support/writerThread.ts"

const rate = Args.number("rate", 1000)
const seconds = Args.number("seconds", 10)
const syncCommit = Args.text("synchronous-commit", "on") as "on" | "off"

interface Stamps {
  committed?: number
  read?: number
  publishStart?: number
  publishEnd?: number
  appended?: number
}
// Every kafkajs request of the run's producers and admins (kafkajs instrumentation events): to tell
// time spent queued in the client (`pendingDuration`) from the broker's round trip.
const requests: Array<{ api: string; sentAt: number; duration: number; pending: number; by: string }> = []
for (const by of ["producer", "admin"] as const) {
  const proto = Kafkajs.Kafka.prototype as unknown as Record<string, (...a: Array<unknown>) => Kafkajs.Producer>
  const original = proto[by]!
  proto[by] = function (this: unknown, ...a: Array<unknown>) {
    const client = original.apply(this, a)
    client.on(client.events.REQUEST, (e) =>
      requests.push({
        api: e.payload.apiName,
        sentAt: e.payload.sentAt,
        duration: e.payload.duration,
        pending: e.payload.pendingDuration,
        by
      })
    )
    return client
  }
}

const stamps = new Map<string, Stamps>()
const stamp = (id: string, key: keyof Stamps, at: number) => {
  const s = stamps.get(id) ?? {}
  if (s[key] === undefined) s[key] = at
  stamps.set(id, s)
}

// The relay's ports, wrapped: the lease's reads and the publisher stamp each event they pass.
const traced = Layer.mergeAll(
  Layer.effect(LogSource)(
    Effect.gen(function* () {
      const inner = yield* LogSource
      const mark = <W extends { entries: ReadonlyArray<{ id: string }> } | undefined>(w: W) => {
        const at = Date.now()
        for (const e of w?.entries ?? []) stamp(e.id, "read", at)
        return w
      }
      return LogSource.of({
        acquire: Effect.map(inner.acquire, (lease) =>
          Option.map(lease, (l) => ({
            ...l,
            read: (n: number) => Effect.map(l.read(n), mark),
            readAfter:
              l.readAfter === undefined ? undefined : (a: string, n: number) => Effect.map(l.readAfter!(a, n), mark)
          }))
        )
      })
    })
  ),
  Layer.effect(Publisher)(
    Effect.gen(function* () {
      const inner = yield* Publisher
      return Publisher.of({
        publish: (requests) =>
          Effect.suspend(() => {
            const at = Date.now()
            for (const r of requests) stamp(r.id, "publishStart", at)
            return Effect.tap(inner.publish(requests), () =>
              Effect.sync(() => {
                const end = Date.now()
                for (const r of requests) stamp(r.id, "publishEnd", end)
              })
            )
          })
      })
    })
  )
)

/** The node event loop's delay and the GC pauses between `begin` and `end`. */
const startMonitor = () => {
  const gcs: Array<{ at: number; ms: number; kind: number }> = []
  const observer = new PerformanceObserver((list) => {
    for (const e of list.getEntries())
      gcs.push({
        at: performance.timeOrigin + e.startTime,
        ms: e.duration,
        kind: (e as { detail?: { kind?: number } }).detail?.kind ?? 0
      })
  })
  observer.observe({ entryTypes: ["gc"] })
  const loop = monitorEventLoopDelay({ resolution: 1 })
  let began = 0
  let ended = 0
  return {
    begin: () => {
      loop.reset()
      loop.enable()
      began = Date.now()
    },
    end: () => {
      loop.disable()
      ended = Date.now()
    },
    report: () => {
      const ms = (ns: number) => (ns / 1e6).toFixed(1)
      console.log(
        `event loop delay: p50 ${ms(loop.percentile(50))} p99 ${ms(loop.percentile(99))} max ${ms(loop.max)} ms`
      )
      const run = gcs.filter((g) => g.at >= began && g.at <= ended)
      // perf_hooks kinds: 1 minor (scavenge), 2 major (mark-compact), 4 incremental, 8 weak callbacks.
      for (const kind of [...new Set(run.map((g) => g.kind))]) {
        const of = run.filter((g) => g.kind === kind)
        console.log(
          `GC kind ${kind}: ${of.length} pauses, ${of.filter((g) => g.ms > 5).length} over 5 ms, total ${of.reduce((a, g) => a + g.ms, 0).toFixed(0)} ms, longest ${Math.max(0, ...of.map((g) => g.ms)).toFixed(1)} ms`
        )
      }
    },
    /** Pauses over `ms`, as ms into the run. */
    longPauses: (ms: number) =>
      gcs
        .filter((g) => g.at >= began && g.at <= ended && g.ms > ms)
        .map((g) => `${Math.round(g.at - began)}(${g.ms.toFixed(0)})`),
    close: () => observer.disconnect()
  }
}

/** The same load by raw kafkajs (LogTargets' raw side), with the same monitor. */
const rawRun = async (k: ReturnType<typeof Env.kafka>, admin: ReturnType<ReturnType<typeof Env.kafka>["admin"]>) => {
  const topic = Env.uniqueName("bench-logtrace-raw")
  await Env.createTopic(admin, topic, [{ name: "message.timestamp.type", value: "LogAppendTime" }])
  const producer = Env.rawProducer(k)
  await producer.connect()
  const monitor = startMonitor()
  try {
    await producer.send({ topic, acks: -1, messages: [{ key: "warm-up", value: "warm-up" }] })
    monitor.begin()
    const from = Date.now()
    const arrivals = await Raw.produceAtRate(producer, topic, rate, seconds, Args.flag("raw-per-partition"))
    monitor.end()
    const appended = await Raw.readTimestamps(k, topic, arrivals.size)
    const lat = [...arrivals].map(([id, at]) => appended.get(id)! - at)
    console.log(`raw kafkajs: p50 ${quantile(lat, 0.5)} p99 ${quantile(lat, 0.99)} max ${maximum(lat)} ms`)
    monitor.report()
    // The broker's slow answers to raw, to set beside the relay's (they hit both sides).
    const produced = requests.filter((r) => r.api === "Produce" && r.by === "producer" && r.sentAt >= from)
    const slow = produced.filter((r) => r.duration + r.pending > 8)
    console.log(
      `raw produce requests: ${produced.length}, over 8 ms: ${slow.length} (${slow.map((r) => `${r.sentAt - from}: ${r.pending}+${r.duration}`).join("; ")})`
    )
  } finally {
    monitor.close()
    await producer.disconnect()
    await Env.deleteTopics(admin, [topic])
  }
}

const main = async () => {
  const k = Env.kafka()
  const admin = k.admin()
  await admin.connect()
  const topic = Env.uniqueName("bench-logtrace")
  await Env.createTopic(admin, topic, [{ name: "message.timestamp.type", value: "LogAppendTime" }])
  // `--client platformatic`: the relay publishes and probes through @platformatic/kafka.
  const stack = LogStack.make(
    4,
    "stream",
    syncCommit,
    Args.text("client", "kafkajs") as "kafkajs" | "kafkajs-per-partition" | "platformatic"
  )
  const monitor = startMonitor()
  try {
    const relay = stack.runtime.runFork(LogRelay.run({ batchSize: 100 }).pipe(Effect.provide(traced)))
    await Env.sleep(1_000)
    await stack.runtime.runPromise(LogStack.enqueue(topic, 0, 1))
    while ((await Env.topicRecords(admin, topic)) < 1) await Env.sleep(5)
    // `--writer-thread`: the writer on a worker thread (its own heap and GC), as a relay in a
    // process of its own sees it; otherwise in the relay's process.
    const writer = Args.flag("writer-thread")
      ? await WriterThread.open({ slot: stack.slot, topic, rate, seconds, synchronousCommit: syncCommit })
      : undefined
    stamps.clear()
    monitor.begin()
    const started = Date.now()
    const total = Math.round(rate * seconds)
    const stampCommitted = ({ committedAt, ids }: Env.Committed) => {
      for (const id of ids) stamp(id, "committed", committedAt)
    }
    if (writer !== undefined) {
      await writer.run(stampCommitted).finally(writer.close)
    } else {
      await Env.commitAtRate(
        rate,
        seconds,
        (from, n) => stack.runtime.runPromise(LogStack.enqueueCommitted(topic, from, n)),
        stampCommitted
      )
    }
    monitor.end()
    const appended = await Raw.readTimestamps(k, topic, total + 1)
    for (const [id, at] of appended) if (stamps.has(id)) stamp(id, "appended", at)
    stack.runtime.runFork(LogStack.interrupt(relay))
    const rows = [...stamps.values()].filter((s) => s.committed !== undefined && s.appended !== undefined)
    const latencyOf = (s: Stamps) => s.appended! - s.committed!
    rows.sort((a, b) => latencyOf(a) - latencyOf(b))
    const split = (set: Array<Stamps>, label: string) => {
      const q = (f: (s: Stamps) => number) => {
        const v = set.map(f)
        return `p50 ${quantile(v, 0.5)} p90 ${quantile(v, 0.9)} p99 ${quantile(v, 0.99)} max ${maximum(v)}`
      }
      console.log(`${label} (${set.length} events)`)
      console.log(`  total           ${q(latencyOf)}`)
      console.log(`  commit→read     ${q((s) => s.read! - s.committed!)}`)
      console.log(`  read→publish    ${q((s) => s.publishStart! - s.read!)}`)
      console.log(`  publish call    ${q((s) => s.publishEnd! - s.publishStart!)}`)
      console.log(`  start→appended  ${q((s) => s.appended! - s.publishStart!)}`)
    }
    split(rows, "all")
    split(rows.slice(Math.floor(rows.length * 0.99)), "slowest 1 %")
    monitor.report()
    // The slow events' windows: when they were committed, relative to the run, to see a rhythm.
    const slow = rows.slice(Math.floor(rows.length * 0.99))
    const windows = [...new Set(slow.map((s) => s.committed! - started))].sort((a, b) => a - b)
    console.log(`slow commits at (ms into the run): ${windows.join(" ")}`)
    const ofRun = requests.filter((r) => r.sentAt >= started)
    const listed = (rs: typeof requests) =>
      rs.map((r) => `${r.sentAt - started}: ${r.api} ${r.by} ${r.pending}+${r.duration}`).join("; ")
    const header = "(sent at ms into the run: api by, pending + duration)"
    const produced = ofRun.filter((r) => r.api === "Produce" && r.by === "producer")
    console.log(
      `relay produce requests: ${produced.length}, over 8 ms: ${produced.filter((r) => r.duration + r.pending > 8).length}`
    )
    console.log(`kafkajs requests over 8 ms ${header}: ${listed(ofRun.filter((r) => r.duration + r.pending > 8))}`)
    console.log(`other kafkajs requests ${header}: ${listed(ofRun.filter((r) => r.api !== "Produce"))}`)
    console.log(`GC pauses over 4 ms at (ms into the run, length): ${monitor.longPauses(4).join(" ")}`)
    console.log(
      `slow events, per stamp (committed, +read, +publishStart, +publishEnd, +appended):\n${slow
        .filter((s, i, a) => a.findIndex((o) => o.committed === s.committed) === i)
        .map(
          (s) =>
            `  ${s.committed! - started}: +${s.read! - s.committed!} +${s.publishStart! - s.committed!} +${s.publishEnd! - s.committed!} +${s.appended! - s.committed!}; produce requests (sent +, pending + duration): ${requests
              .filter((r) => r.api === "Produce" && r.sentAt >= s.publishStart! - 2 && r.sentAt <= s.publishEnd!)
              .map((r) => `+${r.sentAt - s.committed!} ${r.pending}+${r.duration}`)
              .join(", ")}`
        )
        .join("\n")}`
    )
  } finally {
    monitor.close()
    await stack.close()
    await Env.deleteTopics(admin, [topic])
    if (Args.flag("raw")) await rawRun(k, admin)
    await admin.disconnect()
  }
}

await main()
