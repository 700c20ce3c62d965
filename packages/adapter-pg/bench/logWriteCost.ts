// What the log engine's write costs a business transaction, side by side: the same transaction
// (an INSERT of a domain row) with nothing else, with the event as a logical message (the old
// source, `pg_logical_emit_message(true, …)`, replicated here for the comparison), and with the
// event as a row of the event table (the library's `PgLogSource.layerWriter`). Both event writes
// go through the same fixed-statement executor, with the same `LogRecord` bytes.
//
//   LOGICAL_DATABASE_URL=postgres://postgres@127.0.0.1:25433/postgres node packages/adapter-pg/bench/logWriteCost.ts
//
// A slot and its publication exist while it runs (as in production: the walsender decodes the
// WAL; here nothing streams it). Modes are interleaved over LOG_BENCH_ROUNDS rounds (default 5)
// of LOG_BENCH_TRANSACTIONS transactions (default 4000) at LOG_BENCH_WRITERS concurrent clients
// (default 16); prints medians as a table and a JSON line.

import { randomUUID } from "node:crypto"
import { PgClient } from "@effect/sql-pg"
import * as PgTypes from "@effect/sql-pg/PgTypes"
import * as LogRecord from "@effect-outbox/core/LogRecord"
import { LogWriter } from "@effect-outbox/core/LogWriter"
import type { EventId } from "@effect-outbox/core/OutboxMessage"
import * as Effect from "effect/Effect"
import * as Redacted from "effect/Redacted"
import * as SqlClient from "effect/sql/SqlClient"
import { executor } from "../src/internal/fixedStatement.ts"
import * as PgLogOutbox from "../src/PgLogOutbox.ts"
import * as PgLogSource from "../src/PgLogSource.ts"
import * as PgTransactor from "../src/PgTransactor.ts"

const url = process.env.LOGICAL_DATABASE_URL ?? "postgres://postgres@127.0.0.1:25433/postgres"
const transactions = Number(process.env.LOG_BENCH_TRANSACTIONS ?? 4000)
const rounds = Number(process.env.LOG_BENCH_ROUNDS ?? 5)
const writers = Number(process.env.LOG_BENCH_WRITERS ?? 16)

type Mode = "none" | "message" | "table"

/** An event as `Outbox.enqueue` makes it: a UUIDv7 of now, the event-id header, 200 bytes of payload. */
const event = (): LogRecord.LogMessage => {
  const hex = randomUUID().replaceAll("-", "")
  const ms = Date.now().toString(16).padStart(12, "0")
  const h = `${ms}7${hex.slice(13, 16)}${((Number.parseInt(hex[16]!, 16) & 0x3) | 0x8).toString(16)}${hex.slice(17)}`
  const id = `${h.slice(0, 8)}-${h.slice(8, 12)}-${h.slice(12, 16)}-${h.slice(16, 20)}-${h.slice(20)}` as EventId
  return {
    id,
    topic: "orders",
    key: `k${Math.floor(Math.random() * 1000)}`,
    partition: null,
    headers: { "event-id": id },
    payload: new Uint8Array(200).fill(7),
    createdAt: Date.now()
  }
}

const program = Effect.gen(function* () {
  const sql = yield* SqlClient.SqlClient
  const slot = `bench_log_${randomUUID().replaceAll("-", "").slice(0, 12)}`
  yield* Effect.addFinalizer(() =>
    Effect.andThen(
      PgLogSource.dropSlot({ slot }),
      sql.unsafe(`DROP SCHEMA IF EXISTS "${slot}" CASCADE`).unprepared
    ).pipe(Effect.ignore)
  )
  yield* PgLogOutbox.setup({ slot, schema: slot })
  yield* sql.unsafe(`CREATE TABLE "${slot}".orders (id uuid PRIMARY KEY, total int NOT NULL)`).unprepared
  const execute = executor(sql)
  const transactor = yield* PgTransactor.make
  const writer = yield* Effect.service(LogWriter).pipe(Effect.provide(PgLogSource.layerWriter({ slot, schema: slot })))
  const order = `INSERT INTO "${slot}".orders (id, total) VALUES ($1::uuid, $2::int4)`
  const emit = `SELECT pg_logical_emit_message(true, $1::text, $2::bytea) IS NOT NULL AS n`
  const prefix = PgTypes.text(`effect-outbox/${slot}`)
  const one = (mode: Mode) =>
    transactor.withTransaction(
      Effect.gen(function* () {
        yield* execute(order, [randomUUID(), 42])
        if (mode === "message") yield* execute(emit, [prefix, LogRecord.encode(event())])
        else if (mode === "table") yield* writer.emit([event()])
      })
    )
  const measure = (mode: Mode) =>
    Effect.gen(function* () {
      const started = performance.now()
      yield* Effect.forEach(Array.from({ length: transactions }), () => one(mode), {
        concurrency: writers,
        discard: true
      })
      return Math.round(transactions / ((performance.now() - started) / 1000))
    })
  // warm up the pool and each connection's prepared statements
  for (const mode of ["none", "message", "table"] as const)
    yield* Effect.forEach(Array.from({ length: writers * 10 }), () => one(mode), {
      concurrency: writers,
      discard: true
    })
  const samples: Record<Mode, Array<number>> = { none: [], message: [], table: [] }
  for (let round = 0; round < rounds; round++) {
    for (const mode of ["none", "message", "table"] as const) samples[mode].push(yield* measure(mode))
  }
  const median = (xs: Array<number>) => [...xs].sort((a, b) => a - b)[Math.floor(xs.length / 2)]!
  const best = { none: median(samples.none), message: median(samples.message), table: median(samples.table) }
  const [settings] = yield* sql.unsafe<{ fsync: string; sync: string }>(
    `SELECT current_setting('fsync') AS fsync, current_setting('synchronous_commit') AS sync`
  )
  console.log(`writers ${writers}, fsync ${settings?.fsync}, synchronous_commit ${settings?.sync}`)
  console.log("tx/s without outbox | with a logical message | with an event-table row | table ÷ message | table ÷ none")
  console.log(
    `${best.none} | ${best.message} | ${best.table} | ${(best.table / best.message).toFixed(3)} | ${(best.table / best.none).toFixed(3)}`
  )
  console.log(
    JSON.stringify({
      bench: "log-write-cost",
      writers,
      transactions,
      rounds,
      settings,
      statistic: "median",
      best,
      samples
    })
  )
}).pipe(Effect.scoped, Effect.provide(PgClient.layer({ url: Redacted.make(url), maxConnections: writers + 2 })))

Effect.runPromise(program).catch((error) => {
  console.error(error)
  process.exit(1)
})
