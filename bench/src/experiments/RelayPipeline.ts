/**
 * What-if (not part of `pnpm bench`): one relay draining a backlog at batch 100 with
 * `pipelineDepth` 1 (claim → publish → mark, one batch at a time), 2, 3 and 4, next to a raw kafkajs
 * `sendBatch` 100 loop, interleaved in one run (the order rotates per repetition), on Kafka; and
 * depth 1, 2 and 4 on a no-Kafka sink (claim + mark only). With `--latency`: commit → broker
 * (LogAppendTime) latency at `--rate` events/s with the LISTEN/NOTIFY wake-up, depth 1 vs 2 vs
 * raw kafkajs produce at the same rate (scenario 2's method). See docs/performance.md.
 *
 *   node bench/src/experiments/RelayPipeline.ts [--reps 6] [--backlog 5000] [--only "relay depth 1,relay depth 2"]
 *   node bench/src/experiments/RelayPipeline.ts --latency [--reps 4] [--rate 1000] [--seconds 4]
 */
import * as Relay from "@effect-outbox/core/Relay"
import * as Duration from "effect/Duration"
import * as Effect from "effect/Effect"
import * as Exit from "effect/Exit"
import * as Scope from "effect/Scope"
import * as Args from "../Args.ts"
import * as Cpu from "../Cpu.ts"
import * as Env from "../Env.ts"
import * as Library from "../Library.ts"
import * as Raw from "../Raw.ts"
import { median, quantile } from "../Stats.ts"

const latencyMode = Args.flag("latency")
const reps = Args.number("reps", latencyMode ? 4 : 6)
const rate = Args.number("rate", 1000)
const seconds = Args.number("seconds", 4)
const backlog = Args.number("backlog", 5000)
const batchSize = 100

const schema = Env.uniqueName("bench_pipe")
const k = Env.kafka()
const admin = k.admin()
await admin.connect()
const producer = Env.rawProducer(k)
await producer.connect()
const watcher = await Library.makeStack({ schema, pgConnections: 2 })
// Enough connections for a claim and two marks at once.
const kafkaRelay = await Library.makeStack({ schema, pgConnections: 4 })
const sinkRelay = await Library.makeStack({ schema, pgConnections: 4, sink: "none" })
const topics: Array<string> = []
const topic = async () => {
  const name = Env.uniqueName("bench-pipe")
  await Env.createTopic(admin, name)
  topics.push(name)
  return name
}

/** Per batch (keyed by its first row): publish = after claim → after publish; mark = → after mark. */
interface Timing {
  batches: number
  rows: number
  publish: number
  mark: number
  cpu: Array<Cpu.CpuUse>
}
const timings = new Map<string, Timing>()
const timingHooks = (timing: Timing): Relay.HooksShape => {
  const open = new Map<string, number>()
  return {
    at: (point, _owner, rows) =>
      Effect.sync(() => {
        const id = rows[0]!.id
        const now = performance.now()
        const last = open.get(id)
        if (point === "afterClaim") {
          open.set(id, now)
          timing.rows += rows.length
        } else if (last !== undefined && point === "afterPublish") {
          timing.publish += now - last
          open.set(id, now)
        } else if (last !== undefined) {
          timing.mark += now - last
          timing.batches++
          open.delete(id)
        }
      })
  }
}

const fmt = (xs: ReadonlyArray<number>, digits: number) =>
  `${median(xs).toFixed(digits)} (${Math.min(...xs).toFixed(digits)}–${Math.max(...xs).toFixed(digits)})`

async function finish(): Promise<never> {
  await Env.deleteTopics(admin, topics)
  await Library.dropSchema(watcher)
  await producer.disconnect()
  await admin.disconnect()
  await kafkaRelay.dispose()
  await sinkRelay.dispose()
  await watcher.dispose()
  process.exit(0)
}

