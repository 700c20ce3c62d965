/**
 * What-if (not part of `pnpm bench`): the log engine's other targets, each side by side
 * with its baseline in one run, interleaved (the side that goes first alternates). Needs a
 * wal_level=logical PostgreSQL at LOGICAL_DATABASE_URL and Kafka at KAFKA_BROKERS.
 *
 *   node bench/src/experiments/LogTargets.ts latency --max-rate 11000 [--reps 3] [--seconds 5] [--polls 50] [--per-partition] [--platformatic] [--raw-platformatic]
 *     commit → publish p50/p99 at 50 % of `--max-rate` (the log relay's drain rate, from
 *     LogRelay.ts): the log relay on the streaming transport (woken by each commit), and on the
 *     SQL transport polling every `--polls` ms (`--polls ""`: none), vs raw kafkajs produce at
 *     the same rate (scenario 2's sender); all timed to the broker's LogAppendTime.
 *     `--raw-platformatic`: also raw @platformatic/kafka at the same rate (the second adapter's own
 *     client, the same records). The summary gives each side's median of the reps' p99 and the
 *     p99 of every rep's events pooled.
 *     `--process-per-run`: every side's every run in a fresh node process (a 1-second warm-up of
 *     its own first), so no run inherits another's heap, JIT state or live clients.
 *     `--writer-thread`: the log sides' writer on a worker thread (logWriterThread.ts).
 *     `--batch N`: the relay's `batchSize` (default 100; `default`: the library's, 500).
 *     `--synchronous-commit on`: the writers commit with synchronous_commit = on (the private
 *     cluster runs `off`: a commit becomes decodable only when the WAL writer flushes it, every
 *     `wal_writer_delay` = 200 ms, which no transport can beat).
 *   node bench/src/experiments/LogTargets.ts vacuum [--reps 3] [--backlog 20000] [--per-tx 10]
 *     [--client kafkajs|platformatic]
 *     the log relay draining a backlog with VACUUM held back (an idle REPEATABLE READ transaction
 *     holding the xmin horizon, opened before the backlog is written) vs free; the ratio is the
 *     median of the repetitions' held ÷ free.
 *   node bench/src/experiments/LogTargets.ts write [--reps 3] [--seconds 3] [--clients 1,4,16]
 *     the write path: an order-row transaction with `Outbox.enqueue` of one event through
 *     PgLogOutbox (WAL only) vs the same transaction without the event, same pool. The result
 *     names the server's fsync and synchronous_commit: the private cluster's test settings (off)
 *     make the plain commit cheaper than a production server's; `scripts/services pg-private
 *     durability on` gives PostgreSQL's defaults, as the pgbench anchor ran.
 */
import { execFile } from "node:child_process"
import { loadavg } from "node:os"
import { promisify } from "node:util"
import * as LogRelay from "@effect-outbox/core/LogRelay"
import * as Effect from "effect/Effect"
import * as SqlClient from "effect/sql/SqlClient"
import * as Args from "../Args.ts"
import * as Env from "../Env.ts"
import * as Library from "../Library.ts"
import * as Raw from "../Raw.ts"
import { median, quantile } from "../Stats.ts"
import * as LogStack from "../support/logStack.ts"
import * as PlatformaticRaw from "../support/platformaticRaw.ts"
import * as WriterThread from "../support/writerThread.ts"

const reps = Args.number("reps", 3)
const execChild = promisify(execFile)
// `--batch N`: the relay's `batchSize` in the latency runs (default 100; `--batch default`: the library's).
const relayBatch: LogRelay.Settings =
  Args.text("batch", "100") === "default" ? {} : { batchSize: Args.number("batch", 100) }
const load = () => loadavg()[0]!.toFixed(1)

const latencyTopic = async (admin: import("kafkajs").Admin) => {
  const topic = Env.uniqueName("bench-loglat")
  await Env.createTopic(admin, topic, [{ name: "message.timestamp.type", value: "LogAppendTime" }])
  return topic
}

const percentiles = (from: Map<string, number>, appended: Map<string, number>) => {
  const lat = [...from].map(([id, at]) => appended.get(id)! - at)
  return { p50: quantile(lat, 0.5), p99: quantile(lat, 0.99), lat }
}

