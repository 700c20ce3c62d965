/**
 * What-if (not part of `pnpm bench`): why two claim relays do not drain a backlog faster than
 * one. One relay and two relays (in this process) drain the same backlog in alternating rounds,
 * and for each drain it records
 *   - the CPU of this node process, PostgreSQL and Kafka (share of one core), and the machine's
 *     total from /proc/stat (200 % = both cores busy);
 *   - how busy this process's event loop was (its one JavaScript thread serves every relay);
 *   - each relay's batches, rows per claim and time per stage;
 *   - the index scans on the outbox table per row drained (each per-key probe is one);
 *   - `pg_stat_activity` sampled every 10 ms by a `psql` beside it: the relay backends' state,
 *     wait event and statement.
 *
 *   node bench/src/experiments/ClaimContention.ts [--backlog 20000] [--reps 2] [--modes 1,2,4,1x4] [--sample]
 *
 * A mode is a relay count, optionally `x` a pipeline depth (`1x4`: one relay, 4 batches in flight).
 */
import { spawn } from "node:child_process"
import { closeSync, openSync, readFileSync } from "node:fs"
import * as Args from "../Args.ts"
import * as Cpu from "../Cpu.ts"
import * as Env from "../Env.ts"
import * as Library from "../Library.ts"

const backlog = Args.number("backlog", 20_000)
const reps = Args.number("reps", 2)
const sample = Args.flag("sample")

const machine = () => {
  const f = readFileSync("/proc/stat", "utf8").split("\n")[0]!.trim().split(/\s+/).slice(1).map(Number)
  const idle = f[3]! + f[4]!
  const total = f.reduce((a, b) => a + b, 0)
  return { idle, total }
}

const indexScans = (stack: Library.Stack) =>
  stack.run(
    Library.Effect.gen(function* () {
      const sql = yield* Library.SqlClient.SqlClient
      const rows = yield* sql.unsafe<{ name: string; scans: string; fetched: string }>(
        `SELECT indexrelname AS name, idx_scan::text AS scans, idx_tup_fetch::text AS fetched
           FROM pg_stat_user_indexes WHERE schemaname = '${stack.schema}' AND relname = 'outbox_message'`
      )
      return new Map(rows.map((r) => [r.name, { scans: Number(r.scans), fetched: Number(r.fetched) }]))
    })
  )

const walStats = (stack: Library.Stack) =>
  stack.run(
    Library.Effect.gen(function* () {
      const sql = yield* Library.SqlClient.SqlClient
      const rows = yield* sql.unsafe<{ bytes: string; syncs: string; writes: string; fpi: string }>(
        `SELECT wal_bytes::text AS bytes, wal_sync::text AS syncs, wal_write::text AS writes, wal_fpi::text AS fpi FROM pg_stat_wal`
      )
      const r = rows[0]!
      return { bytes: Number(r.bytes), syncs: Number(r.syncs), writes: Number(r.writes), fpi: Number(r.fpi) }
    })
  )

const sampler = (schema: string, file: string) => {
  const query = `SELECT coalesce(wait_event_type,'CPU') || '|' || coalesce(wait_event,'-') || '|' || state || '|' ||
      left(regexp_replace(query, '\\s+', ' ', 'g'), 70)
    FROM pg_stat_activity
   WHERE backend_type = 'client backend' AND pid <> pg_backend_pid() AND state <> 'idle'
     AND query LIKE '%${schema}%'`
  const out = openSync(file, "w")
  const proc = spawn("psql", [Env.databaseUrl, "-At"], { stdio: ["pipe", out, out] })
  proc.stdin?.write(`${query.replace(/\n/g, " ")} \\watch 0.01\n`)
  return () => {
    proc.kill("SIGTERM")
    closeSync(out)
  }
}

const schema = Env.uniqueName("bench_cc")
const k = Env.kafka()
const admin = k.admin()
await admin.connect()
const watcher = await Library.makeStack({ schema, pgConnections: 2 })
const relays: Array<Library.Stack> = []
for (let i = 0; i < 4; i++) relays.push(await Library.makeStack({ schema, pgConnections: 3 }))
const topics: Array<string> = []
const topic = async () => {
  const name = Env.uniqueName("bench-cc")
  await Env.createTopic(admin, name)
  topics.push(name)
  return name
}

