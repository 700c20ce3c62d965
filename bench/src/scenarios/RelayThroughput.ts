/**
 * Scenario 1: drain a backlog of 1 KB events with the relay ÷ a raw kafkajs `sendBatch` loop at
 * the same batch size, interleaved per repetition; plus a no-Kafka sink (claim + mark only) and
 * 2 / 4 relays sharing the table.
 */
import type Kafkajs from "kafkajs"
import * as Cpu from "../Cpu.ts"
import * as Env from "../Env.ts"
import * as Library from "../Library.ts"
import * as Raw from "../Raw.ts"
import * as Report from "../Report.ts"
import { median } from "../Stats.ts"

export interface Options {
  readonly reps: number
  readonly backlog: number
  readonly batchSizes: ReadonlyArray<number>
  readonly relayCounts: ReadonlyArray<number>
}

const WARM_UP = 5_000

interface Sample {
  readonly rate: number
  readonly cpu: Cpu.CpuUse
}

/**
 * Drains the backlog with `relays`, timed like the raw side (first send → last ack): from the
 * relays' start to the last batch's mark, taken by each relay's hooks. The watcher's poll only
 * says when that happened, so its interval is not charged to the relay.
 */
const drain = async (
  relays: ReadonlyArray<Library.Stack>,
  watcher: Library.Stack,
  batchSize: number,
  n: number,
  profile?: Library.BatchProfile
): Promise<Sample> => {
  const timers = relays.map((_, i) => (i === 0 && profile !== undefined ? profile : Library.emptyProfile()))
  const before = Cpu.snapshot()
  const started = performance.now()
  const stops = await Promise.all(
    relays.map((stack, i) => Library.startRelay(stack, { batchSize, pollMillis: 50 }, timers[i]))
  )
  while (!(await Library.drained(watcher))) await Env.sleep(50)
  const after = Cpu.snapshot()
  const lastMark = Math.max(...timers.map((t) => t.lastMarkAt))
  await Promise.all(stops.map((stop) => stop()))
  return { rate: (n / (lastMark - started)) * 1000, cpu: Cpu.between(before, after) }
}