/** `Env.commitAtRate` on `logWriterThread.ts`: each event's commit time, by id. */
const commitOnWorker = async (data: WriterThread.Data): Promise<Map<string, number>> => {
  const writer = await WriterThread.open(data)
  const committed = new Map<string, number>()
  try {
    await writer.run(({ ids, committedAt }) => {
      for (const id of ids) committed.set(id, committedAt)
    })
    return committed
  } finally {
    await writer.close()
  }
}

/**
 * `--process-per-run`: each side's run in a fresh node process (this script with `--only-side`),
 * so no run inherits another's heap, JIT state or clients; its result read from the child's JSON.
 */
const inChild = async (side: string): Promise<{ p50: number; p99: number; lat: Array<number> }> => {
  const args = process.argv.slice(2).filter((a) => a !== "--process-per-run")
  const { stdout } = await execChild(
    process.execPath,
    [...process.execArgv, process.argv[1]!, ...args, "--only-side", side],
    {
      maxBuffer: 256 * 1024 * 1024
    }
  )
  return JSON.parse(stdout).result
}

const latency = async () => {
  const seconds = Args.number("seconds", 5)
  const rate = Math.round(Args.number("max-rate", 10_000) * 0.5)
  const polls = Args.numbers("polls", "50").filter((p) => p > 0)
  const syncCommit = Args.optional("synchronous-commit") as "on" | "off" | undefined
  const k = Env.kafka()
  const admin = k.admin()
  // A child of `--process-per-run` runs one side: the raw kafkajs producer is opened only for the
  // raw side's child, so a log side's process holds no idle client the other sides do not.
  const only = Args.optional("only-side")
  const opens = (side: string) => only === undefined || only === side
  const producer = opens("raw") ? Env.rawProducer(k) : undefined
  await admin.connect()
  await producer?.connect()
  const topics: Array<string> = []
  // poll undefined: the streaming transport (no poll); else the SQL transport polling every `poll` ms.
  const logRun = async (
    poll: number | undefined,
    secs = seconds,
    client: "kafkajs" | "kafkajs-per-partition" | "kafkajs-worker" | "platformatic" = "kafkajs"
  ) => {
    const topic = await latencyTopic(admin)
    topics.push(topic)
    const stack = LogStack.make(4, poll === undefined ? "stream" : "sql", syncCommit, client)
    try {
      const relay = stack.runtime.runFork(LogRelay.run({ ...relayBatch, pollInterval: `${poll ?? 50} millis` }))
      await Env.sleep(1_000) // the lease taken and the first (empty) window read before the clock starts
      // One event through the whole path to the fresh topic before the clock starts (its metadata and
      // size limit fetched once, as on a relay that has been running), as the raw side does.
      await stack.runtime.runPromise(LogStack.enqueue(topic, 0, 1))
      while ((await Env.topicRecords(admin, topic)) < 1) await Env.sleep(5)
      // Every 10 ms, the events that arrived since are committed in one transaction (scenario 2).
      // `--writer-thread`: the writer on a worker thread (its own event loop and heap), as a service whose
      // relay runs in another process would have it.
      const committed = Args.flag("writer-thread")
        ? await commitOnWorker({ slot: stack.slot, topic, rate, seconds: secs, synchronousCommit: syncCommit })
        : await Env.commitAtRate(rate, secs, (from, n) =>
            stack.runtime.runPromise(LogStack.enqueueCommitted(topic, from, n))
          )
      const appended = await Raw.readTimestamps(k, topic, committed.size + 1)
      stack.runtime.runFork(LogStack.interrupt(relay))
      return percentiles(committed, appended)
    } finally {
      await stack.close()
    }
  }
  // `--raw-platformatic`: also raw @platformatic/kafka at the same rate, the platformatic relay's own client.
  const platformaticRaw =
    Args.flag("raw-platformatic") && opens("raw platformatic") ? PlatformaticRaw.producer() : undefined
  const rawPlatformaticRun = async (secs = seconds) => {
    const topic = await latencyTopic(admin)
    topics.push(topic)
    await platformaticRaw!.send({ messages: [{ topic, key: Buffer.from("warm-up"), value: Buffer.from("warm-up") }] })
    const arrivals = await PlatformaticRaw.produceAtRate(platformaticRaw!, topic, rate, secs)
    return percentiles(arrivals, await Raw.readTimestamps(k, topic, arrivals.size))
  }
  const rawRun = async (secs = seconds) => {
    const topic = await latencyTopic(admin)
    topics.push(topic)
    // The same warm-up as the log side: one record on the fresh topic before the clock starts.
    await producer!.send({ topic, acks: -1, messages: [{ key: "warm-up", value: "warm-up" }] })
    const arrivals = await Raw.produceAtRate(producer!, topic, rate, secs)
    return percentiles(arrivals, await Raw.readTimestamps(k, topic, arrivals.size))
  }
  // `--per-partition`: also the stream relay whose publisher sends one request per partition;
  // `--kafkajs-worker`: also the stream relay with its kafkajs publisher on a worker thread;
  // `--platformatic`: also the stream relay on the @platformatic/kafka adapter.
  const clients = {
    "log stream per-partition": "kafkajs-per-partition",
    "log stream kafkajs worker": "kafkajs-worker",
    "log stream platformatic": "platformatic"
  } as const
  const extra = [
    ...(Args.flag("per-partition") ? ["log stream per-partition" as const] : []),
    ...(Args.flag("kafkajs-worker") ? ["log stream kafkajs worker" as const] : []),
    ...(Args.flag("platformatic") ? ["log stream platformatic" as const] : [])
  ]
  const sides = [
    "raw",
    ...(Args.flag("raw-platformatic") ? ["raw platformatic"] : []),
    "log stream",
    ...extra,
    ...polls.map((p) => `log sql poll ${p} ms`)
  ]
  const runSide = (side: string, secs = seconds) =>
    side === "raw"
      ? rawRun(secs)
      : side === "raw platformatic"
        ? rawPlatformaticRun(secs)
        : side.startsWith("log stream")
          ? logRun(undefined, secs, clients[side as keyof typeof clients] ?? "kafkajs")
          : logRun(Number(side.split(" ")[3]), secs)
  const close = async () => {
    await producer?.disconnect()
    await platformaticRaw?.close()
    await Env.deleteTopics(admin, topics)
    await admin.disconnect()
  }
  // A child of `--process-per-run`: this one side, after a 1-second warm-up of its own.
  if (only !== undefined) {
    const side = only
    await runSide(side, 1)
    const r = await runSide(side)
    await close()
    return { side, ...r }
  }
  const runs = new Map<string, Array<{ p50: number; p99: number; lat: Array<number> }>>(sides.map((s) => [s, []]))
  const perProcess = Args.flag("process-per-run")
  if (!perProcess) {
    await logRun(undefined, 1) // warm-up
    await rawRun(1)
    if (platformaticRaw !== undefined) await rawPlatformaticRun(1)
  }
  for (let rep = 0; rep < reps; rep++) {
    for (const side of sides.map((_, i) => sides[(i + rep) % sides.length]!)) {
      const r = perProcess ? await inChild(side) : await runSide(side)
      runs.get(side)!.push(r)
      console.error(`rep ${rep} ${side} @ ${rate}/s: p50 ${r.p50} p99 ${r.p99} ms (load ${load()})`)
    }
  }
  await close()
  const summary = Object.fromEntries(
    [...runs].map(([side, rs]) => [
      side,
      {
        p50: median(rs.map((r) => r.p50)),
        p99: median(rs.map((r) => r.p99)),
        p99s: rs.map((r) => r.p99),
        pooledP99: quantile(
          rs.flatMap((r) => r.lat),
          0.99
        )
      }
    ])
  )
  return { rate, seconds, synchronousCommit: syncCommit ?? "server default", summary }
}

