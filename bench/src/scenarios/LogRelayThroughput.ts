/**
 * Scenario 6: the log relay (PgLogOutbox + LogRelay, the streaming transport, the library's
 * defaults but `batchSize`) drains a backlog of 1 KB events written `perTx` per transaction into
 * the event table, on both Kafka adapters, each ÷ the raw client it publishes through: kafkajs
 * `sendBatch` and @platformatic/kafka `send`, both of 100 records (acks=-1, idempotent), the same
 * records. The four sides run in every repetition, the one that goes first rotating, after a
 * warm-up of 5,000 events on each (the backlog, when smaller). Both sides' Kafka clients stay
 * connected across repetitions (the relay's publisher and probe are built once per client; each
 * repetition has its own slot, topic and PostgreSQL stack).
 *
 * Both sides are timed alike, from the start of their first publish call to their last ack (the
 * target row): raw builds its records before its clock, the relay has read and decoded its first
 * window before it. What the relay does before its first publish (lease, progress and quarantine
 * reads, the first read, the first window's probe) is reported as its own row, and so is the rate
 * from the relay's start, with that start-up inside: on a 50,000-event backlog that drains in under
 * a second, a start-up of 50–200 ms would otherwise decide the ratio. Needs a
 * `wal_level = logical` PostgreSQL at LOGICAL_DATABASE_URL (`scripts/services pg-private up`); a
 * run without one skips the scenario with a note.
 */

import { PgClient } from "@effect/sql-pg"
import type { BrokerProbe } from "@effect-outbox/core/BrokerProbe"
import * as LogRelay from "@effect-outbox/core/LogRelay"
import * as Outbox from "@effect-outbox/core/Outbox"
import type { Publisher } from "@effect-outbox/core/Publisher"
import type * as Context from "effect/Context"
import * as Effect from "effect/Effect"
import * as Fiber from "effect/Fiber"
import * as Layer from "effect/Layer"
import * as ManagedRuntime from "effect/ManagedRuntime"
import * as Redacted from "effect/Redacted"
import * as Result from "effect/Result"
import * as SqlClient from "effect/sql/SqlClient"
import type Kafkajs from "kafkajs"
import * as Cpu from "../Cpu.ts"
import * as Env from "../Env.ts"
import * as Raw from "../Raw.ts"
import * as Report from "../Report.ts"
import { median } from "../Stats.ts"
import * as LogStack from "../support/logStack.ts"
import * as PlatformaticRaw from "../support/platformaticRaw.ts"

export interface Options {
  readonly reps: number
  readonly backlog: number
  /** The relay's `batchSize` (its window grows to 8× that while a backlog lasts). */
  readonly batchSize: number
  /** Events per writing transaction. */
  readonly perTx: number
  readonly clients?: ReadonlyArray<Client> | undefined
}

export type Client = "kafkajs" | "platformatic"

interface Sample {
  /** Events per second from the first publish call's start to the last ack (both sides). */
  readonly rate: number
  readonly cpu: Cpu.CpuUse
  /** The relay only: events per second from its start, and ms from its start to its first publish call. */
  readonly fromStart?: number | undefined
  readonly startup?: number | undefined
}

export const target = 0.7

/** Why the logical cluster cannot run the log engine, or `undefined` when it can (nothing is created). */
export const reachable = (): Promise<string | undefined> =>
  Effect.runPromise(
    Effect.gen(function* () {
      const sql = yield* SqlClient.SqlClient
      const [row] = yield* sql<{ level: string }>`SELECT current_setting('wal_level') AS level`
      return row?.level === "logical" ? undefined : `wal_level is ${row?.level} at LOGICAL_DATABASE_URL`
    }).pipe(Effect.provide(PgClient.layer({ url: Redacted.make(LogStack.logicalUrl), maxConnections: 1 })))
  ).catch((error: unknown) => String(error).split("\n")[0])

