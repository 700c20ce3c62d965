/**
 * What-if (not part of `pnpm bench`): what the consumer's lifecycle writes cost per record when
 * the event is a row of the local outbox. Per record, sequentially, on PostgreSQL:
 * - "processOnce only": the inbox transaction with one order insert (lifecycle off);
 * - "apart (today)": `startProcessing` (PUBLISHED → UNDER_PROCESSING), the inbox transaction,
 *   `finishProcessing` (→ SUCCESS): three transactions;
 * - "folded": the same three writes in ONE transaction (inbox record + insert + both transitions).
 * Variants interleave over `reps` rounds of `n` records. See docs/consumer.md (lifecycle writes).
 *
 *   node bench/src/experiments/LifecycleFold.ts [n=1000] [reps=3]
 */
import { InboxStore } from "@effect-outbox/core/InboxStore"
import * as Outbox from "@effect-outbox/core/Outbox"
import type { EventId } from "@effect-outbox/core/OutboxMessage"
import * as Transition from "@effect-outbox/core/Transition"
import * as Env from "../Env.ts"
import * as Library from "../Library.ts"
import { createOrders } from "../scenarios/WritePath.ts"

const { Effect, Inbox, SqlClient, Transactor } = Library
const n = Number(process.argv[2] ?? 1000)
const reps = Number(process.argv[3] ?? 3)

const schema = Env.uniqueName("bench_fold")
const stack = await Library.makeStack({ schema, pgConnections: 2, sink: "none" })
await createOrders(stack, "orders")
const table = `${schema}.orders`
const topic = Env.uniqueName("bench-fold")

const insertOrder = (i: number, id: string) =>
  Effect.flatMap(
    Effect.service(SqlClient.SqlClient),
    (sql) => sql`INSERT INTO ${sql(table)} (id, user_id, amount) VALUES (${id}, ${Env.keyOf(i)}, ${i % 997})`
  )
const key = (id: string) => ({ consumer: "bench", identity: Inbox.eventIdentity(id) })

/** `count` outbox rows moved to PUBLISHED, as the consumer finds them. */
const publishedRows = (count: number) =>
  stack.run(
    Effect.gen(function* () {
      yield* Outbox.withTransaction(Outbox.enqueue(Array.from({ length: count }, (_, i) => Library.draft(topic, i))))
      const ids: Array<EventId> = []
      while (ids.length < count) {
        const rows = yield* Transition.claim({ owner: "bench", limit: 1000, maxPerKey: 1000, leaseMillis: 600_000 })
        if (rows.length === 0) break
        yield* Transition.markPublished(
          rows.map((row) => ({ id: row.id, receipt: { topic, partition: 0, offset: "0" } }))
        )
        ids.push(...rows.map((row) => row.id))
      }
      return ids
    })
  )

type Variant = (id: EventId, i: number) => Library.Effect.Effect<unknown, unknown, Library.Services>

const variants: ReadonlyArray<readonly [string, Variant]> = [
  ["processOnce only (lifecycle off)", (id, i) => Inbox.processOnce(key(id), insertOrder(i, id))],
  [
    "apart: start, processOnce, finish (3 tx)",
    (id, i) =>
      Effect.andThen(
        Transition.startProcessing(id),
        Effect.andThen(Inbox.processOnce(key(id), insertOrder(i, id)), Transition.finishProcessing(id, "SUCCESS"))
      )
  ],
  [
    "folded: one transaction",
    (id, i) =>
      Effect.flatMap(Effect.service(Transactor), (transactor) =>
        transactor.withTransaction(
          Effect.gen(function* () {
            yield* Transition.startProcessing(id)
            const inbox = yield* InboxStore
            if ((yield* inbox.record(key(id), Date.now())) === "recorded") yield* insertOrder(i, id)
            yield* Transition.finishProcessing(id, "SUCCESS")
          })
        )
      )
  ]
]

const totals = new Map<string, Array<number>>()
for (let rep = 0; rep < reps; rep++) {
  for (const [label, run] of variants) {
    const ids = await publishedRows(n)
    const started = performance.now()
    await stack.run(Effect.forEach(ids, (id, i) => run(id, i), { discard: true }))
    const perSecond = n / ((performance.now() - started) / 1000)
    totals.set(label, [...(totals.get(label) ?? []), perSecond])
  }
}
const median = (xs: ReadonlyArray<number>) => [...xs].sort((a, b) => a - b)[Math.floor(xs.length / 2)]!
const base = median(totals.get(variants[0]![0])!)
for (const [label, rates] of totals) {
  const m = median(rates)
  console.log(`${label.padEnd(44)} ${m.toFixed(0).padStart(6)} records/s  x${(m / base).toFixed(2)}`)
}
await Library.dropSchema(stack)
await stack.dispose()
process.exit(0)
