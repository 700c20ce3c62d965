/**
 * CPU time per process group while a measurement runs: this node process (process.cpuUsage),
 * the PostgreSQL server (postmaster + live backends, plus the CPU of backends that exited, which
 * the kernel adds to the postmaster's cutime/cstime) and the Kafka JVM (the pid in
 * ~/.cache/effect-outbox/run/kafka.pid and its descendants). The machine is shared, so postgres
 * and Kafka figures include whatever else used them during the window.
 */
import { execFileSync } from "node:child_process"
import { existsSync, readdirSync, readFileSync } from "node:fs"
import { homedir } from "node:os"
import { join } from "node:path"

const ticksPerSecond = (() => {
  try {
    return Number(execFileSync("getconf", ["CLK_TCK"]).toString().trim()) || 100
  } catch {
    return 100
  }
})()

interface ProcStat {
  readonly pid: number
  readonly comm: string
  readonly ppid: number
  readonly self: number
  readonly children: number
}

const readStat = (pid: number): ProcStat | undefined => {
  try {
    const text = readFileSync(`/proc/${pid}/stat`, "utf8")
    const close = text.lastIndexOf(")")
    const comm = text.slice(text.indexOf("(") + 1, close)
    // Fields after the comm: state(3) ppid(4) ... utime(14) stime(15) cutime(16) cstime(17).
    const rest = text.slice(close + 2).split(" ")
    const f = (n: number) => Number(rest[n - 3])
    return { pid, comm, ppid: f(4), self: f(14) + f(15), children: f(16) + f(17) }
  } catch {
    return undefined
  }
}

const allStats = (): Array<ProcStat> => {
  const out: Array<ProcStat> = []
  for (const name of readdirSync("/proc")) {
    if (!/^\d+$/.test(name)) continue
    const s = readStat(Number(name))
    if (s !== undefined) out.push(s)
  }
  return out
}

const kafkaRootPid = (): number | undefined => {
  const file = join(process.env.EFFECT_OUTBOX_STATE ?? join(homedir(), ".cache", "effect-outbox", "run"), "kafka.pid")
  if (!existsSync(file)) return undefined
  const pid = Number(readFileSync(file, "utf8").trim())
  return Number.isFinite(pid) ? pid : undefined
}

/** CPU seconds consumed so far, per group. */
export interface CpuSnapshot {
  readonly at: number
  readonly node: number
  readonly postgres: number
  readonly kafka: number
}

export const snapshot = (): CpuSnapshot => {
  const stats = allStats()
  const byPid = new Map(stats.map((s) => [s.pid, s]))
  // postgres: every process named postgres; the postmaster (parent not postgres) also carries the
  // CPU of its exited children.
  let pgTicks = 0
  for (const s of stats) {
    if (s.comm !== "postgres") continue
    pgTicks += s.self
    if (byPid.get(s.ppid)?.comm !== "postgres") pgTicks += s.children
  }
  // kafka: the recorded pid and all its descendants.
  let kafkaTicks = 0
  const root = kafkaRootPid()
  if (root !== undefined) {
    const children = new Map<number, Array<ProcStat>>()
    for (const s of stats) children.set(s.ppid, [...(children.get(s.ppid) ?? []), s])
    const queue = [root]
    while (queue.length > 0) {
      const pid = queue.pop()!
      const s = byPid.get(pid)
      if (s !== undefined) kafkaTicks += s.self
      for (const c of children.get(pid) ?? []) queue.push(c.pid)
    }
  }
  const usage = process.cpuUsage()
  return {
    at: performance.now(),
    node: (usage.user + usage.system) / 1e6,
    postgres: pgTicks / ticksPerSecond,
    kafka: kafkaTicks / ticksPerSecond
  }
}

/** CPU used between two snapshots, as a share of one core (1.0 = one core busy the whole time). */
export interface CpuUse {
  readonly node: number
  readonly postgres: number
  readonly kafka: number
}

export const between = (a: CpuSnapshot, b: CpuSnapshot): CpuUse => {
  const seconds = Math.max(1e-9, (b.at - a.at) / 1000)
  return {
    node: (b.node - a.node) / seconds,
    postgres: (b.postgres - a.postgres) / seconds,
    kafka: (b.kafka - a.kafka) / seconds
  }
}

export const fmtCpu = (c: CpuUse | undefined): string =>
  c === undefined
    ? ""
    : `node ${Math.round(c.node * 100)}% · pg ${Math.round(c.postgres * 100)}% · kafka ${Math.round(c.kafka * 100)}%`

/** The load of the whole machine (1-minute average), recorded to show how noisy a run was. */
export const loadAverage = (): number => {
  try {
    return Number(readFileSync("/proc/loadavg", "utf8").split(" ")[0])
  } catch {
    return Number.NaN
  }
}
