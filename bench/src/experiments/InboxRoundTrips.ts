/**
 * Profile (not part of `pnpm bench`): what the idempotent consumer sends to PostgreSQL per
 * message. Counts the frontend protocol messages written to the PostgreSQL sockets — round trips
 * (`Sync` / simple `Query`, each waits for ReadyForQuery) and the statements executed (`Bind` of a
 * parsed statement) — for the business write alone and inside `Inbox.processOnce` /
 * `Inbox.processBatch`, per message and per batch. See docs/performance.md (scenario 4).
 *
 *   node bench/src/experiments/InboxRoundTrips.ts
 */
import * as Env from "../Env.ts"
import * as Library from "../Library.ts"
import { createOrders } from "../scenarios/WritePath.ts"
import * as PgWire from "./pgWire.ts"

const { Effect, Inbox, SqlClient, Transactor } = Library

const schema = Env.uniqueName("bench_rt")
const stack = await Library.makeStack({ schema, pgConnections: 2 })
await createOrders(stack, "orders")
const table = `${schema}.orders`

const insertOrder = (i: number, id: string) =>
  Effect.flatMap(
    Effect.service(SqlClient.SqlClient),
    (sql) => sql`INSERT INTO ${sql(table)} (id, user_id, amount) VALUES (${id}, ${Env.keyOf(i)}, ${i % 997})`
  )
const messages = (n: number) => Array.from({ length: n }, (_, i) => ({ i, id: Env.newEventId() }))
const key = (id: string) => ({ consumer: "bench", identity: Inbox.eventIdentity(id) })

const variants: ReadonlyArray<
  [string, (ms: ReturnType<typeof messages>) => Library.Effect.Effect<unknown, unknown, Library.Services>]
> = [
  [
    "write, tx per message",
    (ms) =>
      Effect.flatMap(Effect.service(Transactor), (t) =>
        Effect.forEach(ms, (m) => t.withTransaction(insertOrder(m.i, m.id)))
      )
  ],
  [
    "processOnce, tx per message",
    (ms) => Effect.forEach(ms, (m) => Inbox.processOnce(key(m.id), insertOrder(m.i, m.id)))
  ],
  [
    "write, tx per batch",
    (ms) =>
      Effect.flatMap(Effect.service(Transactor), (t) =>
        t.withTransaction(Effect.forEach(ms, (m) => insertOrder(m.i, m.id)))
      )
  ],
  [
    "processOnce nested, tx per batch",
    (ms) =>
      Effect.flatMap(Effect.service(Transactor), (t) =>
        t.withTransaction(Effect.forEach(ms, (m) => Inbox.processOnce(key(m.id), insertOrder(m.i, m.id))))
      )
  ],
  ["processBatch", (ms) => Inbox.processBatch(ms.map((m) => ({ key: key(m.id), work: insertOrder(m.i, m.id) })))]
]

const perBatch = 100
for (const [label, run] of variants) {
  await stack.run(run(messages(perBatch))) // warm: statements prepared, connections open
  PgWire.start()
  const ms = messages(perBatch)
  await stack.run(run(ms))
  PgWire.print(label, PgWire.stop(), ms.length)
}
await Library.dropSchema(stack)
await stack.dispose()
process.exit(0)