const vacuum = async () => {
  const backlog = Args.number("backlog", 20_000)
  const perTx = Args.number("per-tx", 10)
  const client = Args.text("client", "kafkajs") as "kafkajs" | "platformatic"
  const k = Env.kafka()
  const admin = k.admin()
  await admin.connect()
  const run = async (held: boolean) => {
    const topic = Env.uniqueName("bench-logvac")
    await Env.createTopic(admin, topic)
    const stack = LogStack.make(4, "stream", undefined, client)
    try {
      await stack.runtime.runPromise(LogStack.ready)
      const release = held ? await LogStack.holdBackVacuum(stack) : async () => undefined
      try {
        for (let i = 0; i < backlog; i += perTx) {
          await stack.runtime.runPromise(LogStack.enqueue(topic, i, Math.min(perTx, backlog - i)))
        }
        await Env.sleep(500)
        const started = performance.now()
        const relay = stack.runtime.runFork(LogRelay.run({ batchSize: 100 }))
        while ((await Env.topicRecords(admin, topic)) < backlog) await Env.sleep(20)
        const ms = performance.now() - started
        await stack.runtime.runPromise(LogStack.interrupt(relay))
        return backlog / (ms / 1000)
      } finally {
        await release()
      }
    } finally {
      await stack.close()
      await Env.deleteTopics(admin, [topic])
    }
  }
  const runs = { free: [] as Array<number>, held: [] as Array<number> }
  for (let rep = 0; rep < reps; rep++) {
    for (const held of rep % 2 === 0 ? [false, true] : [true, false]) {
      const r = await run(held)
      runs[held ? "held" : "free"].push(r)
      console.error(`rep ${rep} ${held ? "held" : "free"}: ${Math.round(r)} msg/s (load ${load()})`)
    }
  }
  await admin.disconnect()
  // Each repetition's pair: held ÷ free, the one that went first alternating.
  const pairs = runs.held.map((h, i) => h / runs.free[i]!)
  return {
    backlog,
    perTx,
    client,
    free: median(runs.free),
    held: median(runs.held),
    ratio: median(pairs),
    ratioRange: [Math.min(...pairs), Math.max(...pairs)],
    runs
  }
}

