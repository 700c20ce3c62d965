/**
 * What-if (not part of `pnpm bench`): the PostgreSQL adapter's hot statements before and after
 * migration 3 (issue #8), side by side in one process, interleaved batch by batch.
 *
 * Three schemas with the same rows (a 20k backlog of 1 KB rows over 1000 keys):
 *   before  migrations 1-2 as they were: claim function v2, five indexes, the generic jsonb mark;
 *   stmts   the same five indexes, the new claim function and the mark's fast path (statements only);
 *   after   migration 3: the new claim function, three message indexes, the mark's fast path.
 * Each round claims a batch (default 100, maxPerKey the same) and marks them PUBLISHED through core's Transition helper
 * on every side, in a rotating order, until the backlogs are drained. Then the write path: one-row
 * enqueue transactions (with the wake-up NOTIFY folded into the insert) at 1 and 4 clients, in
 * alternating 2-second slices. Finally a check that the three sides claimed the same rows.
 *
 *   node bench/src/experiments/PgHotPath.ts [--backlog 20000] [--batch 100] [--write-seconds 20]
 */

import * as PgTypes from "@effect/sql-pg/PgTypes"
import * as PgMigrations from "@effect-outbox/adapter-pg/PgMigrations"
import * as PgOutboxStore from "@effect-outbox/adapter-pg/PgOutboxStore"
import * as PgTables from "@effect-outbox/adapter-pg/PgTables"
import type { OutboxStatus } from "@effect-outbox/core/Lifecycle"
import type { EventId } from "@effect-outbox/core/OutboxMessage"
import { OutboxStore, type TransitionOutcome } from "@effect-outbox/core/OutboxStore"
import * as Transition from "@effect-outbox/core/Transition"
import * as Effect from "effect/Effect"
import * as ManagedRuntime from "effect/ManagedRuntime"
import * as Migrator from "effect/sql/Migrator"
import * as SqlClient from "effect/sql/SqlClient"
// The experiment measures adapter-pg's private statements: it reaches them by path, since the
// package's exports map hides internal/ from every consumer.
import { claimFunction } from "../../../packages/adapter-pg/src/internal/sql.ts"
import { encodeRequest, genericStatement } from "../../../packages/adapter-pg/src/internal/transition.ts"
import * as Args from "../Args.ts"
import * as Env from "../Env.ts"
import * as Stats from "../Stats.ts"

const BACKLOG = Args.number("backlog", 20_000)
const WRITE_SECONDS = Args.number("write-seconds", 20)
const BATCH = Args.number("batch", 100)

const runtime = ManagedRuntime.make(Env.pgLayer(6))
const run = <A, E>(effect: Effect.Effect<A, E, SqlClient.SqlClient>) => runtime.runPromise(effect)

type Side = "before" | "stmts" | "after"
const sides: ReadonlyArray<Side> = ["before", "stmts", "after"]

interface Prepared {
  readonly side: Side
  readonly tables: PgTables.Tables
  readonly store: OutboxStore["Service"]
}

const prepare = (side: Side) =>
  Effect.gen(function* () {
    const sql = yield* SqlClient.SqlClient
    const tables = yield* PgTables.make({ schema: Env.uniqueName(`hot_${side}`) })
    yield* sql.unsafe(`CREATE SCHEMA "${tables.schema}"`).unprepared
    const all = PgMigrations.migrations(tables)
    const wanted =
      side === "after" ? all : { "1_tables": all["1_tables"]!, "2_claim_function": all["2_claim_function"]! }
    yield* Migrator.make({})({ loader: Migrator.fromRecord(wanted), table: tables.migrations })
    if (side === "stmts") yield* sql.unsafe(claimFunction(tables)).unprepared
    const store = yield* PgOutboxStore.make({ notify: true }).pipe(Effect.provideService(PgTables.PgTables, tables))
    if (side !== "before") return { side, tables, store }
    // before: every transition through the generic jsonb statement, as the adapter did.
    const generic = genericStatement(tables, false)
    const transition: OutboxStore["Service"]["transition"] = (requests) =>
      sql
        .unsafe<{ idx: number; outcome: TransitionOutcome["outcome"]; current: OutboxStatus | null }>(generic, [
          PgTypes.jsonb(requests.map(encodeRequest))
        ])
        .withoutTransform.pipe(
          Effect.map((rows) =>
            rows.map((row) => ({ id: requests[row.idx]!.id, outcome: row.outcome, current: row.current ?? undefined }))
          ),
          Effect.orDie
        )
    return { side, tables, store: { ...store, transition } }
  })

const fill = (p: Prepared, n: number) =>
  Effect.gen(function* () {
    const sql = yield* SqlClient.SqlClient
    yield* sql.unsafe(`TRUNCATE ${p.tables.message}`).unprepared
    yield* sql.unsafe(
      `INSERT INTO ${p.tables.message} (id, topic, key, headers, payload, status, available_at, created_at, updated_at)
       SELECT gen_random_uuid(), 'orders', 'user-' || (g % 1000), '{}'::jsonb,
              convert_to(rpad('{"i":' || g || ',"pad":"', 1022, 'x') || '"}', 'UTF8'), 'PENDING',
              now() - interval '1 hour' + g * interval '1 millisecond', now(), now()
         FROM generate_series(1, ${n}) g`
    ).unprepared
    yield* sql.unsafe(`VACUUM ANALYZE ${p.tables.message}`).unprepared
  })

