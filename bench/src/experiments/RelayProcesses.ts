/**
 * What-if (not part of `pnpm bench`): do more claim relays drain a backlog faster, and is the
 * limit the relays' process or the table? The same backlog of 1 KB rows (1000 keys) is drained,
 * in interleaved rounds, by
 *   1 relay         one relay in one child process;
 *   2 processes     two relays, each in a child process of its own;
 *   2 in 1 process  two relays in one child process (as scenario 1 runs them);
 * batch 100, with the CPU of each group over the drain (the children's node, PostgreSQL, Kafka;
 * the machine's load average beside it).
 *
 *   node bench/src/experiments/RelayProcesses.ts [--backlog 20000] [--reps 3] [--sink kafka|none]
 */
import { spawn } from "node:child_process"
import { createInterface } from "node:readline"
import * as Args from "../Args.ts"
import * as Cpu from "../Cpu.ts"
import * as Env from "../Env.ts"
import * as Library from "../Library.ts"
import { median } from "../Stats.ts"

const sink = Args.text("sink", "kafka") as Library.Sink

// A child: builds its relays' stacks, says "ready", starts them on "go", stops them on "stop" and
// reports its CPU seconds.
if (Args.flag("child")) {
  const schema = Args.text("schema", "")
  const relays = Args.number("relays", 1)
  const stacks: Array<Library.Stack> = []
  for (let i = 0; i < relays; i++) stacks.push(await Library.makeStack({ schema, pgConnections: 3, sink }))
  const lines = createInterface({ input: process.stdin })
  let stops: Array<() => Promise<void>> = []
  let cpu0 = process.cpuUsage()
  console.log("ready")
  for await (const line of lines) {
    if (line === "go") {
      cpu0 = process.cpuUsage()
      stops = await Promise.all(stacks.map((s) => Library.startRelay(s, { batchSize: 100, pollMillis: 50 })))
    } else if (line === "stop") {
      const used = process.cpuUsage(cpu0)
      await Promise.all(stops.map((stop) => stop()))
      console.log(`cpu ${(used.user + used.system) / 1e6}`)
    } else if (line === "exit") break
  }
  for (const s of stacks) await s.dispose()
  process.exit(0)
}

interface Child {
  readonly send: (line: string) => void
  readonly next: () => Promise<string>
}

const child = (schema: string, relays: number): Promise<Child> => {
  const proc = spawn(
    process.execPath,
    [import.meta.filename, "--child", "--schema", schema, "--relays", String(relays), "--sink", sink],
    { stdio: ["pipe", "pipe", "inherit"] }
  )
  const queue: Array<string> = []
  const waiting: Array<(line: string) => void> = []
  createInterface({ input: proc.stdout! }).on("line", (line) => {
    if (!/^(ready|cpu )/.test(line)) return
    const w = waiting.shift()
    if (w) w(line)
    else queue.push(line)
  })
  const next = () =>
    new Promise<string>((resolve) => (queue.length > 0 ? resolve(queue.shift()!) : waiting.push(resolve)))
  return next().then(() => ({ send: (line) => proc.stdin!.write(`${line}\n`), next }))
}

const BACKLOG = Args.number("backlog", 20_000)
const REPS = Args.number("reps", 3)
// A drain that never finishes (rows parked in FAILURE) fails the run instead of hanging it.
const DRAIN_SECONDS = Args.number("drain-seconds", 300)
const schema = Env.uniqueName("bench_relayproc")
const watcher = await Library.makeStack({ schema, pgConnections: 2, sink: "none", wake: "poll" })
const admin = Env.kafka().admin()
await admin.connect()
const topics: Array<string> = []
const layouts = { "1 relay": [1], "2 processes": [1, 1], "2 in 1 process": [2] } as const
const children = new Map<string, Array<Child>>()
for (const [name, layout] of Object.entries(layouts)) {
  children.set(name, await Promise.all(layout.map((n) => child(schema, n))))
}

const results = new Map<string, Array<{ rate: number; node: number; postgres: number; kafka: number; load: number }>>()
const round = async (name: string) => {
  const group = children.get(name)!
  await Library.truncate(watcher)
  const topic = Env.uniqueName("bench-relayproc")
  if (sink === "kafka") {
    await Env.createTopic(admin, topic)
    topics.push(topic)
  }
  await Library.fillBacklog(watcher, topic, BACKLOG)
  const before = Cpu.snapshot()
  for (const c of group) c.send("go")
  while (!(await Library.drained(watcher))) {
    if ((performance.now() - before.at) / 1000 > DRAIN_SECONDS)
      throw new Error(`${name}: not drained in ${DRAIN_SECONDS} s`)
    await Env.sleep(50)
  }
  const after = Cpu.snapshot()
  for (const c of group) c.send("stop")
  const failed = (await Library.statusCounts(watcher)).FAILURE ?? 0
  if (failed > 0) throw new Error(`${name}: ${failed} rows FAILURE`)
  const nodeSeconds = (await Promise.all(group.map((c) => c.next()))).reduce((a, l) => a + Number(l.slice(4)), 0)
  const seconds = (after.at - before.at) / 1000
  const use = Cpu.between(before, after)
  const sample = {
    rate: Math.round(BACKLOG / seconds),
    node: Math.round((nodeSeconds / seconds) * 100),
    postgres: Math.round(use.postgres * 100),
    kafka: Math.round(use.kafka * 100),
    load: Cpu.loadAverage()
  }
  results.set(name, [...(results.get(name) ?? []), sample])
  console.log(`  ${name}: ${JSON.stringify(sample)}`)
}

console.log(`relay processes: backlog ${BACKLOG}, ${REPS} reps, sink ${sink}, load ${Cpu.loadAverage()}`)
const names = Object.keys(layouts)
for (let rep = 0; rep < REPS; rep++) {
  const order = rep % 2 === 0 ? names : [...names].reverse()
  for (const name of order) await round(name)
}
const one = results.get("1 relay")!
for (const name of names) {
  const xs = results.get(name)!
  const ratios = xs.map((x, i) => x.rate / one[i]!.rate)
  console.log(
    `${name}: ${median(xs.map((x) => x.rate))} msg/s (${xs.map((x) => x.rate).join(" / ")}), ÷ 1 relay ×${median(ratios).toFixed(2)} ` +
      `(${ratios.map((r) => r.toFixed(2)).join(" / ")}); CPU % node ${median(xs.map((x) => x.node))}, ` +
      `postgres ${median(xs.map((x) => x.postgres))}, kafka ${median(xs.map((x) => x.kafka))}`
  )
}
for (const group of children.values()) for (const c of group) c.send("exit")
await Env.deleteTopics(admin, topics)
await admin.disconnect()
await Library.dropSchema(watcher)
await watcher.dispose()
process.exit(0)
