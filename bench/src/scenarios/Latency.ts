/**
 * Scenario 2: commit → publish latency at 25 / 50 / 80 % of scenario 1's maximum, with the
 * LISTEN/NOTIFY wake-up and with polling every 10 / 100 / 1000 ms, against raw produce latency
 * at the same rate. Both sides are timed against the broker's LogAppendTime (the topics use
 * `message.timestamp.type=LogAppendTime`): the outbox from the moment the enqueueing
 * transaction's COMMIT returned, raw kafkajs from the moment the record was handed to the
 * sender.
 */
import * as Cpu from "../Cpu.ts"
import * as Env from "../Env.ts"
import * as Library from "../Library.ts"
import * as Raw from "../Raw.ts"
import * as Report from "../Report.ts"
import { quantile } from "../Stats.ts"

export interface Options {
  readonly reps: number
  readonly seconds: number
  readonly maxRate: number
  readonly measuredMax: boolean
  /**
   * `quick`: 50 % load only (the targeted row), every wake-up mode; `smoke`: 50 % load with the
   * wake-up and polling every 100 ms, each code path once. Default: 25 / 50 / 80 %.
   */
  readonly plan?: "full" | "quick" | "smoke" | undefined
}

interface Sample {
  readonly p50: number
  readonly p99: number
  readonly cpu: Cpu.CpuUse
}

const latencyTopic = async (admin: import("kafkajs").Admin) => {
  const topic = Env.uniqueName("bench-s2")
  await Env.createTopic(admin, topic, [{ name: "message.timestamp.type", value: "LogAppendTime" }])
  return topic
}

const summarize = (committed: Map<string, number>, appended: Map<string, number>): { p50: number; p99: number } => {
  const lat: Array<number> = []
  for (const [id, at] of committed) {
    const t = appended.get(id)
    if (t === undefined) throw new Error(`event ${id} never reached the topic`)
    lat.push(t - at)
  }
  return { p50: quantile(lat, 0.5), p99: quantile(lat, 0.99) }
}