const write = async () => {
  const seconds = Args.number("seconds", 3)
  const clients = Args.numbers("clients", "1,4,16")
  const stack = LogStack.make(Math.max(...clients))
  const schema = Env.uniqueName("bench_logw").toLowerCase()
  const table = await LogStack.createOrders(stack, schema)
  const server = await LogStack.durability(stack)
  console.error(`write: server ${server}`)
  const tx = (i: number, withEvent: boolean) => Library.businessWriteTx(table, "bench-logw-unpublished", i, withEvent)
  const measure = async (n: number, withEvent: boolean) => {
    let count = 0
    const deadline = performance.now() + seconds * 1000
    const started = performance.now()
    await Promise.all(
      Array.from({ length: n }, async (_, c) => {
        for (let i = c; performance.now() < deadline; i += n, count++) await stack.runtime.runPromise(tx(i, withEvent))
      })
    )
    return (count / (performance.now() - started)) * 1000
  }
  await measure(4, true) // warm-up
  await measure(4, false)
  const rows: Record<number, { plain: Array<number>; log: Array<number> }> = {}
  for (let rep = 0; rep < reps; rep++) {
    for (const n of clients) {
      const row = rows[n] ?? { plain: [], log: [] }
      rows[n] = row
      for (const withEvent of rep % 2 === 0 ? [false, true] : [true, false]) {
        const tps = await measure(n, withEvent)
        row[withEvent ? "log" : "plain"].push(tps)
        console.error(
          `rep ${rep} ${n} clients ${withEvent ? "log enqueue" : "plain"}: ${Math.round(tps)} tx/s (load ${load()})`
        )
      }
    }
  }
  await stack.runtime.runPromise(
    Effect.flatMap(SqlClient.SqlClient, (sql) => sql.unsafe(`DROP SCHEMA ${schema} CASCADE`))
  )
  await stack.close()
  const byClients = Object.entries(rows).map(([n, r]) => [
    n,
    {
      plain: Math.round(median(r.plain)),
      log: Math.round(median(r.log)),
      ratio: median(r.log) / median(r.plain),
      runs: r
    }
  ])
  return { server, ...Object.fromEntries(byClients) }
}

const which = process.argv[2]
const startLoad = loadavg().map((l) => Number(l.toFixed(1)))
const result =
  which === "latency"
    ? await latency()
    : which === "vacuum"
      ? await vacuum()
      : which === "write"
        ? await write()
        : undefined
if (result === undefined) throw new Error("usage: LogTargets.ts latency|vacuum|write [options]")
console.log(
  JSON.stringify(
    { which, loadavgStart: startLoad, loadavgEnd: loadavg().map((l) => Number(l.toFixed(1))), result },
    null,
    // A `--process-per-run` child's answer is read by its parent: one line, not one per latency.
    Args.flag("only-side") ? undefined : 2
  )
)
