// An event is written in the transaction of the state change it describes, and the compiler
// holds code to that: Outbox.enqueue and Topic.enqueue require Outbox.InTransaction, which only
// Outbox.withTransaction provides. The `@ts-expect-error` lines fail `pnpm typecheck` the day an
// enqueue outside a transaction compiles again. The in-memory database stands in for PostgreSQL
// here (PgOutboxTransaction.integration.test.ts runs the same rules on the real one); its
// InboxStore record stands in for the caller's own write in the same transaction.

import { assert, describe, it } from "@effect/vitest"
import * as InMemoryDatabase from "@effect-outbox/testing/InMemoryDatabase"
import * as Cause from "effect/Cause"
import * as Effect from "effect/Effect"
import * as Exit from "effect/Exit"
import * as Layer from "effect/Layer"
import * as Schema from "effect/Schema"
import type { OutboxValidationError, StoreError } from "../src/Errors.ts"
import { InboxStore } from "../src/InboxStore.ts"
import * as Outbox from "../src/Outbox.ts"
import type { EventId } from "../src/OutboxMessage.ts"
import * as Topic from "../src/Topic.ts"
import * as WakeUp from "../src/WakeUp.ts"
import { draft } from "./support/outboxEnv.ts"

const Orders = Topic.make({
  name: "orders",
  schema: Schema.Struct({ orderId: Schema.String }),
  key: (order) => order.orderId
})

type Enqueued<A> = Effect.Effect<A, OutboxValidationError | StoreError, Outbox.Outbox>

// Outside a transaction, enqueueing does not compile: `Outbox.InTransaction` is missing.
// @ts-expect-error Outbox.enqueue requires Outbox.InTransaction (run it inside Outbox.withTransaction)
const outsideOutbox: Enqueued<EventId> = Outbox.enqueue(draft("k", 1))
// @ts-expect-error Topic.enqueue requires Outbox.InTransaction as well
const outsideTopic: Enqueued<EventId> = Topic.enqueue(Orders, { orderId: "o-1" })
// @ts-expect-error and so does Topic.enqueueAll
const outsideTopicAll: Enqueued<ReadonlyArray<EventId>> = Topic.enqueueAll(Orders, [{ orderId: "o-1" }])

// Inside Outbox.withTransaction, or through the named autocommit variants, it does.
const inside: Enqueued<EventId> = Outbox.withTransaction(Outbox.enqueue(draft("k", 1)))
const insideTopic: Enqueued<ReadonlyArray<EventId>> = Outbox.withTransaction(
  Topic.enqueueAll(Orders, [{ orderId: "o-1" }, { orderId: "o-2" }])
)
const autocommit: Enqueued<EventId> = Outbox.enqueueAutocommit(draft("k", 1))
const topicAutocommit: Enqueued<EventId> = Topic.enqueueAutocommit(Orders, { orderId: "o-1" })

const world = Effect.gen(function* () {
  const database = yield* InMemoryDatabase.make
  const layer = Outbox.layerWith({}).pipe(
    Layer.provideMerge(Layer.merge(InMemoryDatabase.layerFrom(database), WakeUp.layerMemory))
  )
  return { database, layer }
})

// The caller's own write: a record in another table of the same database.
const ownWrite = (identity: string) => InboxStore.use((store) => store.record({ consumer: "test", identity }, 0))
const ownWriteExists = (identity: string) => InboxStore.use((store) => store.exists({ consumer: "test", identity }))

describe("Outbox.withTransaction", () => {
  it.effect("commits the caller's write and its events together", () =>
    Effect.gen(function* () {
      const { database, layer } = yield* world
      const ids = yield* Effect.gen(function* () {
        const [id] = yield* Outbox.withTransaction(
          Effect.gen(function* () {
            yield* ownWrite("order-1")
            return yield* Topic.enqueueAll(Orders, [{ orderId: "o-1" }])
          })
        )
        assert.isTrue(yield* ownWriteExists("order-1"))
        return [id!, yield* inside, ...(yield* insideTopic)]
      }).pipe(Effect.provide(layer))
      assert.deepStrictEqual(
        (yield* database.control.rows).map((row) => row.id),
        ids
      )
    })
  )

  it.effect("a failure rolls back the caller's write and its events together", () =>
    Effect.gen(function* () {
      const { database, layer } = yield* world
      yield* Effect.gen(function* () {
        const failed = yield* Effect.flip(
          Outbox.withTransaction(
            Effect.gen(function* () {
              yield* ownWrite("order-1")
              yield* Topic.enqueue(Orders, { orderId: "o-1" })
              return yield* Effect.fail("payment declined" as const)
            })
          )
        )
        assert.strictEqual(failed, "payment declined")
        assert.isFalse(yield* ownWriteExists("order-1"))
      }).pipe(Effect.provide(layer))
      assert.deepStrictEqual(yield* database.control.rows, [])
    })
  )

  it.effect("a nested call joins the outer transaction: the outer failure undoes the inner's event", () =>
    Effect.gen(function* () {
      const { database, layer } = yield* world
      const failed = yield* Effect.flip(
        Outbox.withTransaction(
          Effect.gen(function* () {
            yield* Outbox.withTransaction(Outbox.enqueue(draft("k", 1)))
            yield* ownWrite("order-1")
            return yield* Effect.fail("later step failed" as const)
          })
        ).pipe(Effect.provide(layer))
      )
      assert.strictEqual(failed, "later step failed")
      assert.deepStrictEqual(yield* database.control.rows, [])
    })
  )

  it.effect("an enqueue whose requirement was cast away dies naming Outbox.withTransaction, and writes nothing", () =>
    Effect.gen(function* () {
      const { database, layer } = yield* world
      for (const outside of [outsideOutbox, outsideTopic, outsideTopicAll] as ReadonlyArray<Enqueued<unknown>>) {
        const exit = yield* Effect.exit(outside.pipe(Effect.provide(layer)))
        assert.isTrue(Exit.isFailure(exit) && Cause.hasDies(exit.cause), String(exit))
        if (Exit.isFailure(exit)) assert.match(String(Cause.squash(exit.cause)), /inside Outbox\.withTransaction/)
      }
      assert.deepStrictEqual(yield* database.control.rows, [])
    })
  )

  it.effect("the autocommit variants commit each call on its own, before a later step fails", () =>
    Effect.gen(function* () {
      const { database, layer } = yield* world
      const failed = yield* Effect.flip(
        Effect.gen(function* () {
          yield* autocommit
          yield* topicAutocommit
          return yield* Effect.fail("later step failed" as const)
        }).pipe(Effect.provide(layer))
      )
      assert.strictEqual(failed, "later step failed")
      assert.deepStrictEqual(
        (yield* database.control.rows).map((row) => [row.key, row.status]),
        [
          ["k", "PENDING"],
          ["o-1", "PENDING"]
        ]
      )
    })
  )
})
