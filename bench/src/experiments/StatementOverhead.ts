/**
 * Profile (not part of `pnpm bench`): Node CPU that effect/sql spends on one statement before it
 * reaches the driver, without a database — compiling a `sql` template (the inbox record's, an
 * order insert's), wrapping in a span (with and without its stack trace), and what
 * `PgInboxStore.record` now does instead (a fixed text and its parameters). µs per call, in a loop.
 * See docs/performance.md (scenario 4).
 *
 *   node bench/src/experiments/StatementOverhead.ts
 */
import { PgClient } from "@effect/sql-pg"
import * as PgTypes from "@effect/sql-pg/PgTypes"
import * as Effect from "effect/Effect"
import * as Statement from "effect/sql/Statement"

const sql = Statement.make(Effect.die("compile only"), PgClient.makeCompiler(), [], undefined)
const processed = `"s"."outbox_processed"`
const id = "0190a0a0-0000-7000-8000-000000000001"
const N = 100_000

const time = (label: string, f: (i: number) => unknown) => {
  for (let i = 0; i < 2000; i++) f(i) // warm
  const started = performance.now()
  for (let i = 0; i < N; i++) f(i)
  console.log(label.padEnd(28), (((performance.now() - started) * 1000) / N).toFixed(2), "µs")
}

time("compile: inbox record", () =>
  sql`INSERT INTO ${sql.literal(processed)} (consumer, identity, processed_at)
        VALUES (${"bench"}::text, ${`event:${id}`}::text, ${PgTypes.timestamptz(Date.now())})
        ON CONFLICT (consumer, identity) DO NOTHING
        RETURNING 1 AS recorded`.compile(true)
)
time("compile: order insert", (i) =>
  sql`INSERT INTO ${sql("s.orders")} (id, user_id, amount) VALUES (${id}, ${`user-${i % 1000}`}, ${i % 997})`.compile()
)
const text = `INSERT INTO ${processed} (consumer, identity, processed_at) VALUES ($1::text, $2::text, $3)
  ON CONFLICT (consumer, identity) DO NOTHING RETURNING 1 AS recorded`
time("fixed text + parameters", () => [text, ["bench", `event:${id}`, PgTypes.timestamptz(Date.now())]])
time("Effect.void", () => Effect.runSync(Effect.void))
time("withSpan", () => Effect.runSync(Effect.withSpan(Effect.void, "x")))
time("withSpan, no stack trace", () => Effect.runSync(Effect.withSpan(Effect.void, "x", { captureStackTrace: false })))
