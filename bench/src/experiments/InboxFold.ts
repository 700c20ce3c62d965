/**
 * Profile (not part of `pnpm bench`): the cost of the dedupe record of `Inbox.processOnce`, one
 * transaction per message, sequentially, on PostgreSQL only (no Kafka), so the per-message time
 * and this process's CPU per message are seen without the consumer around them:
 * - "write": the business write alone in its transaction (BEGIN, INSERT, COMMIT);
 * - "processOnce": `Inbox.processOnce` around the same write;
 * - "empty tx": BEGIN + COMMIT alone — what one round trip of transaction control costs;
 * - "write ×2": two business writes in one transaction — what one more ordinary statement costs;
 * - "write + SELECT 1": the write and a statement that does nothing — what one more round trip
 *   costs by itself, i.e. what carrying the record with BEGIN (a fold the driver cannot do, see
 *   docs/performance.md) would save at most: folded ≈ processOnce − (this − write);
 * - "record+write": the record through the port (`PgInboxStore.record`: its fixed text straight
 *   to the transaction's connection) and the write, in one transaction; "Statement rec+write": the
 *   same with the record built as an effect/sql `Statement` in a span, as `record` did before
 *   (per-call compile + two spans) — the two interleave, so their difference is the change's gain;
 * - "record only": the record alone in its transaction.
 * Variants interleave over `reps` rounds of `n` messages; the load average is printed with them.
 * See docs/performance.md (scenario 4).
 *
 *   node bench/src/experiments/InboxFold.ts [n=1000] [reps=5]
 */
import { loadavg } from "node:os"
import * as PgTypes from "@effect/sql-pg/PgTypes"
import { InboxStore, recordTime } from "@effect-outbox/core/InboxStore"
import * as Env from "../Env.ts"
import * as Library from "../Library.ts"
import { createOrders } from "../scenarios/WritePath.ts"

const { Effect, Inbox, SqlClient, Transactor } = Library
const n = Number(process.argv[2] ?? 1000)
const reps = Number(process.argv[3] ?? 5)

const schema = Env.uniqueName("bench_ifold")
const stack = await Library.makeStack({ schema, pgConnections: 2, sink: "none" })
await createOrders(stack, "orders")
const table = `${schema}.orders`

const insertOrder = (i: number, id: string) =>
  Effect.flatMap(
    Effect.service(SqlClient.SqlClient),
    (sql) => sql`INSERT INTO ${sql(table)} (id, user_id, amount) VALUES (${id}, ${Env.keyOf(i)}, ${i % 997})`
  )
const processed = `"${schema}"."outbox_processed"`
const key = (id: string) => ({ consumer: "bench", identity: Inbox.eventIdentity(id) })

type Variant = (i: number, id: string) => Library.Effect.Effect<unknown, unknown, Library.Services>
const inTx = (effect: Library.Effect.Effect<unknown, unknown, Library.Services>) =>
  Effect.flatMap(Effect.service(Transactor), (t) => t.withTransaction(effect))

const variants: ReadonlyArray<readonly [string, Variant]> = [
  ["write", (i, id) => inTx(insertOrder(i, id))],
  ["processOnce", (i, id) => Inbox.processOnce(key(id), insertOrder(i, id))],
  ["empty tx", () => inTx(Effect.void)],
  [
    "record+write",
    (i, id) =>
      inTx(
        Effect.flatMap(Effect.service(InboxStore), (store) =>
          Effect.andThen(store.record(key(id), Date.now()), insertOrder(i, id))
        )
      )
  ],
  [
    "Statement rec+write",
    (i, id) =>
      inTx(
        Effect.flatMap(Effect.service(SqlClient.SqlClient), (sql) =>
          Effect.andThen(
            Effect.withSpan(
              sql`INSERT INTO ${sql.literal(processed)} (consumer, identity, event_ms, processed_at)
                VALUES (${"bench"}::text, ${`event:${id}`}::text,
                        ${String(recordTime(key(id), Date.now()))}::bigint, ${PgTypes.timestamptz(Date.now())})
                ON CONFLICT (consumer, identity, event_ms) DO NOTHING
                RETURNING 1 AS recorded`.withoutTransform,
              "pg.inbox.record"
            ),
            insertOrder(i, id)
          )
        )
      )
  ],
  ["record only", (_i, id) => inTx(Effect.flatMap(Effect.service(InboxStore), (s) => s.record(key(id), Date.now())))],
  [
    "write + SELECT 1",
    (i, id) =>
      inTx(
        Effect.andThen(
          insertOrder(i, id),
          Effect.flatMap(Effect.service(SqlClient.SqlClient), (sql) => sql`SELECT 1`)
        )
      )
  ],
  ["write ×2", (i, id) => inTx(Effect.andThen(insertOrder(i, id), insertOrder(i, Env.newEventId())))]
]

const results = new Map<string, Array<{ us: number; cpuUs: number }>>()
const once = async (label: string, variant: Variant) => {
  const ids = Array.from({ length: n }, () => Env.newEventId())
  const cpu = process.cpuUsage()
  const started = performance.now()
  await stack.run(Effect.forEach(ids, (id, i) => variant(i, id), { discard: true }))
  const us = ((performance.now() - started) * 1000) / n
  const used = process.cpuUsage(cpu)
  const cpuUs = (used.user + used.system) / n
  results.set(label, [...(results.get(label) ?? []), { us, cpuUs }])
}

for (const [label, variant] of variants) await once(label, variant) // warm: statements prepared
results.clear()
for (let rep = 0; rep < reps; rep++) {
  for (const [label, variant] of rep % 2 === 0 ? variants : [...variants].reverse()) await once(label, variant)
  console.log(
    `rep ${rep + 1}/${reps}, load average ${loadavg()
      .map((l) => l.toFixed(2))
      .join(" ")}`
  )
}
const median = (xs: ReadonlyArray<number>) => [...xs].sort((a, b) => a - b)[Math.floor(xs.length / 2)]!
const base = median(results.get("write")!.map((r) => r.us))
const bare = median(results.get("write + SELECT 1")!.map((r) => r.us)) - base
const lib = median(results.get("processOnce")!.map((r) => r.us))
console.log(
  `one bare round trip ≈ ${bare.toFixed(0)} µs; processOnce with it folded away ≈ ×${(base / (lib - bare)).toFixed(2)}`
)
for (const [label, rs] of results) {
  const us = median(rs.map((r) => r.us))
  console.log(
    `${label.padEnd(16)} ${us.toFixed(0).padStart(6)} µs/msg (${rs.map((r) => r.us.toFixed(0)).join(", ")}), ` +
      `node CPU ${median(rs.map((r) => r.cpuUs)).toFixed(0)} µs/msg, write ÷ this ×${(base / us).toFixed(2)}`
  )
}
await Library.dropSchema(stack)
await stack.dispose()
process.exit(0)