const drain = async (stack: Library.Stack, depth: number, kafka: boolean): Promise<number> => {
  const label = `${kafka ? "relay" : "no-kafka sink"} depth ${depth}`
  const timing = timings.get(label) ?? { batches: 0, rows: 0, publish: 0, mark: 0, cpu: [] }
  timings.set(label, timing)
  const t = await topic()
  await Library.truncate(watcher)
  await Library.fillBacklog(watcher, t, backlog)
  const scope = await stack.run(Scope.make())
  const before = Cpu.snapshot()
  const started = performance.now()
  await stack.run(
    Relay.start(relaySettings(depth, 50)).pipe(
      Effect.provideService(Relay.Hooks, timingHooks(timing)),
      Scope.provide(scope)
    )
  )
  while ((await Library.unpublished(watcher)) > 0) await Env.sleep(20)
  const elapsed = performance.now() - started
  timing.cpu.push(Cpu.between(before, Cpu.snapshot()))
  await stack.run(Scope.close(scope, Exit.void))
  if (kafka) {
    const landed = await Env.topicRecords(admin, t)
    if (landed < backlog) throw new Error(`depth ${depth}: only ${landed} of ${backlog} records reached ${t}`)
  }
  return (backlog / elapsed) * 1000
}

const raw = async () => {
  const t = await topic()
  const ms = await Raw.sendBatchLoop(producer, t, backlog, batchSize)
  return (backlog / ms) * 1000
}

const avgCpu = (cs: ReadonlyArray<Cpu.CpuUse>): Cpu.CpuUse => ({
  node: cs.reduce((sum, c) => sum + c.node, 0) / cs.length,
  postgres: cs.reduce((sum, c) => sum + c.postgres, 0) / cs.length,
  kafka: cs.reduce((sum, c) => sum + c.kafka, 0) / cs.length
})

// --only a,b: a subset of the variants by name prefix (raw sendBatch always runs: it is the baseline).
const only = Args.optional("only")?.split(",")
const allVariants: Array<[string, () => Promise<number>]> = [
  ["raw sendBatch 100", raw],
  ["relay depth 1", () => drain(kafkaRelay, 1, true)],
  ["relay depth 2", () => drain(kafkaRelay, 2, true)],
  ["relay depth 3", () => drain(kafkaRelay, 3, true)],
  ["relay depth 4", () => drain(kafkaRelay, 4, true)],
  ["no-kafka sink depth 1", () => drain(sinkRelay, 1, false)],
  ["no-kafka sink depth 2", () => drain(sinkRelay, 2, false)],
  ["no-kafka sink depth 4", () => drain(sinkRelay, 4, false)]
]
const variants = allVariants.filter(
  ([name]) => name.startsWith("raw") || only === undefined || only.some((o) => name.startsWith(o))
)

const relaySettings = (depth: number, pollMillis: number) => ({
  batchSize,
  maxPerKey: batchSize,
  pipelineDepth: depth,
  pollInterval: Duration.millis(pollMillis),
  lease: Duration.seconds(60),
  publishTimeout: Duration.seconds(30),
  shutdownTimeout: Duration.seconds(30)
})

// ---- latency: events committed every 10 ms at `rate`/s, timed to the broker's LogAppendTime ----
const latencyTopic = async () => {
  const name = Env.uniqueName("bench-pipe-lat")
  await Env.createTopic(admin, name, [{ name: "message.timestamp.type", value: "LogAppendTime" }])
  topics.push(name)
  return name
}
const percentiles = (committed: Map<string, number>, appended: Map<string, number>) => {
  const lat = [...committed].map(([id, at]) => {
    const t = appended.get(id)
    if (t === undefined) throw new Error(`event ${id} never reached the topic`)
    return t - at
  })
  return { p50: quantile(lat, 0.5), p99: quantile(lat, 0.99) }
}
const outboxLatency = async (depth: number, secs = seconds) => {
  const t = await latencyTopic()
  await Library.truncate(watcher)
  const scope = await kafkaRelay.run(Scope.make())
  await kafkaRelay.run(Relay.start(relaySettings(depth, 1000)).pipe(Scope.provide(scope)))
  const committed = await Env.commitAtRate(rate, secs, (from, n) => Library.enqueueCommitted(watcher, t, from, n))
  while ((await Library.unpublished(watcher)) > 0) await Env.sleep(20)
  await kafkaRelay.run(Scope.close(scope, Exit.void))
  return percentiles(committed, await Raw.readTimestamps(k, t, committed.size))
}
const rawLatency = async (secs = seconds) => {
  const t = await latencyTopic()
  const arrivals = await Raw.produceAtRate(producer, t, rate, secs)
  return percentiles(arrivals, await Raw.readTimestamps(k, t, arrivals.size))
}