const prepared = await run(Effect.forEach(sides, prepare))
for (const p of prepared) await run(fill(p, BACKLOG))

// -- claim + mark --------------------------------------------------------------------------------
const times: Record<Side, { claim: Array<number>; mark: Array<number>; keys: Array<string> }> = {
  before: { claim: [], mark: [], keys: [] },
  stmts: { claim: [], mark: [], keys: [] },
  after: { claim: [], mark: [], keys: [] }
}
let offset = 0
const batch = (p: Prepared) =>
  Effect.gen(function* () {
    const t0 = performance.now()
    const rows = yield* Transition.claim({ owner: "bench", limit: BATCH, maxPerKey: BATCH, leaseMillis: 60_000 })
    const t1 = performance.now()
    if (rows.length === 0) return 0
    const outcomes = yield* Transition.markPublished(
      rows.map((row) => ({
        id: row.id as EventId,
        receipt: { topic: row.topic, partition: 0, offset: String(offset++) }
      }))
    )
    const t2 = performance.now()
    if (outcomes.some((o) => o.outcome !== "applied")) throw new Error(`${p.side}: a mark was not applied`)
    times[p.side].claim.push(t1 - t0)
    times[p.side].mark.push(t2 - t1)
    times[p.side].keys.push(rows.map((r) => `${r.key}`).join(","))
    return rows.length
  }).pipe(Effect.provideService(OutboxStore, p.store))

let round = 0
let left = sides.length
while (left > 0) {
  left = 0
  const order = sides.map((_, i) => prepared[(i + round) % prepared.length]!)
  for (const p of order) if ((await run(batch(p))) > 0) left++
  round++
}
const ms = (xs: ReadonlyArray<number>) =>
  `${Stats.fmt(Stats.median(xs), 2)} ms (p90 ${Stats.fmt(Stats.quantile(xs, 0.9), 2)})`
console.log(`claim + mark, ${BACKLOG} rows, batch ${BATCH}, ${round - 1} rounds (median per batch):`)
for (const side of sides)
  console.log(`  ${side.padEnd(7)} claim ${ms(times[side].claim)}  mark ${ms(times[side].mark)}`)
for (const side of ["stmts", "after"] as const) {
  const claim = times.before.claim.map((b, i) => b / times[side].claim[i]!)
  const mark = times.before.mark.map((b, i) => b / times[side].mark[i]!)
  console.log(
    `  before/${side}: claim ×${Stats.fmt(Stats.median(claim), 2)}, mark ×${Stats.fmt(Stats.median(mark), 2)} (median of per-round ratios)`
  )
}
const same = times.before.keys.every((k, i) => k === times.after.keys[i] && k === times.stmts.keys[i])
console.log(`  same batches (keys in seq order) on every side: ${same}`)

// -- write path ----------------------------------------------------------------------------------
const sizes = (p: Prepared) =>
  Effect.flatMap(
    SqlClient.SqlClient,
    (sql) =>
      sql.unsafe<{ n: string }>(
        `SELECT count(*)::text AS n FROM pg_indexes WHERE schemaname = '${p.tables.schema}' AND tablename = '${p.tables.tablePrefix}message'`
      ).unprepared
  )
for (const p of prepared) console.log(`  ${p.side}: ${(await run(sizes(p)))[0]!.n} indexes on the message table`)

const enqueue = (p: Prepared, i: number) =>
  Effect.flatMap(SqlClient.SqlClient, (sql) =>
    sql.withTransaction(
      p.store.insert([
        {
          id: Env.newEventId() as EventId,
          topic: "orders",
          key: Env.keyOf(i),
          partition: null,
          headers: {},
          payload: Env.payload(i),
          status: "PENDING",
          availableAt: Date.now(),
          createdAt: Date.now()
        }
      ])
    )
  )
const slice = (p: Prepared, clients: number, millis: number) =>
  Effect.gen(function* () {
    let n = 0
    const end = performance.now() + millis
    yield* Effect.forEach(
      Array.from({ length: clients }),
      () =>
        Effect.whileLoop({
          while: () => performance.now() < end,
          body: () => enqueue(p, n++),
          step: () => undefined
        }),
      { concurrency: "unbounded", discard: true }
    )
    return (n / millis) * 1000
  })
for (const clients of [1, 4]) {
  const rates: Record<Side, Array<number>> = { before: [], stmts: [], after: [] }
  const slices = Math.max(1, Math.round(WRITE_SECONDS / 2))
  for (let s = 0; s < slices; s++) {
    for (const p of s % 2 === 0 ? prepared : [...prepared].reverse())
      rates[p.side].push(await run(slice(p, clients, 2000)))
  }
  const ratio = rates.after.map((a, i) => a / rates.before[i]!)
  console.log(
    `write path, ${clients} client(s), one-row enqueue tx with NOTIFY: before ${Stats.fmt(Stats.median(rates.before))} tx/s, after ${Stats.fmt(Stats.median(rates.after))} tx/s; after/before ×${Stats.fmt(Stats.median(ratio), 2)} (${Stats.fmt(Math.min(...ratio), 2)}–${Stats.fmt(Math.max(...ratio), 2)})`
  )
}

await run(
  Effect.flatMap(SqlClient.SqlClient, (sql) =>
    Effect.forEach(prepared, (p) => sql.unsafe(`DROP SCHEMA "${p.tables.schema}" CASCADE`).unprepared, {
      discard: true
    })
  )
)
await runtime.dispose()
process.exit(0)
