/**
 * What-if (not part of `pnpm bench`): where the WAL-only write path's cost goes. The
 * same order-row transaction as `LogTargets.ts write`, through the log engine's `Outbox.withTransaction`, in
 * four variants interleaved (the order rotates per repetition):
 *
 *   plain     the order row alone (BEGIN, INSERT, COMMIT);
 *   select1   the order row and `SELECT 1`: one statement more that does nothing (its round trip);
 *   emit      the order row and the event written by `LogWriter.emit` directly (the statement
 *             `pg_logical_emit_message` with a 1 KB event, no `Outbox.enqueue`);
 *   enqueue   the order row and `Outbox.enqueue` of the event (the library, as `LogTargets write`).
 *
 * Each variant's tx/s, its ratio to `plain`, and node and PostgreSQL CPU per transaction (`Cpu.ts`:
 * this process; the server's processes, including other work on the machine). Needs a
 * wal_level=logical PostgreSQL at LOGICAL_DATABASE_URL.
 *
 *   node bench/src/experiments/WriteCost.ts [--clients 16] [--reps 3] [--seconds 3] [--variants plain,enqueue]
 */

import { LogWriter } from "@effect-outbox/core/LogWriter"
import * as Outbox from "@effect-outbox/core/Outbox"
import type { EventId } from "@effect-outbox/core/OutboxMessage"
import * as Effect from "effect/Effect"
import * as SqlClient from "effect/sql/SqlClient"
import * as Args from "../Args.ts"
import * as Cpu from "../Cpu.ts"
import * as Env from "../Env.ts"
import * as Library from "../Library.ts"
import { median } from "../Stats.ts"
import * as LogStack from "../support/logStack.ts"

const clients = Args.number("clients", 16)
const reps = Args.number("reps", 3)
const seconds = Args.number("seconds", 3)

const allVariants = ["plain", "select1", "emit", "enqueue"] as const
type Variant = (typeof allVariants)[number]
// `--variants enqueue,plain`: only these (e.g. one variant under `node --cpu-prof`).
const wanted = Args.list("variants", allVariants.join(","))
const variants: ReadonlyArray<Variant> = allVariants.filter((v) => wanted.includes(v))

const stack = LogStack.make(clients)
const schema = Env.uniqueName("bench_wcost").toLowerCase()
const table = await LogStack.createOrders(stack, schema)
const topic = "bench-write-cost"

const tx = (variant: Variant, i: number) =>
  Effect.gen(function* () {
    const sql = yield* SqlClient.SqlClient
    const writer = yield* LogWriter
    yield* Outbox.withTransaction(
      Effect.gen(function* () {
        yield* Library.insertOrder(table, Env.newEventId(), i)
        if (variant === "select1") yield* sql`SELECT 1 AS n`
        else if (variant === "emit") {
          const id = Env.newEventId() as EventId
          yield* writer.emit([
            {
              id,
              topic,
              key: Env.keyOf(i),
              partition: null,
              headers: { "event-id": id },
              payload: Env.payload(i),
              createdAt: Date.now()
            }
          ])
        } else if (variant === "enqueue") yield* Outbox.enqueue(Library.draft(topic, i))
      })
    )
  })

const measure = async (variant: Variant, n: number, secs: number) => {
  let count = 0
  const before = Cpu.snapshot()
  const started = performance.now()
  const deadline = started + secs * 1000
  await Promise.all(
    Array.from({ length: n }, async (_, c) => {
      for (let i = c; performance.now() < deadline; i += n, count++) await stack.runtime.runPromise(tx(variant, i))
    })
  )
  const elapsed = performance.now() - started
  const cpu = Cpu.between(before, Cpu.snapshot())
  return {
    tps: (count / elapsed) * 1000,
    nodeMicros: (cpu.node * elapsed * 1000) / count,
    pgMicros: (cpu.postgres * elapsed * 1000) / count
  }
}

for (const v of variants) await measure(v, 4, 1) // warm-up
const runs = new Map<Variant, Array<Awaited<ReturnType<typeof measure>>>>()
console.log(
  `write cost: ${clients} clients, ${reps} reps of ${seconds} s; load average ${Cpu.loadAverage()}; server ${await LogStack.durability(stack)}`
)
for (let rep = 0; rep < reps; rep++) {
  const order = [...variants.slice(rep % variants.length), ...variants.slice(0, rep % variants.length)]
  for (const v of order) {
    const s = await measure(v, clients, seconds)
    runs.set(v, [...(runs.get(v) ?? []), s])
    console.log(
      `  rep ${rep + 1} ${v}: ${Math.round(s.tps)} tx/s; node ${Math.round(s.nodeMicros)} µs, postgres ${Math.round(s.pgMicros)} µs per transaction`
    )
  }
}
const plain = runs.get("plain") ?? runs.get(variants[0]!)!
for (const v of variants) {
  const r = runs.get(v)!
  const ratios = r.map((s, i) => s.tps / plain[i]!.tps)
  console.log(
    `${v}: ${Math.round(median(r.map((s) => s.tps)))} tx/s, ×${median(ratios).toFixed(2)} of plain (${ratios.map((x) => x.toFixed(2)).join(" ")}); node ${Math.round(median(r.map((s) => s.nodeMicros)))} µs, postgres ${Math.round(median(r.map((s) => s.pgMicros)))} µs per transaction`
  )
}
await stack.runtime.runPromise(
  Effect.flatMap(SqlClient.SqlClient, (sql) => sql.unsafe(`DROP SCHEMA ${schema} CASCADE`))
)
await stack.close()
process.exit(0)