if (latencyMode) {
  const sides: Array<[string, () => Promise<{ p50: number; p99: number }>]> = [
    ["raw produce", () => rawLatency()],
    ["relay depth 1", () => outboxLatency(1)],
    ["relay depth 2", () => outboxLatency(2)]
  ]
  await rawLatency(1)
  await outboxLatency(1, 1)
  await outboxLatency(2, 1)
  const got = new Map<string, Array<{ p50: number; p99: number }>>()
  for (let rep = 0; rep < reps; rep++) {
    for (let i = 0; i < sides.length; i++) {
      const [name, run] = sides[(i + rep) % sides.length]!
      const r = await run()
      got.set(name, [...(got.get(name) ?? []), r])
      console.log(`rep ${rep + 1}/${reps} ${name}: p50 ${r.p50.toFixed(1)} p99 ${r.p99.toFixed(1)} ms`)
    }
  }
  const raws = got.get("raw produce")!
  console.log(
    `\nlatency at ${rate}/s, wake-up, ${seconds} s per run, ${reps} reps: median (min–max); minus raw per rep`
  )
  for (const [name] of sides) {
    const xs = got.get(name)!
    const line = (q: "p50" | "p99") => {
      const v = xs.map((x) => x[q])
      const d = xs.map((x, i) => x[q] - raws[i]![q])
      return `${q} ${fmt(v, 1)} ms, +${fmt(d, 1)} ms`
    }
    console.log(`${name.padEnd(16)} ${line("p50")};  ${line("p99")}`)
  }
  await finish()
}

// Warm-up: connect the producers and JIT the paths once (not counted).
await raw()
await drain(kafkaRelay, 2, true)
await drain(sinkRelay, 2, false)

const rates = new Map<string, Array<number>>()
const ratios = new Map<string, Array<number>>()
const vsDepth1 = new Map<string, Array<number>>()
for (let rep = 0; rep < reps; rep++) {
  const order = variants.map((_, i) => variants[(i + rep) % variants.length]!)
  const got = new Map<string, number>()
  for (const [name, run] of order) {
    const rate = await run()
    got.set(name, rate)
    rates.set(name, [...(rates.get(name) ?? []), rate])
    console.log(`rep ${rep + 1}/${reps} ${name}: ${Math.round(rate)}/s`)
  }
  const base = got.get("raw sendBatch 100")!
  for (const [name] of variants) {
    ratios.set(name, [...(ratios.get(name) ?? []), got.get(name)! / base])
    const one = got.get(name.replace(/depth \d/, "depth 1"))!
    vsDepth1.set(name, [...(vsDepth1.get(name) ?? []), got.get(name)! / one])
  }
}

console.log(
  `\nbatch ${batchSize}, backlog ${backlog}, ${reps} reps (median (min–max)); ratio to raw sendBatch 100 and to depth 1, per rep`
)
for (const [name] of variants) {
  const t = timings.get(name)
  const per =
    t === undefined || t.batches === 0
      ? ""
      : `  per batch (${Math.round(t.rows / t.batches)} rows): publish ${(t.publish / t.batches).toFixed(1)} ms, mark ${(t.mark / t.batches).toFixed(1)} ms; ${Cpu.fmtCpu(avgCpu(t.cpu))}`
  console.log(
    `${name.padEnd(24)} ${fmt(rates.get(name)!, 0).padEnd(24)} msg/s  ×${fmt(ratios.get(name)!, 2)} raw  ×${fmt(vsDepth1.get(name)!, 2)} depth 1${per}`
  )
}

await finish()
