/**
 * Profile (not part of `pnpm bench`): what the idempotent consumer sends to PostgreSQL per
 * message. Counts the frontend protocol messages written to the PostgreSQL sockets — round trips
 * (`Sync` / simple `Query`, each waits for ReadyForQuery) and the statements executed (`Bind` of a
 * parsed statement) — for the business write alone and inside `Inbox.processOnce` /
 * `Inbox.processBatch`, per message and per batch. See docs/performance.md (scenario 4).
 *
 *   node bench/src/experiments/InboxRoundTrips.ts
 */
import { Socket } from "node:net"
import * as Env from "../Env.ts"
import * as Library from "../Library.ts"
import { createOrders } from "../scenarios/WritePath.ts"

const { Effect, Inbox, SqlClient, Transactor } = Library

interface Tally {
  roundTrips: number
  writes: number
  statements: Map<string, number>
}
let tally: Tally | undefined
const names = new Map<string, string>()

const cstring = (buf: Buffer, at: number): [string, number] => {
  const end = buf.indexOf(0, at)
  return [buf.toString("utf8", at, end), end + 1]
}
const count = (text: string) => {
  const short = text.replace(/\s+/g, " ").slice(0, 70)
  if (tally !== undefined) tally.statements.set(short, (tally.statements.get(short) ?? 0) + 1)
}

// Frontend messages: type byte, int32 length (itself included), body.
const write = Socket.prototype.write
Socket.prototype.write = function (this: Socket, chunk: unknown, ...rest: Array<never>) {
  if (this.remotePort === 5432 && chunk instanceof Uint8Array && chunk.length > 0 && chunk[0] !== 0) {
    const buf = Buffer.from(chunk.buffer, chunk.byteOffset, chunk.byteLength)
    if (tally !== undefined) tally.writes++
    let at = 0
    while (at + 5 <= buf.length) {
      const type = String.fromCharCode(buf[at]!)
      const length = buf.readInt32BE(at + 1)
      const body = at + 5
      if (type === "P") {
        const [name, next] = cstring(buf, body)
        names.set(name, cstring(buf, next)[0])
      } else if (tally === undefined) {
        // not counting yet: only statement names are learned
      } else if (type === "B") {
        const [, next] = cstring(buf, body)
        count(names.get(cstring(buf, next)[0]) ?? "?")
      } else if (type === "Q") {
        tally.roundTrips++
        count(cstring(buf, body)[0])
      } else if (type === "S") tally.roundTrips++
      at += 1 + length
    }
  }
  return write.call(this, chunk as never, ...rest)
} as typeof Socket.prototype.write

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
  tally = { roundTrips: 0, writes: 0, statements: new Map() }
  const ms = messages(perBatch)
  await stack.run(run(ms))
  const t = tally
  tally = undefined
  console.log(
    `${label}: ${(t.roundTrips / ms.length).toFixed(2)} round trips/message, ${(t.writes / ms.length).toFixed(2)} socket writes/message`
  )
  for (const [text, n] of t.statements) console.log(`    ${(n / ms.length).toFixed(2)} × ${text}`)
}
await Library.dropSchema(stack)
await stack.dispose()
process.exit(0)
