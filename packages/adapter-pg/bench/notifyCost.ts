// What NOTIFY costs writers: enqueue transactions per second with and without the wake-up's
// NOTIFY, at several writer concurrencies, against the real PostgreSQL, with one relay LISTENing.
//
//   DATABASE_URL=postgres://postgres@127.0.0.1:5432/postgres node packages/adapter-pg/bench/notifyCost.ts
//
// Each transaction (through PgTransactor) inserts one outbox row (as `Outbox.enqueue` does) and
// calls the wake-up: none, the default coalesced NOTIFY after commit, or a NOTIFY in the
// transaction (own statement, or folded into the insert). Modes are interleaved over NOTIFY_BENCH_ROUNDS rounds (default 5) of
// NOTIFY_BENCH_TRANSACTIONS transactions (default 1500); prints medians as a table and a JSON line.
// NOTIFY_BENCH_WRITERS (default 1,4,16), NOTIFY_BENCH_INTERVAL_MS (the after-commit coalescing
// interval, default 50), NOTIFY_BENCH_VERBOSE=1 (every measurement with its notification count).

import { randomUUID } from "node:crypto"
import { PgClient } from "@effect/sql-pg"
import type { EventId } from "@effect-outbox/core/OutboxMessage"
import { OutboxStore } from "@effect-outbox/core/OutboxStore"
import { WakeUp } from "@effect-outbox/core/WakeUp"
import * as Effect from "effect/Effect"
import * as Queue from "effect/Queue"
import * as Redacted from "effect/Redacted"
import * as SqlClient from "effect/sql/SqlClient"
import * as PgMigrations from "../src/PgMigrations.ts"
import * as PgOutboxStore from "../src/PgOutboxStore.ts"
import * as PgTables from "../src/PgTables.ts"
import * as PgTransactor from "../src/PgTransactor.ts"
import * as PgWakeUp from "../src/PgWakeUp.ts"

const url = process.env.DATABASE_URL ?? "postgres://postgres@127.0.0.1:5432/postgres"
const transactions = Number(process.env.NOTIFY_BENCH_TRANSACTIONS ?? 1500)
const rounds = Number(process.env.NOTIFY_BENCH_ROUNDS ?? 5)
const concurrencies = (process.env.NOTIFY_BENCH_WRITERS ?? "1,4,16").split(",").map(Number)

type Mode = "off" | "after" | "separate" | "folded"

const measure = (writers: number, mode: Mode) =>
  Effect.gen(function* () {
    const sql = yield* SqlClient.SqlClient
    const pg = yield* PgClient.PgClient
    const tables = yield* PgTables.make({ schema: `bench_${randomUUID().replaceAll("-", "").slice(0, 16)}` })
    yield* Effect.addFinalizer(() =>
      sql.unsafe(`DROP SCHEMA IF EXISTS "${tables.schema}" CASCADE`).unprepared.pipe(Effect.ignore)
    )
    yield* PgMigrations.run.pipe(Effect.provideService(PgTables.PgTables, tables))
    const services = Effect.provideService(PgTables.PgTables, tables)
    // off: no NOTIFY; after: the default since issue #14 (a coalesced NOTIFY after commit, outside
    // the transaction); separate: in the transaction, its own statement; folded: in the
    // transaction, queued by the insert statement itself, the WakeUp call then skips
    // (PgOutbox.layer with notifyInTransaction)
    const store = yield* services(PgOutboxStore.make({ notify: mode === "folded" }))
    const wakeUp = yield* services(
      PgWakeUp.make({
        notify: mode !== "off",
        notifyInTransaction: mode === "separate" || mode === "folded",
        ...(process.env.NOTIFY_BENCH_INTERVAL_MS
          ? { notifyInterval: Number(process.env.NOTIFY_BENCH_INTERVAL_MS) }
          : {}),
        listen: false
      })
    )
    const transactor = yield* PgTransactor.make
    // a relay listening, so notifications are really delivered
    const listener = yield* pg.listen(tables.channel)
    let received = 0
    yield* Effect.forkScoped(
      Effect.forever(
        Effect.andThen(
          Queue.take(listener),
          Effect.sync(() => received++)
        )
      )
    )
    const one = transactor
      .withTransaction(
        Effect.gen(function* () {
          yield* OutboxStore.use((s) =>
            s.insert([
              {
                id: randomUUID() as EventId,
                topic: "bench",
                key: `k${Math.floor(Math.random() * 1000)}`,
                partition: null,
                headers: {},
                payload: new Uint8Array(200),
                status: "PENDING",
                availableAt: Date.now(),
                createdAt: Date.now()
              }
            ])
          )
          yield* WakeUp.use((w) => w.notify)
        })
      )
      .pipe(Effect.provideService(OutboxStore, store), Effect.provideService(WakeUp, wakeUp))
    // warm up the pool and the statement cache
    yield* Effect.forEach(Array.from({ length: writers * 5 }), () => one, { concurrency: writers, discard: true })
    const started = performance.now()
    yield* Effect.forEach(Array.from({ length: transactions }), () => one, { concurrency: writers, discard: true })
    const seconds = (performance.now() - started) / 1000
    yield* Effect.sleep("200 millis")
    if (process.env.NOTIFY_BENCH_VERBOSE)
      console.log(
        `  ${writers} ${mode}: ${Math.round(transactions / seconds)} tx/s, ${received} notifications in ${seconds.toFixed(2)} s`
      )
    return { writers, mode, tps: Math.round(transactions / seconds), delivered: received }
  }).pipe(Effect.scoped, Effect.provide(PgClient.layer({ url: Redacted.make(url), maxConnections: writers + 2 })))

const program = Effect.gen(function* () {
  const rows: Array<
    Record<Mode, number> & { writers: number; afterCost: number; separateCost: number; foldedCost: number }
  > = []
  const cost = (base: number, x: number) => Math.round((1 - x / base) * 1000) / 10
  for (const writers of concurrencies) {
    const samples: Record<Mode, Array<number>> = { off: [], after: [], separate: [], folded: [] }
    // modes interleaved round by round, so background load hits all three alike; report medians
    for (let round = 0; round < rounds; round++) {
      for (const mode of ["off", "after", "separate", "folded"] as const) {
        samples[mode].push((yield* measure(writers, mode)).tps)
      }
    }
    const median = (xs: Array<number>) => [...xs].sort((a, b) => a - b)[Math.floor(xs.length / 2)]!
    const best = {
      off: median(samples.off),
      after: median(samples.after),
      separate: median(samples.separate),
      folded: median(samples.folded)
    }
    rows.push({
      writers,
      ...best,
      afterCost: cost(best.off, best.after),
      separateCost: cost(best.off, best.separate),
      foldedCost: cost(best.off, best.folded)
    })
  }
  console.log(
    "writers | tx/s no NOTIFY | tx/s coalesced NOTIFY after commit (cost) | tx/s NOTIFY own statement in tx (cost) | tx/s NOTIFY folded in insert (cost)"
  )
  for (const r of rows) {
    console.log(
      `${String(r.writers).padStart(7)} | ${String(r.off).padStart(13)} | ${String(r.after).padStart(8)} (${r.afterCost}%) | ${String(
        r.separate
      ).padStart(8)} (${r.separateCost}%) | ${String(r.folded).padStart(8)} (${r.foldedCost}%)`
    )
  }
  console.log(JSON.stringify({ bench: "notify-cost", transactions, rounds, statistic: "median", rows }))
})

Effect.runPromise(program).catch((error) => {
  console.error(error)
  process.exit(1)
})
