import * as PgTypes from "@effect/sql-pg/PgTypes"
import { PgClient } from "@effect/sql-pg"
import * as Effect from "effect/Effect"
import * as Statement from "effect/sql/Statement"
const compiler = PgClient.makeCompiler()
const make = Statement.make(Effect.die("no") as any, compiler, [], undefined)
const processed = `"s"."outbox_processed"`
const table = `s.orders`
const N = 100000
const time = (label: string, f: (i: number) => unknown) => {
  for (let i = 0; i < 2000; i++) f(i)
  const t = performance.now()
  for (let i = 0; i < N; i++) f(i)
  console.log(label.padEnd(22), ((performance.now() - t) * 1000 / N).toFixed(2), "µs")
}
const id = "0190a0a0-0000-7000-8000-000000000001"
time("record compile", (i) => make`INSERT INTO ${make.literal(processed)} (consumer, identity, processed_at)
        VALUES (${"bench"}::text, ${"event:" + id}::text, ${PgTypes.timestamptz(Date.now())})
        ON CONFLICT (consumer, identity) DO NOTHING
        RETURNING 1 AS recorded`.compile(true))
time("order compile", (i) => make`INSERT INTO ${make(table)} (id, user_id, amount) VALUES (${id}, ${"user-" + (i % 1000)}, ${i % 997})`.compile())
time("withSpan runSync", () => Effect.runSync(Effect.withSpan(Effect.void, "x")))
time("void runSync", () => Effect.runSync(Effect.void))
time("mapError+span", () => Effect.runSync(Effect.void.pipe(Effect.mapError((e) => e), Effect.withSpan("pg.x"))))
time("withSpan nostack", () => Effect.runSync(Effect.withSpan(Effect.void, "x", { captureStackTrace: false })))
time("new Error lim3", () => { const l = (Error as any).stackTraceLimit; (Error as any).stackTraceLimit = 3; const e = new Error(); (Error as any).stackTraceLimit = l; return e })
const text = `INSERT INTO ${processed} (consumer, identity, processed_at) VALUES ($1::text, $2::text, $3) ON CONFLICT (consumer, identity) DO NOTHING RETURNING 1 AS recorded`
time("raw params", () => [text, ["bench", "event:" + id, PgTypes.timestamptz(Date.now())]])
