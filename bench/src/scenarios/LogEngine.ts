/**
 * Scenarios 2 and 3 on the log engine (`PgLogOutbox` + `LogRelay`, streaming transport), on the
 * wal_level = logical PostgreSQL at LOGICAL_DATABASE_URL (skipped with a note without one, as
 * scenario 6 is):
 * - commit → publish p50/p99 at 50 % of scenario 6's drain rate of each client (a stand-in rate
 *   without it), the relay on kafkajs and on @platformatic/kafka, each ÷ its raw client producing
 *   at the same rate (records queued every 10 ms, one sender); both timed to the broker's
 *   `LogAppendTime`. The writers commit with `synchronous_commit = on`: with `off` a commit is
 *   decodable only at the WAL writer's next flush (up to 200 ms), which no relay can beat.
 * - the write path at 1 / 4 / 16 clients: an order row and `Outbox.enqueue` of one event (one
 *   insert into the event table) ÷ the same SQL by hand (the order row and one plain `INSERT` of
 *   the same encoded record), same pool, interleaved. The server's durability settings are in the
 *   row's note: the private cluster's test defaults skip the WAL flush.
 */
import * as PgTables from "@effect-outbox/adapter-pg/PgTables"
import * as LogRecord from "@effect-outbox/core/LogRecord"
import * as LogRelay from "@effect-outbox/core/LogRelay"
import * as Outbox from "@effect-outbox/core/Outbox"
import type { EventId } from "@effect-outbox/core/OutboxMessage"
import * as Effect from "effect/Effect"
import * as Fiber from "effect/Fiber"
import * as SqlClient from "effect/sql/SqlClient"
import * as Env from "../Env.ts"
import * as Library from "../Library.ts"
import * as Raw from "../Raw.ts"
import * as Report from "../Report.ts"
import { quantile } from "../Stats.ts"
import * as LogStack from "../support/logStack.ts"
import * as PlatformaticRaw from "../support/platformaticRaw.ts"
import * as LogRelayThroughput from "./LogRelayThroughput.ts"

export interface Options {
  readonly reps: number
  readonly seconds: number
  readonly clients: ReadonlyArray<number>
  /** Scenario 6's relay drain rate per client in this run; absent: a stand-in. */
  readonly maxRates?: Partial<Record<LogRelayThroughput.Client, number>> | undefined
  /** No warm-up runs (`pnpm bench --smoke`: each code path once). */
  readonly smoke?: boolean | undefined
}

type Client = LogRelayThroughput.Client
const clientName = (client: Client) => (client === "kafkajs" ? "kafkajs" : "@platformatic/kafka")
const standIn = 4_000

const latencies = (committed: Map<string, number>, appended: Map<string, number>) => {
  const lat = [...committed].map(([id, at]) => {
    const t = appended.get(id)
    if (t === undefined) throw new Error(`event ${id} never reached the topic`)
    return t - at
  })
  return { p50: quantile(lat, 0.5), p99: quantile(lat, 0.99) }
}

const latency = async (options: Options) => {
  const k = Env.kafka()
  const admin = k.admin()
  await admin.connect()
  const kafkajs = Env.rawProducer(k)
  await kafkajs.connect()
  const platformatic = PlatformaticRaw.producer()
  const topics: Array<string> = []
  const topic = async () => {
    const name = Env.uniqueName("bench-s2l")
    await Env.createTopic(admin, name, [{ name: "message.timestamp.type", value: "LogAppendTime" }])
    topics.push(name)
    return name
  }
  const relayRun = async (client: Client, rate: number, seconds: number) => {
    const stack = LogStack.make(4, "stream", "on", client)
    try {
      await stack.runtime.runPromise(LogStack.ready)
      const t = await topic()
      const relay = stack.runtime.runFork(LogRelay.run({ batchSize: 100 }))
      const committed = await Env.commitAtRate(rate, seconds, (from, n) =>
        stack.runtime.runPromise(LogStack.enqueueCommitted(t, from, n))
      )
      const appended = await Raw.readTimestamps(k, t, committed.size)
      await stack.runtime.runPromise(Fiber.interrupt(relay))
      return latencies(committed, appended)
    } finally {
      await stack.close()
    }
  }
  const rawRun = async (client: Client, rate: number, seconds: number) => {
    const t = await topic()
    const arrivals =
      client === "kafkajs"
        ? await Raw.produceAtRate(kafkajs, t, rate, seconds)
        : await PlatformaticRaw.produceAtRate(platformatic, t, rate, seconds)
    return latencies(arrivals, await Raw.readTimestamps(k, t, arrivals.size))
  }
  try {
    for (const client of ["kafkajs", "platformatic"] as const) {
      const rate = Math.max(10, Math.round((options.maxRates?.[client] ?? standIn) / 2))
      // Warm-up: the client connected and the paths JIT-ed once.
      if (!options.smoke) {
        await rawRun(client, rate, 1)
        await relayRun(client, rate, 1)
      }
      const lib: Array<{ p50: number; p99: number }> = []
      const raw: Array<{ p50: number; p99: number }> = []
      for (let rep = 0; rep < options.reps; rep++) {
        if (rep % 2 === 0) raw.push(await rawRun(client, rate, options.seconds))
        lib.push(await relayRun(client, rate, options.seconds))
        if (rep % 2 === 1) raw.push(await rawRun(client, rate, options.seconds))
        console.log(
          `    ${clientName(client)} ${rate}/s: relay p50 ${lib.at(-1)!.p50.toFixed(1)} p99 ${lib.at(-1)!.p99.toFixed(1)} ms; raw p50 ${raw.at(-1)!.p50.toFixed(1)} p99 ${raw.at(-1)!.p99.toFixed(1)} ms`
        )
      }
      const base = {
        variant: `log relay, 50% (${rate}/s${options.maxRates?.[client] === undefined ? " of a stand-in rate" : ""}), ${clientName(client)}`,
        unit: "ms",
        baselineName: `raw ${clientName(client)} produce`
      }
      const p50 = lib.map((l) => l.p50)
      Report.add(
        Report.pair(
          { ...base, scenario: "2 latency p50" },
          p50,
          raw.map((l) => l.p50),
          "difference"
        )
      )
      const p99 = Report.pair(
        { ...base, scenario: "2 latency p99", target: "≤ raw p99 + 10 ms" },
        lib.map((l) => l.p99),
        raw.map((l) => l.p99),
        "difference"
      )
      Report.add({ ...p99, met: p99.ratio!.median <= 10 })
    }
  } finally {
    await Env.deleteTopics(admin, topics)
    await kafkajs.disconnect()
    await platformatic.close()
    await admin.disconnect()
  }
}

