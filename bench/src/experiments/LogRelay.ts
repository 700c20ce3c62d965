/**
 * What-if (not part of `pnpm bench`): the log relay draining a backlog of `--backlog`
 * 1 KB events written with `pg_logical_emit_message` (PgLogOutbox), next to raw kafkajs
 * `sendBatch` of 100 (acks=-1, idempotent) with the same records, interleaved in one run (the
 * order alternates per repetition). Needs a wal_level=logical PostgreSQL at LOGICAL_DATABASE_URL
 * (`scripts/services pg-private up`, see docs/log-relay.md) and Kafka at KAFKA_BROKERS.
 *
 *   node bench/src/experiments/LogRelay.ts [--reps 3] [--backlog 20000] [--batch 500] [--per-tx 1000]
 *     [--variants ahead,serial]
 *
 * `--per-tx`: events per writing transaction (a window is whole transactions, so 1000 per
 * transaction makes every window 1000 events whatever `--batch` says). `--variants`: `ahead` is
 * the default relay (reads the next window while the current one is published), `serial` the
 * same with `readAhead: false` (read, publish, confirm, one after the other), both on the default
 * streaming transport (`ahead` sets `PgLogSource`'s `readAhead: true`, off by default there);
 * `sql` and `sql-serial` are the same two on `transport: "sql"` (peek per read).
 */

import { loadavg } from "node:os"
import { PgClient } from "@effect/sql-pg"
import * as KafkaBrokerProbe from "@effect-outbox/adapter-kafka/KafkaBrokerProbe"
import * as KafkaClient from "@effect-outbox/adapter-kafka/KafkaClient"
import * as KafkaPublisher from "@effect-outbox/adapter-kafka/KafkaPublisher"
import * as PgLogOutbox from "@effect-outbox/adapter-pg/PgLogOutbox"
import * as PgLogSource from "@effect-outbox/adapter-pg/PgLogSource"
import * as LogRelay from "@effect-outbox/core/LogRelay"
import * as Outbox from "@effect-outbox/core/Outbox"
import * as Effect from "effect/Effect"
import * as Fiber from "effect/Fiber"
import * as Layer from "effect/Layer"
import type * as LogLevel from "effect/LogLevel"
import * as ManagedRuntime from "effect/ManagedRuntime"
import * as Redacted from "effect/Redacted"
import * as References from "effect/References"
import * as Args from "../Args.ts"
import * as Env from "../Env.ts"
import * as Raw from "../Raw.ts"
import { median } from "../Stats.ts"

const reps = Args.number("reps", 3)
const backlog = Args.number("backlog", 20_000)
const batchSize = Args.number("batch", 500)
const perTx = Args.number("per-tx", 1000)
const variants = Args.list("variants", "ahead")
const logicalUrl = process.env.LOGICAL_DATABASE_URL ?? "postgres://postgres@127.0.0.1:25433/postgres"

const stackFor = (slot: string, transport: "stream" | "sql", readAhead: boolean) => {
  const client = PgClient.layer({ url: Redacted.make(logicalUrl), maxConnections: 4, applicationName: "bench-log" })
  const kafka = KafkaClient.layer({ brokers: Env.brokers, clientId: "bench-log-relay" })
  const broker = Layer.merge(KafkaPublisher.layer(), KafkaBrokerProbe.layer()).pipe(Layer.provide(kafka))
  const logLevel = Layer.succeed(References.MinimumLogLevel)(
    (process.env.BENCH_LOG_LEVEL ?? "Warn") as LogLevel.LogLevel
  )
  return ManagedRuntime.make(
    Layer.mergeAll(
      PgLogOutbox.layer({ slot, transport, readAhead, outbox: { maxRecordBytes: 1_000_000 } }),
      broker,
      logLevel
    ).pipe(Layer.provideMerge(client))
  )
}

const logRun = async (admin: import("kafkajs").Admin, variant: string): Promise<number> => {
  const slot = Env.uniqueName("bench_log").toLowerCase()
  const topic = Env.uniqueName("bench-log")
  await Env.createTopic(admin, topic)
  const runtime = stackFor(slot, variant.startsWith("sql") ? "sql" : "stream", !variant.endsWith("serial"))
  try {
    await runtime.runPromise(
      Effect.gen(function* () {
        for (let i = 0; i < backlog; i += perTx) {
          yield* Outbox.enqueueAutocommit(
            Array.from({ length: Math.min(perTx, backlog - i) }, (_, j) => ({
              topic,
              key: Env.keyOf(i + j),
              payload: Env.payload(i + j)
            }))
          )
        }
      })
    )
    await Env.sleep(500) // every commit flushed and readable before the clock starts
    const started = performance.now()
    const relay = runtime.runFork(LogRelay.run({ batchSize, readAhead: !variant.endsWith("serial") }))
    while ((await Env.topicRecords(admin, topic)) < backlog) await Env.sleep(20)
    const elapsed = performance.now() - started
    await runtime.runPromise(Fiber.interrupt(relay))
    return elapsed
  } finally {
    await runtime.runPromise(PgLogSource.dropSlot({ slot })).catch(() => undefined)
    await runtime.dispose()
    await Env.deleteTopics(admin, [topic])
  }
}

// Deleted at the end: the producer keeps refreshing the metadata of every topic it sent to.
const rawTopics: Array<string> = []
const rawRun = async (admin: import("kafkajs").Admin, producer: import("kafkajs").Producer): Promise<number> => {
  const topic = Env.uniqueName("bench-raw")
  rawTopics.push(topic)
  await Env.createTopic(admin, topic)
  return await Raw.sendBatchLoop(producer, topic, backlog, 100)
}

const main = async () => {
  const k = Env.kafka()
  const admin = k.admin()
  const producer = Env.rawProducer(k)
  await admin.connect()
  await producer.connect()
  const runs: Record<string, Array<number>> = { raw: [], ...Object.fromEntries(variants.map((v) => [v, []])) }
  try {
    for (let rep = 0; rep < reps; rep++) {
      const sides = ["raw", ...variants]
      // Rotate who goes first, so a slow minute does not always hit the same side.
      const order = sides.map((_, i) => sides[(i + rep) % sides.length]!)
      for (const which of order) {
        const ms = which === "raw" ? await rawRun(admin, producer) : await logRun(admin, which)
        runs[which]!.push(backlog / (ms / 1000))
        console.error(
          `rep ${rep} ${which}: ${Math.round(backlog / (ms / 1000))} msg/s (load ${loadavg()[0]!.toFixed(1)})`
        )
      }
    }
  } finally {
    await producer.disconnect()
    await Env.deleteTopics(admin, rawTopics)
    await admin.disconnect()
  }
  const result = {
    backlog,
    perTx,
    logBatch: batchSize,
    rawBatch: 100,
    loadavg: loadavg().map((l) => Number(l.toFixed(1))),
    msgPerSec: Object.fromEntries(Object.entries(runs).map(([k, v]) => [k, Math.round(median(v))])),
    ratioToRaw: Object.fromEntries(variants.map((v) => [v, Number((median(runs[v]!) / median(runs.raw!)).toFixed(2))])),
    runs: Object.fromEntries(Object.entries(runs).map(([k, v]) => [k, v.map(Math.round)]))
  }
  console.log(JSON.stringify(result, null, 2))
}

await main()
