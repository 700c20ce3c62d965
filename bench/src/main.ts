/**
 * `pnpm bench` — every scenario against its baseline in the same run, interleaved and repeated.
 *
 *   node bench/src/main.ts [--quick] [--reps N] [--latency-reps N] [--backlog N] [--seconds N]
 *                          [--messages N] [--churn-seconds N] [--only 1,2,3,4,5,6,7]
 *                          [--kafka kafkajs|platformatic]
 *
 * Writes bench/results.json and bench/results.md (the committed record of the last full run) and
 * prints the table; a `--quick` or `--only` run writes them under bench/results/ (untracked), so a
 * partial run never replaces the full one. See docs/performance.md.
 * `--kafka platformatic` puts the relays' publisher on @platformatic/kafka (the baselines and the
 * scenario 4 consumer stay kafkajs); both adapters side by side: experiments/KafkaAdapters.ts.
 */
import { mkdirSync } from "node:fs"
import { dirname, join } from "node:path"
import { fileURLToPath } from "node:url"
import { parseArgs } from "node:util"
import * as Cpu from "./Cpu.ts"
import * as Report from "./Report.ts"
import * as Churn from "./scenarios/Churn.ts"
import * as Consumer from "./scenarios/Consumer.ts"
import * as KeyConcurrency from "./scenarios/KeyConcurrency.ts"
import * as Latency from "./scenarios/Latency.ts"
import * as LogRelayThroughput from "./scenarios/LogRelayThroughput.ts"
import * as RelayThroughput from "./scenarios/RelayThroughput.ts"
import * as WritePath from "./scenarios/WritePath.ts"

const { values } = parseArgs({
  options: {
    quick: { type: "boolean", default: false },
    reps: { type: "string" },
    backlog: { type: "string" },
    seconds: { type: "string" },
    "churn-seconds": { type: "string" },
    messages: { type: "string" },
    "latency-reps": { type: "string" },
    only: { type: "string" },
    kafka: { type: "string" }
  }
})

const quick = values.quick === true
const int = (v: string | undefined, fallback: number) => (v === undefined ? fallback : Number.parseInt(v, 10))
const settings = {
  quick,
  reps: int(values.reps, quick ? 2 : 5),
  backlog: int(values.backlog, quick ? 5_000 : 100_000),
  seconds: int(values.seconds, quick ? 3 : 10),
  churnSeconds: int(values["churn-seconds"], quick ? 20 : 600),
  messages: int(values.messages, quick ? 3_000 : 20_000),
  latencyReps: int(values["latency-reps"], int(values.reps, quick ? 2 : 5))
}
if (values.kafka !== undefined) process.env.BENCH_KAFKA = values.kafka
const scenarios = ["1", "2", "3", "4", "5", "6", "7"]
const only = new Set((values.only ?? scenarios.join(",")).split(",").map((s) => s.trim()))

const main = async () => {
  const started = Date.now()
  console.log(
    `effect-outbox bench ${JSON.stringify({ ...settings, kafka: process.env.BENCH_KAFKA ?? "kafkajs" })}; load average ${Cpu.loadAverage()}`
  )
  let maxRate: number | undefined
  if (only.has("1")) {
    maxRate = (
      await RelayThroughput.run({
        reps: settings.reps,
        backlog: settings.backlog,
        batchSizes: [10, 100, 500],
        relayCounts: [1, 2, 4]
      })
    ).maxRate
  }
  // Without scenario 1 in this run, a conservative stand-in for its maximum.
  const rate = maxRate ?? 3_000
  if (only.has("2"))
    await Latency.run({
      reps: settings.latencyReps,
      seconds: settings.seconds,
      maxRate: rate,
      measuredMax: maxRate !== undefined
    })
  if (only.has("3")) await WritePath.run({ reps: settings.reps, seconds: settings.seconds, clients: [1, 4, 16] })
  if (only.has("4")) await Consumer.run({ reps: settings.reps, messages: settings.messages })
  if (only.has("5")) await Churn.run({ seconds: settings.churnSeconds, rate: rate / 2 })
  // The log engine on both clients: a backlog written 1,000 events per transaction.
  if (only.has("6"))
    await LogRelayThroughput.run({
      reps: settings.reps,
      backlog: Math.min(settings.backlog, 50_000),
      batchSize: 100,
      perTx: 1_000
    })
  // Key-ordered concurrency inside a partition against one record at a time.
  if (only.has("7")) await KeyConcurrency.run({ reps: settings.reps })
  // Only a full run (every scenario, full settings) replaces the committed record.
  const full = !quick && scenarios.every((scenario) => only.has(scenario))
  const bench = join(dirname(fileURLToPath(import.meta.url)), "..")
  const out = full ? bench : join(bench, "results")
  mkdirSync(out, { recursive: true })
  const md = Report.write(out, { ...settings, maxRate: rate, minutes: (Date.now() - started) / 60_000 })
  const where = full ? "bench" : "bench/results"
  console.log(
    `\n${md}\n\nwritten: ${where}/results.json, ${where}/results.md (${((Date.now() - started) / 60_000).toFixed(1)} min)`
  )
  process.exit(0)
}

main().catch((error) => {
  console.error(error)
  process.exit(1)
})
