// Outbox.withTransaction on the real PostgreSQL: the caller's own rows, written with effect/sql's
// SqlClient, and the events it enqueues share one transaction (PgTransactor joins the caller's
// connection), so both commit or neither does. The same holds inside a transaction the caller
// opened with sql.withTransaction. Enqueueing outside a transaction does not compile
// (core's OutboxTransaction.test.ts); enqueueAutocommit is the named exception.

import { assert, describe, it } from "@effect/vitest"
import * as Outbox from "@effect-outbox/core/Outbox"
import * as Topic from "@effect-outbox/core/Topic"
import * as Effect from "effect/Effect"
import * as Layer from "effect/Layer"
import * as Schema from "effect/Schema"
import * as SqlClient from "effect/sql/SqlClient"
import * as PgOutbox from "../src/PgOutbox.ts"
import * as PgTables from "../src/PgTables.ts"
import { freshSchema, pgClient } from "./support.ts"

const Orders = Topic.make({
  name: "orders",
  schema: Schema.Struct({ orderId: Schema.String, amountCents: Schema.Int }),
  key: (order) => order.orderId
})

/** The outbox in a fresh schema, with an `orders` table of the caller's own next to it. */
const Live = (schema: string) => {
  const ownTable = Layer.effectDiscard(
    Effect.gen(function* () {
      const sql = yield* SqlClient.SqlClient
      yield* sql.unsafe(`CREATE TABLE "${schema}".orders (id text PRIMARY KEY, amount_cents integer NOT NULL)`)
        .unprepared
      yield* Effect.addFinalizer(() =>
        sql.unsafe(`DROP SCHEMA IF EXISTS "${schema}" CASCADE`).unprepared.pipe(Effect.ignore)
      )
    })
  )
  return Layer.mergeAll(Outbox.layerWith({}), ownTable).pipe(
    Layer.provideMerge(PgOutbox.layer({ schema })),
    Layer.provideMerge(pgClient(3))
  )
}

const placeOrder = (schema: string, order: typeof Orders.schema.Type) =>
  Effect.gen(function* () {
    const sql = yield* SqlClient.SqlClient
    yield* sql.unsafe(`INSERT INTO "${schema}".orders (id, amount_cents) VALUES ($1, $2)`, [
      order.orderId,
      order.amountCents
    ])
    return yield* Topic.enqueue(Orders, order)
  })

/** What committed: the order ids in the caller's table, and the keys of the outbox's events. */
const committed = (schema: string) =>
  Effect.gen(function* () {
    const sql = yield* SqlClient.SqlClient
    const tables = yield* PgTables.PgTables
    const orders = yield* sql.unsafe<{ id: string }>(`SELECT id FROM "${schema}".orders ORDER BY id`)
    const events = yield* sql<{ key: string }>`SELECT key FROM ${sql.literal(tables.message)} ORDER BY key`
    return { orders: orders.map((r) => r.id), events: events.map((r) => r.key) }
  })

describe("Outbox.withTransaction on PostgreSQL", () => {
  it.live(
    "the caller's row and its event commit together; a failure after both rolls back both",
    () => {
      const schema = freshSchema()
      return Effect.gen(function* () {
        yield* Outbox.withTransaction(placeOrder(schema, { orderId: "o-1", amountCents: 1200 }))
        assert.deepStrictEqual(yield* committed(schema), { orders: ["o-1"], events: ["o-1"] })

        const declined = yield* Effect.flip(
          Outbox.withTransaction(
            Effect.andThen(placeOrder(schema, { orderId: "o-2", amountCents: 800 }), Effect.fail("declined" as const))
          )
        )
        assert.strictEqual(declined, "declined")
        assert.deepStrictEqual(yield* committed(schema), { orders: ["o-1"], events: ["o-1"] })
      }).pipe(Effect.scoped, Effect.provide(Live(schema)))
    },
    30_000
  )

  it.live(
    "the event enqueued before a write that fails (a duplicate order) is rolled back with it: no phantom event",
    () => {
      const schema = freshSchema()
      return Effect.gen(function* () {
        const sql = yield* SqlClient.SqlClient
        yield* Outbox.withTransaction(placeOrder(schema, { orderId: "o-1", amountCents: 1200 }))
        const duplicate = yield* Effect.flip(
          Outbox.withTransaction(
            Effect.gen(function* () {
              yield* Topic.enqueue(Orders, { orderId: "o-1-again", amountCents: 1 })
              yield* sql.unsafe(`INSERT INTO "${schema}".orders (id, amount_cents) VALUES ('o-1', 1)`)
            })
          )
        )
        assert.strictEqual(duplicate._tag, "SqlError")
        assert.deepStrictEqual(yield* committed(schema), { orders: ["o-1"], events: ["o-1"] })
      }).pipe(Effect.scoped, Effect.provide(Live(schema)))
    },
    30_000
  )

  it.live(
    "inside a transaction the caller opened with sql.withTransaction, it joins that one transaction",
    () => {
      const schema = freshSchema()
      return Effect.gen(function* () {
        const sql = yield* SqlClient.SqlClient
        const failed = yield* Effect.flip(
          sql.withTransaction(
            Effect.gen(function* () {
              yield* Outbox.withTransaction(placeOrder(schema, { orderId: "o-1", amountCents: 1200 }))
              // nested calls join too: one transaction, undone as a whole
              yield* Outbox.withTransaction(
                Outbox.withTransaction(placeOrder(schema, { orderId: "o-2", amountCents: 1 }))
              )
              return yield* Effect.fail("the caller's transaction failed" as const)
            })
          )
        )
        assert.strictEqual(failed, "the caller's transaction failed")
        assert.deepStrictEqual(yield* committed(schema), { orders: [], events: [] })

        yield* sql.withTransaction(Outbox.withTransaction(placeOrder(schema, { orderId: "o-3", amountCents: 5 })))
        assert.deepStrictEqual(yield* committed(schema), { orders: ["o-3"], events: ["o-3"] })
      }).pipe(Effect.scoped, Effect.provide(Live(schema)))
    },
    30_000
  )

  it.live(
    "enqueueAutocommit commits its event on its own, whatever happens after it",
    () => {
      const schema = freshSchema()
      return Effect.gen(function* () {
        const failed = yield* Effect.flip(
          Effect.andThen(
            Topic.enqueueAutocommit(Orders, { orderId: "o-1", amountCents: 1 }),
            Effect.fail("a later step failed" as const)
          )
        )
        assert.strictEqual(failed, "a later step failed")
        assert.deepStrictEqual(yield* committed(schema), { orders: [], events: ["o-1"] })
      }).pipe(Effect.scoped, Effect.provide(Live(schema)))
    },
    30_000
  )
})
