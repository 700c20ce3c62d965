/**
 * What-if (not part of `pnpm bench`): the write path's node CPU without a database. The same
 * transactions as scenario 3 (`Library.handWrite` / `Library.businessWrite`) on a `SqlClient`
 * whose connection answers every statement at once, so what is left is what node spends around
 * the round trips: effect/sql, the library, the Effect runtime. Modes alternate in slices; µs of
 * node CPU per transaction (`process.cpuUsage`), steady to a few µs on a quiet machine. The
 * socket work the real driver adds (encoding, writes, parsing) is the same for both sides and is
 * not here: `WritePathOverhead.ts` measures it with PostgreSQL.
 *
 *   hand       order row + a plain outbox `INSERT … VALUES` (a `sql` template) in `sql.withTransaction`
 *   store      order row + `OutboxStore.insert` of a row built here, in `sql.withTransaction`: the insert alone
 *   library    order row + `Outbox.enqueue` in the `Transactor`, default wake-up (`PgWakeUp`)
 *   polling    the same with `WakeUp.layerPollingOnly`: the wake-up's share
 *
 *   node bench/src/experiments/WritePathCpu.ts [--slices 8] [--n 5000] [--modes hand,store,library,polling]
 */
import * as PgClient from "@effect/sql-pg/PgClient"
import * as PgOutboxStore from "@effect-outbox/adapter-pg/PgOutboxStore"
import * as PgTables from "@effect-outbox/adapter-pg/PgTables"
import * as PgTransactor from "@effect-outbox/adapter-pg/PgTransactor"
import * as PgWakeUp from "@effect-outbox/adapter-pg/PgWakeUp"
import * as Outbox from "@effect-outbox/core/Outbox"
import * as WakeUp from "@effect-outbox/core/WakeUp"
import * as Effect from "effect/Effect"
import * as Layer from "effect/Layer"
import * as ManagedRuntime from "effect/ManagedRuntime"
import * as References from "effect/References"
import * as Reactivity from "effect/reactivity/Reactivity"
import * as SqlClient from "effect/sql/SqlClient"
import type * as Connection from "effect/sql/SqlConnection"
import * as Args from "../Args.ts"
import * as Library from "../Library.ts"

const SLICES = Args.number("slices", 8)
const N = Args.number("n", 5000)
type Mode = "hand" | "store" | "library" | "polling"
const modes = Args.list("modes", "hand,library,polling") as Array<Mode>

/** A connection that answers every statement at once with no rows. */
const connection: Connection.Connection = {
  execute: () => Effect.succeed([]),
  executeRaw: () => Effect.succeed([]),
  executeStream: () => {
    throw new Error("not used")
  },
  executeValues: () => Effect.succeed([]),
  executeValuesUnprepared: () => Effect.succeed([]),
  executeUnprepared: () => Effect.succeed([])
}

const fakeSql = Layer.effect(SqlClient.SqlClient)(
  SqlClient.make({
    acquirer: Effect.succeed(connection),
    compiler: PgClient.makeCompiler(),
    driver: "fake",
    spanAttributes: [["db.system.name", "postgresql"]]
  })
).pipe(Layer.provide(Reactivity.layer))

// PgWakeUp reads PgClient only to LISTEN, which nothing here subscribes to.
const fakePg = Layer.succeed(PgClient.PgClient)({} as PgClient.PgClient & SqlClient.SqlClient)

const stack = (wake: "listen" | "poll") =>
  ManagedRuntime.make(
    Outbox.layerWith({ maxPayloadBytes: 1_000_000 }).pipe(
      Layer.provideMerge(
        Layer.mergeAll(
          PgOutboxStore.layer(),
          PgTransactor.layer,
          wake === "listen" ? PgWakeUp.layer() : WakeUp.layerPollingOnly
        )
      ),
      Layer.provideMerge(PgTables.layer({ schema: "wp_cpu" })),
      Layer.provideMerge(Layer.merge(fakeSql, fakePg)),
      Layer.provideMerge(Layer.succeed(References.MinimumLogLevel)("Warn"))
    )
  )

const table = "wp_cpu.orders"
const topic = "bench-wp-cpu"

const main = async () => {
  const listen = stack("listen")
  const poll = stack("poll")
  const handTx = (i: number) => Library.handWriteTx(table, topic, i)
  const storeTx = (i: number) => Library.storeWriteTx(table, topic, i)
  const libraryTx = (i: number) => Library.businessWriteTx(table, topic, i, true)
  const totals = new Map<Mode, { n: number; cpuUs: number }>(modes.map((m) => [m, { n: 0, cpuUs: 0 }]))
  const slice = async (mode: Mode) => {
    const runtime = mode === "polling" ? poll : listen
    const cpu = process.cpuUsage()
    // One promise per transaction, as the bench's clients do.
    for (let i = 0; i < N; i++)
      await runtime.runPromise(mode === "hand" ? handTx(i) : mode === "store" ? storeTx(i) : libraryTx(i))
    const used = process.cpuUsage(cpu)
    const t = totals.get(mode)!
    t.n += N
    t.cpuUs += used.user + used.system
  }
  for (const m of modes) await slice(m) // warm-up
  for (const m of modes) totals.set(m, { n: 0, cpuUs: 0 })
  for (let s = 0; s < SLICES; s++) for (let k = 0; k < modes.length; k++) await slice(modes[(s + k) % modes.length]!)
  const perTx = (m: Mode) => totals.get(m)!.cpuUs / totals.get(m)!.n
  for (const m of modes) {
    console.log(
      `${m}: node CPU ${perTx(m).toFixed(1)} µs/tx (${(perTx(m) - perTx(modes[0]!)).toFixed(1)} µs over ${modes[0]})`
    )
  }
  await listen.dispose()
  await poll.dispose()
}
main()
