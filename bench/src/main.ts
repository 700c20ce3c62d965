/**
 * `pnpm bench` — every scenario against its baseline in the same run, interleaved and repeated.
 *
 *   node bench/src/main.ts [--quick | --smoke] [--reps N] [--latency-reps N] [--backlog N]
 *                          [--seconds N] [--messages N] [--churn-seconds N]
 *                          [--only 1,1p,2,3,4,4a,5,6,7,8] [--kafka kafkajs|platformatic]
 *
 * Scenarios: 1 claim relay throughput (kafkajs), 1p the claim relay on @platformatic/kafka
 * (throughput and 50 % latency), 2 commit → publish latency (kafkajs), 3 write path, 4 consumer
 * (kafkajs, vs the no-dedupe write), 4a the consumer through both adapters vs each raw client's
 * consumer, 5 churn, 6 the log relay's throughput on both clients, 7 the log engine's latency
 * (both clients) and write path (6 and 7 need LOGICAL_DATABASE_URL, else they are skipped).
 *
 * Writes bench/results.json and bench/results.md and prints the table. A full run (all scenarios)
 * writes them in bench/ (the committed record); `--smoke` and `--only` runs write under
 * bench/results/ (untracked), so a partial run never replaces it.
 * `--smoke`: one repetition of tiny sizes, so that every scenario's code path runs once (CI);
 * its figures mean nothing. `--kafka platformatic` puts scenarios 1, 2 and 5's relays on
 * @platformatic/kafka (their baselines stay kafkajs).
 */
import { execFileSync } from "node:child_process"
import { mkdirSync } from "node:fs"
import { dirname, join } from "node:path"
import { fileURLToPath } from "node:url"
import { parseArgs } from "node:util"
import * as Cpu from "./Cpu.ts"
import * as Report from "./Report.ts"
import * as AdapterConsumer from "./scenarios/AdapterConsumer.ts"
import * as Churn from "./scenarios/Churn.ts"
import * as ClaimRelayPlatformatic from "./scenarios/ClaimRelayPlatformatic.ts"
import * as Consumer from "./scenarios/Consumer.ts"
import * as KeyConcurrency from "./scenarios/KeyConcurrency.ts"
import * as Latency from "./scenarios/Latency.ts"
import * as LogEngine from "./scenarios/LogEngine.ts"
import * as LogRelayThroughput from "./scenarios/LogRelayThroughput.ts"
import * as RelayThroughput from "./scenarios/RelayThroughput.ts"
import * as WritePath from "./scenarios/WritePath.ts"

