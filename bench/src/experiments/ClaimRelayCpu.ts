/**
 * The claim relay's own node CPU per event: scenario 1's drain (one relay, batch 100, 1 KB
 * payloads, 1000 keys) measured by this process's CPU time (`process.cpuUsage`) over the drain
 * only, not the fill. `--profile <dir>`: a V8 CPU profile of each drain, for
 * `bench/src/experiments/cpuProfileSummary.ts`. `--depth n`: the relay's pipeline depth; `--sink none`:
 * claim and mark only, no broker.
 *
 *   node bench/src/experiments/ClaimRelayCpu.ts [--reps 3] [--backlog 20000] [--depth 2] [--sink none] [--profile /tmp/dir]
 */
import { loadavg } from "node:os"
import * as Args from "../Args.ts"
import * as Env from "../Env.ts"
import * as Library from "../Library.ts"
import * as Profile from "../Profile.ts"
import { median } from "../Stats.ts"

const reps = Args.number("reps", 3)
const backlog = Args.number("backlog", 20_000)
const depth = Args.optional("depth")
const profileDir = Args.optional("profile")
// `--sink none`: claim and mark only (every record gets a receipt at once), no broker.
const sink = Args.text("sink", "kafka") as Library.Sink

const profiler = await Profile.make(profileDir)

const schema = Env.uniqueName("bench_s1cpu")
const k = Env.kafka()
const admin = k.admin()
await admin.connect()
const watcher = await Library.makeStack({ schema, pgConnections: 2 })
const stack = await Library.makeStack({ schema, pgConnections: 3, sink })
const topics: Array<string> = []
const settings = {
  batchSize: 100,
  pollMillis: 50,
  ...(depth === undefined ? {} : { pipelineDepth: Number(depth) })
}

const drain = async (n: number, label?: string) => {
  const topic = Env.uniqueName("bench-s1cpu")
  await Env.createTopic(admin, topic)
  topics.push(topic)
  await Library.truncate(watcher)
  await Library.fillBacklog(watcher, topic, n)
  const profile = Library.emptyProfile()
  if (label !== undefined) await profiler.start()
  const cpu0 = Profile.cpuMicros()
  const started = performance.now()
  const stop = await Library.startRelay(stack, settings, profile)
  while (!(await Library.drained(watcher))) await Env.sleep(50)
  const cpu = Profile.cpuMicros() - cpu0
  if (label !== undefined) await profiler.stop(`relay-${label}`)
  await stop()
  return { rate: (n / (profile.lastMarkAt - started)) * 1000, cpuPerEvent: cpu / n }
}

await drain(5_000)
const samples: Array<{ rate: number; cpuPerEvent: number }> = []
for (let rep = 0; rep < reps; rep++) {
  const s = await drain(backlog, String(rep + 1))
  samples.push(s)
  console.log(
    `rep ${rep + 1}: ${Math.round(s.rate)} msg/s, node ${s.cpuPerEvent.toFixed(1)} µs/event, load ${loadavg()[0]!.toFixed(2)}`
  )
}
console.log(
  `median: ${Math.round(median(samples.map((s) => s.rate)))} msg/s, node ${median(samples.map((s) => s.cpuPerEvent)).toFixed(1)} µs/event`
)
await Env.deleteTopics(admin, topics)
await admin.disconnect()
await stack.dispose()
await Library.dropSchema(watcher)
await watcher.dispose()
process.exit(0)