export const run = async (options: Options): Promise<{ maxRate: number }> => {
  console.log(`\n## 1. relay throughput (backlog ${options.backlog}, ${options.reps} reps)`)
  const schema = Env.uniqueName("bench_s1")
  const k = Env.kafka()
  const admin = k.admin()
  await admin.connect()
  const producer = Env.rawProducer(k)
  await producer.connect()
  const maxRelays = Math.max(1, ...options.relayCounts)
  const watcher = await Library.makeStack({ schema, pgConnections: 2 })
  const relays: Array<Library.Stack> = []
  for (let i = 0; i < maxRelays; i++) relays.push(await Library.makeStack({ schema, pgConnections: 3 }))
  const nullRelay = await Library.makeStack({ schema, pgConnections: 3, sink: "none" })
  const topics: Array<Kafkajs.ITopicMetadata["name"]> = []
  const topic = async () => {
    const name = Env.uniqueName("bench-s1")
    await Env.createTopic(admin, name)
    topics.push(name)
    return name
  }

  const sizeFor = (batch: number) => (batch <= 10 ? Math.max(1000, Math.round(options.backlog / 5)) : options.backlog)

  // Warm-up, alike on both sides: WARM_UP records through the raw producer and through the first
  // relay (the process's code paths are then compiled for both); every other stack drains 500 to
  // connect its producer and pool.
  {
    const t = await topic()
    await Raw.sendBatchLoop(producer, t, WARM_UP, 100)
    for (const [i, stack] of [...relays, nullRelay].entries()) {
      const n = i === 0 ? WARM_UP : 500
      await Library.truncate(watcher)
      await Library.fillBacklog(watcher, t, n)
      await drain([stack], watcher, 100, n)
    }
  }

  const relayRuns = new Map<string, Array<Sample>>()
  const rawRuns = new Map<number, Array<Sample>>()
  const push = <K>(m: Map<K, Array<Sample>>, key: K, s: Sample) => m.set(key, [...(m.get(key) ?? []), s])

  const rawRun = async (batch: number) => {
    const n = sizeFor(batch)
    const t = await topic()
    const before = Cpu.snapshot()
    const ms = await Raw.sendBatchLoop(producer, t, n, batch)
    const sample = { rate: (n / ms) * 1000, cpu: Cpu.between(before, Cpu.snapshot()) }
    push(rawRuns, batch, sample)
    console.log(`    rep raw sendBatch ${batch}: ${Math.round(sample.rate)}/s`)
  }
  const profiles = new Map<string, Library.BatchProfile>()
  const relayRun = async (label: string, stacks: ReadonlyArray<Library.Stack>, batch: number) => {
    const n = sizeFor(batch)
    const t = await topic()
    await Library.truncate(watcher)
    await Library.fillBacklog(watcher, t, n)
    const profile = stacks.length === 1 ? (profiles.get(label) ?? Library.emptyProfile()) : undefined
    if (profile !== undefined) profiles.set(label, profile)
    const sample = await drain(stacks, watcher, batch, n, profile)
    if (stacks[0] !== nullRelay) {
      const landed = await Env.topicRecords(admin, t)
      if (landed < n) throw new Error(`relay run ${label}: only ${landed} of ${n} records reached ${t}`)
    }
    push(relayRuns, label, sample)
    console.log(`    rep ${label}: ${Math.round(sample.rate)}/s`)
  }

  for (let rep = 0; rep < options.reps; rep++) {
    console.log(`  rep ${rep + 1}/${options.reps}`)
    for (const batch of options.batchSizes) {
      // Alternate which side goes first so drift in machine load hits both equally.
      if (rep % 2 === 0) {
        await rawRun(batch)
        await relayRun(`relay b${batch}`, relays.slice(0, 1), batch)
      } else {
        await relayRun(`relay b${batch}`, relays.slice(0, 1), batch)
        await rawRun(batch)
      }
    }
    await relayRun("no-kafka sink b100", [nullRelay], 100)
    for (const count of options.relayCounts.filter((c) => c > 1)) {
      await relayRun(`${count} relays b100`, relays.slice(0, count), 100)
    }
    // Topics are deleted at the end only: a kafkajs producer keeps refreshing metadata for every
    // topic it ever sent to, and fails once one of them is gone.
  }

  const rates = (xs: ReadonlyArray<Sample> | undefined) => (xs ?? []).map((s) => s.rate)
  for (const batch of options.batchSizes) {
    const lib = relayRuns.get(`relay b${batch}`)!
    const raw = rawRuns.get(batch)!
    const p = profiles.get(`relay b${batch}`)
    const per = (x: number) => (p === undefined || p.batches === 0 ? Number.NaN : x / p.batches)
    const row = Report.pair(
      {
        scenario: "1 relay throughput",
        variant: `batch ${batch}, 1 relay${batch <= 10 ? `, backlog ${sizeFor(batch)}` : ""}`,
        note:
          p === undefined
            ? undefined
            : `per batch: claim ${per(p.claim).toFixed(1)} ms, publish ${per(p.publish).toFixed(1)} ms, mark ${per(p.mark).toFixed(1)} ms`,
        unit: "msg/s",
        baselineName: `raw sendBatch ${batch}`,
        ...(batch === 100 ? { target: "≥ 0.85×" } : {}),
        cpu: { library: Report.avgCpu(lib.map((s) => s.cpu)), baseline: Report.avgCpu(raw.map((s) => s.cpu)) }
      },
      rates(lib),
      rates(raw)
    )
    Report.add(batch === 100 ? { ...row, met: row.ratio!.median >= 0.85 } : row)
  }
  Report.extra("relayBatchProfiles", Object.fromEntries(profiles))
  const raw100 = rawRuns.get(100) ?? rawRuns.get(options.batchSizes[0]!)!
  for (const label of [
    "no-kafka sink b100",
    ...options.relayCounts.filter((c) => c > 1).map((c) => `${c} relays b100`)
  ]) {
    const lib = relayRuns.get(label)!
    const p = profiles.get(label)
    Report.add(
      Report.pair(
        {
          scenario: "1 relay throughput",
          variant: label.replace("b100", "batch 100"),
          note:
            p === undefined || p.batches === 0
              ? undefined
              : `per batch: claim ${(p.claim / p.batches).toFixed(1)} ms, mark ${(p.mark / p.batches).toFixed(1)} ms`,
          unit: "msg/s",
          baselineName: "raw sendBatch 100",
          cpu: { library: Report.avgCpu(lib.map((s) => s.cpu)), baseline: Report.avgCpu(raw100.map((s) => s.cpu)) }
        },
        rates(lib),
        rates(raw100)
      )
    )
  }

  await Env.deleteTopics(admin, topics)
  await producer.disconnect()
  await admin.disconnect()
  for (const s of [...relays, nullRelay]) await s.dispose()
  await Library.dropSchema(watcher)
  await watcher.dispose()
  return { maxRate: median(rates(relayRuns.get("relay b100"))) }
}