const fill = (stack: LogStack.Stack, topic: string, n: number, perTx: number) =>
  stack.runtime.runPromise(
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

/**
 * The relay's Kafka side, built once and kept connected; since `clock` was last reset: the start of
 * the first publish call, the end of the latest, and the records acknowledged.
 */
interface Broker {
  readonly context: Context.Context<Publisher | BrokerProbe>
  readonly clock: { first: number | undefined; lastAck: number; acked: number }
  readonly dispose: () => Promise<void>
}

const broker = async (client: Client): Promise<Broker> => {
  const clock: Broker["clock"] = { first: undefined, lastAck: 0, acked: 0 }
  const runtime = ManagedRuntime.make(
    LogStack.brokerLayer(client, (publisher) => ({
      publish: (requests) =>
        Effect.suspend(() => {
          clock.first ??= performance.now()
          return Effect.tap(publisher.publish(requests), (outcomes) =>
            Effect.sync(() => {
              clock.lastAck = performance.now()
              clock.acked += outcomes.filter(Result.isSuccess).length
            })
          )
        })
    }))
  )
  return { context: await runtime.context(), clock, dispose: () => runtime.dispose() }
}

/**
 * One relay drain of a fresh backlog on a fresh slot, once its acks cover every record and the
 * topic holds them (the wait's own delay is left out of the clock, as raw's clock ends at its last
 * ack): events per second from its first publish call to its last ack, and from its start.
 */
const relayRun = async (
  admin: Kafkajs.Admin,
  kafka: Broker,
  kind: Client,
  n: number,
  options: Options,
  topic: string
) => {
  const stack = LogStack.make(4, "stream", undefined, kind, Layer.succeedContext(kafka.context))
  try {
    await stack.runtime.runPromise(LogStack.ready)
    await fill(stack, topic, n, options.perTx)
    await Env.sleep(300) // the last commit flushed and readable before the clock starts
    const before = Cpu.snapshot()
    kafka.clock.first = undefined
    kafka.clock.acked = 0
    const started = performance.now()
    const relay = stack.runtime.runFork(LogRelay.run({ batchSize: options.batchSize }))
    // Wait on the relay's own acks, then check the topic: a broker poll every 20 ms during the
    // drain would cost the relay's process CPU that raw's run does not pay.
    while (kafka.clock.acked < n) await Env.sleep(20)
    while ((await Env.topicRecords(admin, topic)) < n) await Env.sleep(20)
    const cpu = Cpu.between(before, Cpu.snapshot())
    const { first = started, lastAck } = kafka.clock
    await stack.runtime.runPromise(Fiber.interrupt(relay))
    return {
      rate: (n / (lastAck - first)) * 1000,
      cpu,
      fromStart: (n / (lastAck - started)) * 1000,
      startup: first - started
    }
  } finally {
    await stack.close()
  }
}

export const run = async (options: Options): Promise<{ readonly rates: Partial<Record<Client, number>> }> => {
  const clients = options.clients ?? ["kafkajs", "platformatic"]
  console.log(
    `\n## 6. log relay throughput (backlog ${options.backlog}, ${options.perTx} per transaction, batch ${options.batchSize}, ${options.reps} reps)`
  )
  const unreachable = await reachable()
  if (unreachable !== undefined) {
    console.log(
      `  skipped: the log engine needs a wal_level = logical PostgreSQL at LOGICAL_DATABASE_URL (${unreachable})`
    )
    Report.extra("logRelaySkipped", unreachable)
    return { rates: {} }
  }
  const k = Env.kafka()
  const admin = k.admin()
  await admin.connect()
  const kafkajs = Env.rawProducer(k)
  await kafkajs.connect()
  const platformatic = PlatformaticRaw.producer()
  const brokers = new Map<Client, Broker>()
  for (const client of clients) brokers.set(client, await broker(client))
  const topics: Array<string> = []
  const topic = async () => {
    const name = Env.uniqueName("bench-s6")
    await Env.createTopic(admin, name)
    topics.push(name)
    return name
  }
  const raw = async (client: Client, n: number): Promise<Sample> => {
    const t = await topic()
    const before = Cpu.snapshot()
    const ms =
      client === "kafkajs"
        ? await Raw.sendBatchLoop(kafkajs, t, n, 100)
        : await PlatformaticRaw.sendLoop(platformatic, t, n, 100)
    return { rate: (n / ms) * 1000, cpu: Cpu.between(before, Cpu.snapshot()) }
  }
  const sides = clients.flatMap((c) => [`raw ${c}`, `relay ${c}`])
  const samples = new Map<string, Array<Sample>>(sides.map((s) => [s, []]))
  const once = async (side: string, n: number): Promise<Sample> => {
    const [kind, client] = side.split(" ") as ["raw" | "relay", Client]
    return kind === "raw" ? raw(client, n) : relayRun(admin, brokers.get(client)!, client, n, options, await topic())
  }
  try {
    // Warm-up: connect every client and JIT the paths (a relay window of 800 and its 200 too;
    // no more than the backlog, so a smoke run stays small).
    for (const side of sides) await once(side, Math.min(5_000, options.backlog))
    for (let rep = 0; rep < options.reps; rep++) {
      console.log(`  rep ${rep + 1}/${options.reps}`)
      const order = sides.map((_, i) => sides[(i + rep) % sides.length]!)
      for (const side of order) {
        const sample = await once(side, options.backlog)
        samples.get(side)!.push(sample)
        const relayOnly =
          sample.startup === undefined
            ? ""
            : ` (from its start ${Math.round(sample.fromStart!)}/s, first publish after ${Math.round(sample.startup)} ms)`
        console.log(`    ${side}: ${Math.round(sample.rate)}/s${relayOnly}`)
      }
    }
  } finally {
    await Env.deleteTopics(admin, topics)
    await kafkajs.disconnect()
    await platformatic.close()
    for (const b of brokers.values()) await b.dispose()
    await admin.disconnect()
  }
  const rates = (side: string) => samples.get(side)!.map((s) => s.rate)
  const cpu = (side: string) => Report.avgCpu(samples.get(side)!.map((s) => s.cpu))
  for (const client of clients) {
    const row = Report.pair(
      {
        scenario: "6 log relay throughput",
        variant: `${client === "kafkajs" ? "kafkajs" : "@platformatic/kafka"}, batch ${options.batchSize}, ${options.perTx} per transaction`,
        unit: "msg/s",
        baselineName: client === "kafkajs" ? "raw kafkajs sendBatch 100" : "raw @platformatic/kafka send 100",
        target: `≥ ${target}×`,
        cpu: { library: cpu(`relay ${client}`), baseline: cpu(`raw ${client}`) }
      },
      rates(`relay ${client}`),
      rates(`raw ${client}`)
    )
    Report.add({ ...row, met: row.ratio!.median >= target })
    const relay = samples.get(`relay ${client}`)!
    // The same repetitions with the relay's start-up inside its clock (raw's clock unchanged).
    Report.add(
      Report.pair(
        { ...row, variant: `${row.variant}, the relay from its start`, cpu: undefined, target: undefined },
        relay.map((s) => s.fromStart!),
        rates(`raw ${client}`)
      )
    )
    Report.add(
      Report.pair(
        { scenario: row.scenario, variant: `${row.variant}, the relay's start to its first publish`, unit: "ms" },
        relay.map((s) => s.startup!),
        undefined
      )
    )
  }
  // Scenario 7 runs at half of the relay's rate from its start (its sustained rate with start-up costs).
  const fromStart = (client: Client) => samples.get(`relay ${client}`)!.map((s) => s.fromStart!)
  return { rates: Object.fromEntries(clients.map((c) => [c, median(fromStart(c))])) }
}