/** The hand-written side: the order row and one `INSERT` of the encoded record, one transaction. */
const handWrite = (logEvent: string, orders: string, topic: string, i: number) =>
  Effect.gen(function* () {
    const sql = yield* SqlClient.SqlClient
    const id = Env.newEventIdV7() as EventId
    const record = LogRecord.encode({
      id,
      topic,
      key: Env.keyOf(i),
      partition: null,
      headers: { "event-id": id },
      payload: Env.payload(i),
      createdAt: Date.now()
    })
    yield* sql.withTransaction(
      Effect.andThen(
        Library.insertOrder(orders, Env.newEventId(), i),
        sql.unsafe(`INSERT INTO ${logEvent} (id, record) VALUES ($1::uuid, $2::bytea)`, [id, record])
      )
    )
  })

const libraryWrite = (orders: string, topic: string, i: number) =>
  Outbox.withTransaction(
    Effect.andThen(Library.insertOrder(orders, Env.newEventId(), i), Outbox.enqueue(Library.draft(topic, i)))
  )

const writePath = async (options: Options) => {
  const maxClients = Math.max(...options.clients)
  const stack = LogStack.make(maxClients, "stream")
  const schema = Env.uniqueName("bench_s3l")
  try {
    await stack.runtime.runPromise(LogStack.ready)
    const orders = await LogStack.createOrders(stack, schema)
    const { logEvent } = await stack.runtime.runPromise(PgTables.make({}))
    const durability = await LogStack.durability(stack)
    const topic = "bench-s3l-unpublished"
    const measure = async (clients: number, hand: boolean) => {
      let count = 0
      const deadline = performance.now() + options.seconds * 1000
      const started = performance.now()
      await Promise.all(
        Array.from({ length: clients }, async (_, c) => {
          for (let i = c; performance.now() < deadline; i += clients, count++) {
            await stack.runtime.runPromise(
              hand ? handWrite(logEvent, orders, topic, i) : libraryWrite(orders, topic, i)
            )
          }
        })
      )
      return (count / (performance.now() - started)) * 1000
    }
    if (!options.smoke) {
      await measure(4, false)
      await measure(4, true)
    }
    for (const clients of options.clients) {
      const lib: Array<number> = []
      const hand: Array<number> = []
      for (let rep = 0; rep < options.reps; rep++) {
        if (rep % 2 === 0) hand.push(await measure(clients, true))
        lib.push(await measure(clients, false))
        if (rep % 2 === 1) hand.push(await measure(clients, true))
      }
      console.log(
        `    log engine, ${clients} clients: library ${Math.round(lib.at(-1)!)} tx/s, by hand ${Math.round(hand.at(-1)!)} tx/s`
      )
      const row = Report.pair(
        {
          scenario: "3 write path",
          variant: `log engine, ${clients} client${clients > 1 ? "s" : ""}, vs same SQL by hand`,
          note: durability,
          unit: "tx/s",
          baselineName: "same SQL by hand, same client",
          target: "≥ 0.9×"
        },
        lib,
        hand
      )
      Report.add({ ...row, met: row.ratio!.median >= 0.9 })
    }
    await stack.runtime.runPromise(
      Effect.flatMap(SqlClient.SqlClient, (sql) => sql.unsafe(`DROP SCHEMA IF EXISTS ${schema} CASCADE`))
    )
  } finally {
    await stack.close()
  }
}

export const run = async (options: Options): Promise<void> => {
  console.log(`\n## 2/3. the log engine: latency at 50 % and the write path (${options.reps} reps)`)
  const unreachable = await LogRelayThroughput.reachable()
  if (unreachable !== undefined) {
    console.log(
      `  skipped: the log engine needs a wal_level = logical PostgreSQL at LOGICAL_DATABASE_URL (${unreachable})`
    )
    Report.extra("logEngineSkipped", unreachable)
    return
  }
  await latency(options)
  await writePath(options)
}
