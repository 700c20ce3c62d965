/**
 * Scenarios 1 and 2 with the claim relay publishing through @platformatic/kafka
 * (`PlatformaticPublisher`), each ÷ raw @platformatic/kafka on the same records: a backlog
 * drained at batch 100 ÷ a raw `send` loop of 100 (acks=-1, idempotent), and commit → publish
 * p50/p99 at 50 % of that drain rate (LISTEN/NOTIFY wake-up) ÷ raw `send` at the same rate (records
 * queued every 10 ms, one sender), both timed to the broker's `LogAppendTime`. The sides alternate
 * which goes first per repetition. Scenarios 1 and 2 themselves run the relay on kafkajs.
 */
import * as Env from "../Env.ts"
import * as Library from "../Library.ts"
import * as Raw from "../Raw.ts"
import * as Report from "../Report.ts"
import { median, quantile } from "../Stats.ts"
import * as PlatformaticRaw from "../support/platformaticRaw.ts"

export interface Options {
  readonly reps: number
  readonly backlog: number
  readonly seconds: number
  /** No warm-up runs (`pnpm bench --smoke`: each code path once). */
  readonly smoke?: boolean | undefined
}

const latencies = (committed: Map<string, number>, appended: Map<string, number>) => {
  const lat = [...committed].map(([id, at]) => {
    const t = appended.get(id)
    if (t === undefined) throw new Error(`event ${id} never reached the topic`)
    return t - at
  })
  return { p50: quantile(lat, 0.5), p99: quantile(lat, 0.99) }
}

export const run = async (options: Options): Promise<void> => {
  console.log(
    `\n## 1/2. claim relay on @platformatic/kafka (backlog ${options.backlog}, latency ${options.seconds} s per run, ${options.reps} reps)`
  )
  const k = Env.kafka()
  const admin = k.admin()
  await admin.connect()
  const producer = PlatformaticRaw.producer()
  const schema = Env.uniqueName("bench_s1p")
  const writer = await Library.makeStack({ schema, pgConnections: 4, wake: "listen" })
  const relay = await Library.makeStack({ schema, pgConnections: 3, wake: "listen", kafka: "platformatic" })
  const topics: Array<string> = []
  const topic = async (configs?: Array<{ name: string; value: string }>) => {
    const name = Env.uniqueName("bench-s1p")
    await Env.createTopic(admin, name, configs)
    topics.push(name)
    return name
  }
  const logAppendTime = [{ name: "message.timestamp.type", value: "LogAppendTime" }]

  const rawDrain = async (n: number) => (n / (await PlatformaticRaw.sendLoop(producer, await topic(), n, 100))) * 1000
  const relayDrain = async (n: number) => {
    const t = await topic()
    await Library.truncate(writer)
    await Library.fillBacklog(writer, t, n)
    const started = performance.now()
    const stop = await Library.startRelay(relay, { batchSize: 100, pollMillis: 50 })
    while (!(await Library.drained(writer))) await Env.sleep(20)
    const elapsed = performance.now() - started
    await stop()
    const landed = await Env.topicRecords(admin, t)
    if (landed < n) throw new Error(`claim relay on @platformatic/kafka: only ${landed} of ${n} records reached ${t}`)
    return (n / elapsed) * 1000
  }
  const rawLatency = async (rate: number) => {
    const t = await topic(logAppendTime)
    const arrivals = await PlatformaticRaw.produceAtRate(producer, t, rate, options.seconds)
    return latencies(arrivals, await Raw.readTimestamps(k, t, arrivals.size))
  }
  const relayLatency = async (rate: number) => {
    const t = await topic(logAppendTime)
    await Library.truncate(writer)
    const stop = await Library.startRelay(relay, { batchSize: 100, pollMillis: 1000 })
    const committed = await Env.commitAtRate(rate, options.seconds, (from, n) =>
      Library.enqueueCommitted(writer, t, from, n)
    )
    while (!(await Library.drained(writer))) await Env.sleep(20)
    await stop()
    return latencies(committed, await Raw.readTimestamps(k, t, committed.size))
  }

  const drains = { relay: [] as Array<number>, raw: [] as Array<number> }
  const lat = { relay: [] as Array<{ p50: number; p99: number }>, raw: [] as Array<{ p50: number; p99: number }> }
  try {
    // Warm-up: connect both producers and JIT the paths once.
    if (!options.smoke) {
      await rawDrain(500)
      await relayDrain(500)
    }
    for (let rep = 0; rep < options.reps; rep++) {
      console.log(`  rep ${rep + 1}/${options.reps}`)
      const first = rep % 2 === 0
      if (first) drains.raw.push(await rawDrain(options.backlog))
      drains.relay.push(await relayDrain(options.backlog))
      if (!first) drains.raw.push(await rawDrain(options.backlog))
      console.log(
        `    drain: relay ${Math.round(drains.relay.at(-1)!)}/s, raw send ${Math.round(drains.raw.at(-1)!)}/s`
      )
    }
    // 50 % load: half the relay's median drain rate of this run.
    const rate = Math.max(10, Math.round(median(drains.relay) / 2))
    for (let rep = 0; rep < options.reps; rep++) {
      const first = rep % 2 === 0
      if (first) lat.raw.push(await rawLatency(rate))
      lat.relay.push(await relayLatency(rate))
      if (!first) lat.raw.push(await rawLatency(rate))
      const [r, b] = [lat.relay.at(-1)!, lat.raw.at(-1)!]
      console.log(
        `    ${rate}/s: relay p50 ${r.p50.toFixed(1)} p99 ${r.p99.toFixed(1)} ms; raw p50 ${b.p50.toFixed(1)} p99 ${b.p99.toFixed(1)} ms`
      )
    }
    const drain = Report.pair(
      {
        scenario: "1 relay throughput",
        variant: "batch 100, 1 relay, @platformatic/kafka",
        unit: "msg/s",
        baselineName: "raw @platformatic/kafka send 100"
      },
      drains.relay,
      drains.raw
    )
    Report.add(drain)
    const variant = `50% (${rate}/s), wake-up (LISTEN/NOTIFY), @platformatic/kafka`
    const base = { variant, unit: "ms", baselineName: "raw @platformatic/kafka produce" }
    Report.add(
      Report.pair(
        { ...base, scenario: "2 latency p50" },
        lat.relay.map((l) => l.p50),
        lat.raw.map((l) => l.p50),
        "difference"
      )
    )
    const p99 = Report.pair(
      { ...base, scenario: "2 latency p99", target: "≤ raw p99 + 10 ms" },
      lat.relay.map((l) => l.p99),
      lat.raw.map((l) => l.p99),
      "difference"
    )
    Report.add({ ...p99, met: p99.ratio!.median <= 10 })
  } finally {
    await Env.deleteTopics(admin, topics)
    await producer.close()
    await admin.disconnect()
    await relay.dispose()
    await Library.dropSchema(writer)
    await writer.dispose()
  }
}