export const run = async (options: Options): Promise<void> => {
  console.log(
    `\n## 2. commit → publish latency (max rate ${Math.round(options.maxRate)}/s${options.measuredMax ? "" : " assumed"}, ${options.seconds} s per run, ${options.reps} reps)`
  )
  const k = Env.kafka()
  const admin = k.admin()
  await admin.connect()
  const producer = Env.rawProducer(k)
  await producer.connect()
  const schema = Env.uniqueName("bench_s2")
  // One writer stack (its NOTIFY on insert wakes the listening relay), one relay stack per mode.
  const writer = await Library.makeStack({ schema, pgConnections: 4, wake: "listen" })
  const listenRelay = await Library.makeStack({ schema, pgConnections: 3, wake: "listen" })
  const pollRelay = await Library.makeStack({ schema, pgConnections: 3, wake: "poll" })
  const topics: Array<string> = []

  type Mode = { readonly label: string; readonly stack: Library.Stack; readonly pollMillis: number }
  const modes: Array<Mode> = [
    { label: "wake-up (LISTEN/NOTIFY)", stack: listenRelay, pollMillis: 1000 },
    { label: "poll 10 ms", stack: pollRelay, pollMillis: 10 },
    { label: "poll 100 ms", stack: pollRelay, pollMillis: 100 },
    { label: "poll 1000 ms", stack: pollRelay, pollMillis: 1000 }
  ]
  const plan: Array<{ readonly load: number; readonly modes: ReadonlyArray<Mode> }> =
    options.plan === "smoke"
      ? [{ load: 0.5, modes: [modes[0]!, modes[2]!] }]
      : options.plan === "quick"
        ? [{ load: 0.5, modes }]
        : [
            { load: 0.25, modes: modes.slice(0, 1) },
            { load: 0.5, modes },
            { load: 0.8, modes: modes.slice(0, 1) }
          ]

  const outboxRun = async (mode: Mode, rate: number, seconds = options.seconds): Promise<Sample> => {
    const topic = await latencyTopic(admin)
    topics.push(topic)
    await Library.truncate(writer)
    const stop = await Library.startRelay(mode.stack, { batchSize: 100, pollMillis: mode.pollMillis })
    const before = Cpu.snapshot()
    // Every 10 ms, the events that arrived since are committed in one transaction.
    const committed = await Env.commitAtRate(rate, seconds, (from, n) =>
      Library.enqueueCommitted(writer, topic, from, n)
    )
    while ((await Library.unpublished(writer)) > 0) await Env.sleep(20)
    const cpu = Cpu.between(before, Cpu.snapshot())
    await stop()
    const appended = await Raw.readTimestamps(k, topic, committed.size)
    return { ...summarize(committed, appended), cpu }
  }

  const rawRun = async (rate: number, seconds = options.seconds): Promise<Sample> => {
    const topic = await latencyTopic(admin)
    topics.push(topic)
    const before = Cpu.snapshot()
    const arrivals = await Raw.produceAtRate(producer, topic, rate, seconds)
    const cpu = Cpu.between(before, Cpu.snapshot())
    const appended = await Raw.readTimestamps(k, topic, arrivals.size)
    return { ...summarize(arrivals, appended), cpu }
  }

  // Warm-up (not recorded): connect each relay's producer, JIT both paths, fetch metadata.
  for (const mode of [modes[0]!, modes[1]!]) await outboxRun(mode, Math.max(10, Math.round(options.maxRate * 0.25)), 1)
  await rawRun(Math.max(10, Math.round(options.maxRate * 0.25)), 1)

  const results = new Map<string, { lib: Array<Sample>; raw: Array<Sample> }>()
  for (let rep = 0; rep < options.reps; rep++) {
    console.log(`  rep ${rep + 1}/${options.reps}`)
    for (const { load, modes: ms } of plan) {
      const rate = Math.max(10, Math.round(options.maxRate * load))
      for (const mode of ms) {
        const key = `${Math.round(load * 100)}% (${rate}/s), ${mode.label}`
        const entry = results.get(key) ?? { lib: [], raw: [] }
        const lib = rep % 2 === 0 ? await outboxRun(mode, rate) : undefined
        const raw = await rawRun(rate)
        const lib2 = lib ?? (await outboxRun(mode, rate))
        entry.lib.push(lib2)
        entry.raw.push(raw)
        results.set(key, entry)
        console.log(
          `    ${key}: outbox p50 ${lib2.p50.toFixed(1)} p99 ${lib2.p99.toFixed(1)} ms; raw p50 ${raw.p50.toFixed(1)} p99 ${raw.p99.toFixed(1)} ms`
        )
      }
    }
    // Topics are deleted at the end only: a kafkajs producer keeps refreshing metadata for every
    // topic it ever sent to, and fails once one of them is gone.
  }

  for (const [key, { lib, raw }] of results) {
    const cpu = { library: Report.avgCpu(lib.map((s) => s.cpu)), baseline: Report.avgCpu(raw.map((s) => s.cpu)) }
    Report.add(
      Report.pair(
        { scenario: "2 latency p50", variant: key, unit: "ms", baselineName: "raw produce", cpu },
        lib.map((s) => s.p50),
        raw.map((s) => s.p50),
        "difference"
      )
    )
    const p99 = Report.pair(
      {
        scenario: "2 latency p99",
        variant: key,
        unit: "ms",
        baselineName: "raw produce",
        cpu,
        ...(key.startsWith("50%") && key.includes("wake-up") ? { target: "≤ raw p99 + 10 ms" } : {})
      },
      lib.map((s) => s.p99),
      raw.map((s) => s.p99),
      "difference"
    )
    Report.add(p99.target === undefined ? p99 : { ...p99, met: p99.ratio!.median <= 10 })
  }

  await Env.deleteTopics(admin, topics)
  await producer.disconnect()
  await admin.disconnect()
  await listenRelay.dispose()
  await pollRelay.dispose()
  await Library.dropSchema(writer)
  await writer.dispose()
}
