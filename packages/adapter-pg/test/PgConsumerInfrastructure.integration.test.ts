// A consumer's handler that runs its own SQL on PostgreSQL: when the database refuses for its own
// reasons (here SQLSTATE 25006, a read-only database after a fail-over, which the driver files as
// unknown), `PgOutbox.layer` has the consumer treat it as the database's failure: the partition
// waits and the record's attempts are not spent. Core's default alone would dead-letter it.
import { randomUUID } from "node:crypto"
import { assert, describe, it } from "@effect/vitest"
import * as Consumer from "@effect-outbox/core/Consumer"
import * as Inbox from "@effect-outbox/core/Inbox"
import { type EventId, jsonPayload } from "@effect-outbox/core/OutboxMessage"
import { Publisher } from "@effect-outbox/core/Publisher"
import * as InMemoryBroker from "@effect-outbox/testing/InMemoryBroker"
import * as InMemoryTopicReader from "@effect-outbox/testing/InMemoryTopicReader"
import * as Effect from "effect/Effect"
import * as Layer from "effect/Layer"
import * as Schedule from "effect/Schedule"
import * as Schema from "effect/Schema"
import * as SqlClient from "effect/sql/SqlClient"
import * as PgErrors from "../src/PgErrors.ts"
import * as PgOutbox from "../src/PgOutbox.ts"
import { freshSchema, pgClient } from "./support.ts"

const Order = Schema.Struct({ n: Schema.Number })

const world = () => {
  const schema = freshSchema()
  const dropSchema = Layer.effectDiscard(
    Effect.gen(function* () {
      const sql = yield* SqlClient.SqlClient
      yield* Effect.addFinalizer(() => sql.unsafe(`DROP SCHEMA IF EXISTS "${schema}" CASCADE`).pipe(Effect.ignore))
    })
  )
  return Layer.mergeAll(
    Inbox.Inbox.layer.pipe(Layer.provideMerge(PgOutbox.layer({ schema }))),
    InMemoryTopicReader.layer.pipe(
      Layer.provideMerge(InMemoryBroker.layer({ topics: { orders: 1, "orders.DLT": 1 } }))
    ),
    dropSchema
  ).pipe(Layer.provideMerge(pgClient(4)))
}

const waitUntil = (label: string, check: Effect.Effect<boolean>) =>
  Effect.gen(function* () {
    const deadline = Date.now() + 20_000
    while (!(yield* check)) {
      if (Date.now() > deadline) return assert.fail(`timed out waiting until ${label}`)
      yield* Effect.sleep("20 millis")
    }
  })

/**
 * Runs one record through a consumer (one try allowed) whose handler's SQL fails with 25006 twice,
 * then succeeds. Returns the attempts the handler saw and the records dead-lettered.
 */
const run = (isInfrastructure: Consumer.InfrastructureTest | undefined) =>
  Effect.gen(function* () {
    const sql = yield* SqlClient.SqlClient
    const broker = yield* InMemoryBroker.InMemoryBroker
    const id = randomUUID() as EventId
    const [sent] = yield* (yield* Publisher).publish([
      { id, topic: "orders", key: "k", partition: 0, headers: { "event-id": id }, payload: jsonPayload({ n: 1 }) }
    ])
    assert.strictEqual(sent!._tag, "Success")
    const attempts: Array<number> = []
    let refusals = 2
    yield* Consumer.make({
      groupId: `g-${id}`,
      topics: ["orders"],
      schema: Order,
      fromBeginning: true,
      lifecycle: false,
      maxAttempts: 1,
      infrastructureRetrySchedule: Schedule.spaced("10 millis"),
      ...(isInfrastructure === undefined ? {} : { isInfrastructure }),
      handler: (message) =>
        Effect.gen(function* () {
          attempts.push(message.attempt)
          // PostgreSQL itself raises the state, as a demoted primary does for every write.
          if (refusals-- > 0) yield* sql`DO $$ BEGIN RAISE SQLSTATE '25006'; END $$`
        })
    })
    const settled = Effect.gen(function* () {
      const committed = yield* broker.committed(`g-${id}`)
      return committed.some((c) => c.topic === "orders" && c.offset === "1")
    })
    yield* waitUntil("the record's offset is committed", settled)
    return { attempts, deadLettered: (yield* broker.records("orders.DLT")).length }
  }).pipe(Effect.scoped, Effect.provide(world()))

describe("a consumer on PgOutbox.layer, handler SQL refused by the database", () => {
  it.live("waits with the partition (adapter-pg's test is the default): processed, its one attempt unspent", () =>
    Effect.gen(function* () {
      const { attempts, deadLettered } = yield* run(undefined)
      assert.deepStrictEqual(attempts, [1, 1, 1])
      assert.strictEqual(deadLettered, 0)
    })
  )

  it.live("with core's default alone, the unknown SQLSTATE is the record's failure: dead-lettered at once", () =>
    Effect.gen(function* () {
      const { attempts, deadLettered } = yield* run(Consumer.defaultIsInfrastructure)
      assert.deepStrictEqual(attempts, [1])
      assert.strictEqual(deadLettered, 1)
    })
  )

  it.live("the layer's default is PgErrors.isInfrastructure", () =>
    Effect.gen(function* () {
      assert.strictEqual(yield* Consumer.DefaultInfrastructureTest, PgErrors.isInfrastructure)
    }).pipe(Effect.provide(PgOutbox.layer({ schema: freshSchema(), migrate: false })), Effect.provide(pgClient(1)))
  )
})