const drain = async (mode: string, label: string) => {
  // "2": two relays at the default pipeline depth; "1x4": one relay with 4 batches in flight.
  const [count, depth] = mode.split("x").map(Number) as [number, number | undefined]
  const t = await topic()
  await Library.truncate(watcher)
  await Library.fillBacklog(watcher, t, backlog)
  const scans0 = await indexScans(watcher)
  const wal0 = await walStats(watcher)
  const file = `/tmp/tworelays-activity-${label}.txt`
  const stopSampler = label.startsWith("warm") || !sample ? () => undefined : sampler(schema, file)
  await Env.sleep(300)
  const profiles = relays.slice(0, count).map(() => Library.emptyProfile())
  const m0 = machine()
  const cpu0 = Cpu.snapshot()
  const elu0 = performance.eventLoopUtilization()
  const started = performance.now()
  const stops = await Promise.all(
    relays
      .slice(0, count)
      .map((s, i) =>
        Library.startRelay(
          s,
          { batchSize: 100, pollMillis: 50, ...(depth === undefined ? {} : { pipelineDepth: depth }) },
          profiles[i]
        )
      )
  )
  while (!(await Library.drained(watcher))) await Env.sleep(20)
  const end = Math.max(...profiles.map((p) => p.lastMarkAt))
  const cpu = Cpu.between(cpu0, Cpu.snapshot())
  const elu = performance.eventLoopUtilization(elu0)
  const m1 = machine()
  await Promise.all(stops.map((stop) => stop()))
  stopSampler()
  await Env.sleep(2500) // backends flush their statistics when idle
  const scans1 = await indexScans(watcher)
  const wal1 = await walStats(watcher)
  const elapsed = end - started
  const busy = 1 - (m1.idle - m0.idle) / (m1.total - m0.total)
  const pct = (x: number) => `${Math.round(x * 100)}%`
  console.log(
    `\n### ${label}: ${mode} relay(s) ${Math.round((backlog / elapsed) * 1000)} msg/s (${Math.round(elapsed)} ms), machine ${pct(busy * 2)} of 200%, node ${pct(cpu.node)} pg ${pct(cpu.postgres)} kafka ${pct(cpu.kafka)}, node's event loop busy ${pct(elu.utilization)}, load ${Cpu.loadAverage()}`
  )
  for (const [i, p] of profiles.entries()) {
    console.log(
      `  relay ${i}: ${p.batches} batches, ${(p.rows / p.batches).toFixed(1)} rows/claim, per batch claim ${(p.claim / p.batches).toFixed(1)} publish ${(p.publish / p.batches).toFixed(1)} mark ${(p.mark / p.batches).toFixed(1)} ms`
    )
  }
  const batches = profiles.reduce((a, p) => a + p.batches, 0)
  console.log(
    `  WAL (whole server): ${((wal1.bytes - wal0.bytes) / backlog / 1024).toFixed(2)} KB/row, ${wal1.syncs - wal0.syncs} syncs (${((wal1.syncs - wal0.syncs) / batches).toFixed(2)} per batch), ${wal1.writes - wal0.writes} writes, ${wal1.fpi - wal0.fpi} full-page images`
  )
  for (const [name, s] of scans1) {
    const a = scans0.get(name) ?? { scans: 0, fetched: 0 }
    console.log(
      `  index ${name}: ${((s.scans - a.scans) / backlog).toFixed(2)} scans/row, ${((s.fetched - a.fetched) / backlog).toFixed(2)} fetched/row`
    )
  }
  if (!label.startsWith("warm") && sample) {
    await Env.sleep(200)
    const lines = readFileSync(file, "utf8")
      .split("\n")
      .filter((l) => l.includes("|"))
    const counts = new Map<string, number>()
    for (const l of lines) {
      const [type, event, state, q] = l.split("|")
      const stmt = /claim|UPDATE|SELECT|COMMIT|BEGIN/i.exec(q ?? "")?.[0] ?? "?"
      const key = `${type}:${event} ${state} ${(q ?? "").includes("claim") ? "claim" : stmt}`
      counts.set(key, (counts.get(key) ?? 0) + 1)
    }
    console.log(`  pg_stat_activity: ${lines.length} backend samples`)
    for (const [key, n] of [...counts].sort((a, b) => b[1] - a[1]).slice(0, 12)) console.log(`    ${n}\t${key}`)
  }
}

const modes = Args.list("modes", "1,2")
for (const mode of modes) await drain(mode, `warm-${mode}`)
for (let rep = 0; rep < reps; rep++) {
  // The order of the modes rotates per repetition so drift in machine load hits each alike.
  for (let j = 0; j < modes.length; j++) {
    const mode = modes[(j + rep) % modes.length]!
    await drain(mode, `r${rep}-${mode}`)
  }
}
await Env.deleteTopics(admin, topics)
await admin.disconnect()
for (const s of relays) await s.dispose()
await Library.dropSchema(watcher)
await watcher.dispose()
process.exit(0)
