/**
 * The log relay's own CPU per event on @platformatic/kafka, next to the raw client's: scenario 6's
 * drain (1 KB events written `--per-tx` per transaction, relay `batchSize` `--batch`) and raw
 * `send` of 100 of the same records, interleaved, each measured by this process's CPU time
 * (`process.cpuUsage`) over its run. On a shared machine the wall-clock rates swing with the
 * broker and the other tenants; the CPU the relay spends per event is what the relay's code
 * decides. `--profile <dir>`: a V8 CPU profile of each relay drain and each raw run (not the fill),
 * to sum self time per function (`cpuProfileSummary.ts`).
 *
 *   node bench/src/experiments/LogRelayCpu.ts [--reps 3] [--backlog 50000] [--batch 100] [--per-tx 1000]
 *     [--profile /tmp/dir] [--max-window n]
 */

import { loadavg } from "node:os"
import * as LogRelay from "@effect-outbox/core/LogRelay"
import * as Outbox from "@effect-outbox/core/Outbox"
import * as Effect from "effect/Effect"
import * as Fiber from "effect/Fiber"
import * as Args from "../Args.ts"
import * as Env from "../Env.ts"
import * as Profile from "../Profile.ts"
import { median } from "../Stats.ts"
import * as LogStack from "../support/logStack.ts"
import * as PlatformaticRaw from "../support/platformaticRaw.ts"

const reps = Args.number("reps", 3)
const backlog = Args.number("backlog", 50_000)
const batchSize = Args.number("batch", 100)
const perTx = Args.number("per-tx", 1000)
const profileDir = Args.optional("profile")
const maxWindow = Args.optional("max-window")

interface Sample {
  readonly rate: number
  /** CPU µs of this process per event. */
  readonly cpuPerEvent: number
}

const profiler = await Profile.make(profileDir)

const relay = async (admin: Awaited<ReturnType<typeof connectAdmin>>, n: number, label: string): Promise<Sample> => {
  const topic = Env.uniqueName("bench-s6cpu")
  await Env.createTopic(admin, topic)
  const stack = LogStack.make(4, "stream", undefined, "platformatic")
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
    await profiler.start()
    const cpu = Profile.cpuMicros()
    const started = performance.now()
    const fiber = stack.runtime.runFork(
      LogRelay.run({ batchSize, maxWindow: maxWindow === undefined ? undefined : Number(maxWindow) })
    )
    while ((await Env.topicRecords(admin, topic)) < n) await Env.sleep(20)
    const elapsed = performance.now() - started
    const used = Profile.cpuMicros() - cpu
    await profiler.stop(`relay-${label}`)
    await stack.runtime.runPromise(Fiber.interrupt(fiber))
    return { rate: (n / elapsed) * 1000, cpuPerEvent: used / n }
  } finally {
    await stack.close()
    await Env.deleteTopics(admin, [topic])
  }
}

const connectAdmin = async () => {
  const admin = Env.kafka().admin()
  await admin.connect()
  return admin
}

const admin = await connectAdmin()
const producer = PlatformaticRaw.producer()
const raw = async (n: number, label: string): Promise<Sample> => {
  const topic = Env.uniqueName("bench-s6cpu")
  await Env.createTopic(admin, topic)
  try {
    await profiler.start()
    const cpu = Profile.cpuMicros()
    const ms = await PlatformaticRaw.sendLoop(producer, topic, n, 100)
    const used = Profile.cpuMicros() - cpu
    await profiler.stop(`raw-${label}`)
    return { rate: (n / ms) * 1000, cpuPerEvent: used / n }
  } finally {
    await Env.deleteTopics(admin, [topic])
  }
}

const relays: Array<Sample> = []
const raws: Array<Sample> = []
await raw(500, "warmup")
await relay(admin, 500, "warmup")
for (let rep = 0; rep < reps; rep++) {
  const pair = rep % 2 === 0 ? ["raw", "relay"] : ["relay", "raw"]
  for (const side of pair) {
    const s = side === "raw" ? await raw(backlog, String(rep + 1)) : await relay(admin, backlog, String(rep + 1))
    ;(side === "raw" ? raws : relays).push(s)
    console.log(`  rep ${rep + 1} ${side}: ${Math.round(s.rate)}/s, ${s.cpuPerEvent.toFixed(1)} µs CPU per event`)
  }
}
const fmt = (xs: Array<number>, digits = 0) =>
  `${median(xs).toFixed(digits)} (${Math.min(...xs).toFixed(digits)}–${Math.max(...xs).toFixed(digits)})`
const ratios = relays.map((r, i) => r.rate / raws[i]!.rate)
console.log(
  JSON.stringify({
    relayRate: fmt(relays.map((s) => s.rate)),
    rawRate: fmt(raws.map((s) => s.rate)),
    ratio: fmt(ratios, 2),
    relayCpuPerEvent: fmt(
      relays.map((s) => s.cpuPerEvent),
      1
    ),
    rawCpuPerEvent: fmt(
      raws.map((s) => s.cpuPerEvent),
      1
    ),
    loadavg: loadavg().map((l) => Number(l.toFixed(1)))
  })
)
await producer.close()
await admin.disconnect()
process.exit(0)
