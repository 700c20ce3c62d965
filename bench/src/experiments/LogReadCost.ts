/**
 * What-if (not part of `pnpm bench`): where the log relay's PostgreSQL time goes. Writes
 * `--backlog` 1 KB events with `pg_logical_emit_message` (PgLogOutbox), then drains the slot
 * without Kafka — `read(--batch)` then `confirm` per window — and reports the time spent in each.
 *
 *   node bench/src/experiments/LogReadCost.ts [--backlog 20000] [--batch 100] [--transport sql|stream]
 *
 * `--transport`: `sql` (default here: what each peek costs) or `stream` (reads come from memory;
 * the total is then the walsender's decode and send rate).
 */
import { PgClient } from "@effect/sql-pg"
import * as PgLogOutbox from "@effect-outbox/adapter-pg/PgLogOutbox"
import * as PgLogSource from "@effect-outbox/adapter-pg/PgLogSource"
import { LogSource } from "@effect-outbox/core/LogSource"
import * as Outbox from "@effect-outbox/core/Outbox"
import * as Effect from "effect/Effect"
import * as Layer from "effect/Layer"
import * as ManagedRuntime from "effect/ManagedRuntime"
import * as Option from "effect/Option"
import * as Redacted from "effect/Redacted"
import * as Args from "../Args.ts"
import * as Env from "../Env.ts"

const backlog = Args.number("backlog", 20_000)
const batch = Args.number("batch", 100)
const perTx = Args.number("per-tx", 1000)
const logicalUrl = process.env.LOGICAL_DATABASE_URL ?? "postgres://postgres@127.0.0.1:25433/postgres"
const slot = Env.uniqueName("bench_cost").toLowerCase()
const client = PgClient.layer({ url: Redacted.make(logicalUrl), maxConnections: 4 })
const transport = Args.text("transport", "sql") as "sql" | "stream"
const runtime = ManagedRuntime.make(PgLogOutbox.layer({ slot, transport }).pipe(Layer.provideMerge(client)))

const program = Effect.gen(function* () {
  for (let i = 0; i < backlog; i += perTx) {
    yield* Outbox.enqueueAutocommit(
      Array.from({ length: Math.min(perTx, backlog - i) }, (_, j) => ({
        topic: "t",
        key: Env.keyOf(i + j),
        payload: Env.payload(i + j)
      }))
    )
  }
  const source = yield* LogSource
  const lease = Option.getOrThrow(yield* source.acquire)
  let read = 0
  let confirm = 0
  let events = 0
  let windows = 0
  const perWindow: Array<number> = []
  const started = performance.now()
  while (events < backlog) {
    const t0 = performance.now()
    const window = yield* lease.read(batch)
    const t1 = performance.now()
    if (window.upTo !== null) yield* lease.confirm(window.upTo)
    const t2 = performance.now()
    read += t1 - t0
    perWindow.push(Math.round(t1 - t0))
    confirm += t2 - t1
    events += window.entries.length
    windows++
    // The stream's buffer is empty until the walsender sends more: wait for it, do not spin.
    if (window.entries.length === 0 && lease.awaitMore !== undefined) yield* lease.awaitMore("1 second")
  }
  const total = performance.now() - started
  console.log(
    JSON.stringify({
      backlog,
      batch,
      transport,
      windows,
      totalMs: Math.round(total),
      readMs: Math.round(read),
      confirmMs: Math.round(confirm),
      eventsPerSec: Math.round(events / (total / 1000)),
      readMsPerWindow: perWindow
    })
  )
}).pipe(Effect.scoped, Effect.ensuring(Effect.ignore(PgLogSource.dropSlot({ slot }))))

await runtime.runPromise(program)
await runtime.dispose()