const { values } = parseArgs({
  options: {
    quick: { type: "boolean", default: false },
    smoke: { type: "boolean", default: false },
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

const smoke = values.smoke === true
const quick = values.quick === true && !smoke
/** Full, `--quick` and `--smoke` defaults. */
const pick = <A>(full: A, quickValue: A, smokeValue: A): A => (smoke ? smokeValue : quick ? quickValue : full)
const int = (name: keyof typeof values, fallback: number) => {
  const v = values[name]
  if (typeof v !== "string") return fallback
  const n = Number(v)
  if (!Number.isInteger(n) || n <= 0) {
    console.error(`--${name} wants a positive whole number, got "${v}"`)
    process.exit(2)
  }
  return n
}
const settings = {
  quick,
  smoke,
  reps: int("reps", pick(5, 2, 1)),
  backlog: int("backlog", pick(100_000, 5_000, 200)),
  seconds: int("seconds", pick(10, 2, 1)),
  churnSeconds: int("churn-seconds", pick(600, 10, 4)),
  messages: int("messages", pick(20_000, 1_000, 200)),
  latencyReps: int("latency-reps", int("reps", pick(5, 2, 1)))
}
if (values.kafka !== undefined && values.kafka !== "kafkajs" && values.kafka !== "platformatic") {
  console.error(`--kafka wants kafkajs or platformatic, got "${values.kafka}"`)
  process.exit(2)
}
if (values.kafka !== undefined) process.env.BENCH_KAFKA = values.kafka
/** The write paths' client counts (one suffices for a smoke run's code paths). */
const clients = smoke ? [4] : [1, 4, 16]
const scenarios = ["1", "1p", "2", "3", "4", "4a", "5", "6", "7", "8"]
const only = new Set((values.only ?? scenarios.join(",")).split(",").map((s) => s.trim()))
const unknown = [...only].filter((s) => !scenarios.includes(s))
if (unknown.length > 0) {
  console.error(`--only: no scenario ${unknown.join(", ")} (the scenarios: ${scenarios.join(",")})`)
  process.exit(2)
}

/** The commit the bench runs at (with "+changes" when the tree differs from it), for the record. */
const commit = (): string => {
  try {
    const head = execFileSync("git", ["rev-parse", "--short", "HEAD"], { encoding: "utf8" }).trim()
    const dirty = execFileSync("git", ["status", "--porcelain", "--untracked-files=no"], { encoding: "utf8" }).trim()
    return dirty === "" ? head : `${head}+changes`
  } catch {
    return "unknown"
  }
}

const main = async () => {
  const started = Date.now()
  const loadAtStart = Cpu.loadAverage()
  console.log(
    `effect-outbox bench ${JSON.stringify({ ...settings, kafka: process.env.BENCH_KAFKA ?? "kafkajs" })}; load average ${Cpu.loadAverage()}`
  )
  let maxRate: number | undefined
  if (only.has("1")) {
    maxRate = (
      await RelayThroughput.run({
        reps: settings.reps,
        backlog: settings.backlog,
        batchSizes: smoke ? [100] : [10, 100, 500],
        relayCounts: smoke ? [1, 2] : [1, 2, 4]
      })
    ).maxRate
  }
  if (only.has("1p"))
    await ClaimRelayPlatformatic.run({
      reps: settings.reps,
      backlog: settings.backlog,
      seconds: settings.seconds,
      smoke
    })
  // Without scenario 1 in this run, a conservative stand-in for its maximum.
  const rate = maxRate ?? 3_000
  if (only.has("2"))
    await Latency.run({
      reps: settings.latencyReps,
      seconds: settings.seconds,
      maxRate: rate,
      measuredMax: maxRate !== undefined,
      plan: pick("full", "quick", "smoke")
    })
  if (only.has("3")) await WritePath.run({ reps: settings.reps, seconds: settings.seconds, clients })
  if (only.has("4")) await Consumer.run({ reps: settings.reps, messages: settings.messages })
  if (only.has("4a")) await AdapterConsumer.run({ reps: settings.reps, messages: settings.messages })
  if (only.has("5")) await Churn.run({ seconds: settings.churnSeconds, rate: rate / 2 })
  // The log engine on both clients: a backlog written 1,000 events per transaction.
  const logRates = only.has("6")
    ? await LogRelayThroughput.run({
        reps: settings.reps,
        backlog: Math.min(settings.backlog, 50_000),
        batchSize: 100,
        perTx: 1_000
      })
    : undefined
  if (only.has("7"))
    await LogEngine.run({
      reps: settings.latencyReps,
      seconds: settings.seconds,
      clients,
      maxRates: logRates?.rates,
      smoke
    })
  // Key-ordered concurrency inside a partition against one record at a time.
  if (only.has("8")) await KeyConcurrency.run({ reps: smoke ? 1 : settings.reps, smoke })
  // Only a run of every scenario replaces the committed record (its settings are in its header).
  const full = !smoke && scenarios.every((scenario) => only.has(scenario))
  const bench = join(dirname(fileURLToPath(import.meta.url)), "..")
  const out = full ? bench : join(bench, "results")
  mkdirSync(out, { recursive: true })
  const md = Report.write(out, {
    commit: commit(),
    loadAverageAtStart: loadAtStart,
    ...settings,
    maxRate: rate,
    minutes: (Date.now() - started) / 60_000
  })
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
