// Wake-ups through LISTEN/NOTIFY on the real database, and the polling fallback when the
// listening connection is killed.

import { randomUUID } from "node:crypto"
import { PgClient } from "@effect/sql-pg/PgClient"
import { assert, describe, it } from "@effect/vitest"
import type { EventId } from "@effect-outbox/core/OutboxMessage"
import { Transactor } from "@effect-outbox/core/Transactor"
import { WakeUp } from "@effect-outbox/core/WakeUp"
import * as Duration from "effect/Duration"
import * as Effect from "effect/Effect"
import * as Layer from "effect/Layer"
import * as Queue from "effect/Queue"
import * as Ref from "effect/Ref"
import * as Schedule from "effect/Schedule"
import * as Stream from "effect/Stream"
import * as SqlClient from "effect/sql/SqlClient"
import * as PgOutboxStore from "../src/PgOutboxStore.ts"
import { PgTables } from "../src/PgTables.ts"
import * as PgTransactor from "../src/PgTransactor.ts"
import * as PgWakeUp from "../src/PgWakeUp.ts"
import { freshTables, pgClient } from "./support.ts"

const Live = (options: PgWakeUp.Options = {}) =>
  PgWakeUp.layer(options).pipe(Layer.provideMerge(freshTables()), Layer.provideMerge(pgClient()))

/** Notifications on the channel, counted from a raw LISTEN (no coalescing, no connect signal). */
const rawCount = Effect.gen(function* () {
  const pg = yield* PgClient
  const t = yield* PgTables
  const queue = yield* pg.listen(t.channel)
  const count = yield* Ref.make(0)
  yield* Effect.forkScoped(
    Effect.forever(
      Effect.andThen(
        Queue.take(queue),
        Ref.update(count, (n) => n + 1)
      )
    )
  )
  return count
})

const counting = (signals: Stream.Stream<void>) =>
  Effect.gen(function* () {
    const count = yield* Ref.make(0)
    yield* Effect.forkScoped(Stream.runForEach(signals, () => Ref.update(count, (n) => n + 1)))
    return count
  })

describe("PgWakeUp", () => {
  it.live("NOTIFY is delivered on commit, once per transaction, and never on rollback", () =>
    Effect.gen(function* () {
      const wakeUp = yield* WakeUp
      const sql = yield* SqlClient.SqlClient
      const delivered = yield* rawCount
      yield* sql.withTransaction(
        Effect.gen(function* () {
          yield* wakeUp.notify
          yield* wakeUp.notify
          yield* wakeUp.notify
          yield* Effect.sleep("150 millis")
          assert.strictEqual(yield* Ref.get(delivered), 0, "nothing before COMMIT")
        })
      )
      yield* Effect.flip(sql.withTransaction(wakeUp.notify.pipe(Effect.andThen(Effect.fail("rollback")))))
      yield* Effect.sleep("300 millis")
      assert.strictEqual(yield* Ref.get(delivered), 1)
    }).pipe(Effect.scoped, Effect.provide(Live()))
  )

  it.live("signals: one on connect, then one per committed wake-up", () =>
    Effect.gen(function* () {
      const wakeUp = yield* WakeUp
      const signals = yield* counting(wakeUp.signals)
      yield* Effect.sleep("300 millis")
      assert.strictEqual(yield* Ref.get(signals), 1)
      yield* wakeUp.notify
      yield* Effect.sleep("200 millis")
      yield* wakeUp.notify
      yield* Effect.sleep("300 millis")
      assert.strictEqual(yield* Ref.get(signals), 3)
    }).pipe(Effect.scoped, Effect.provide(Live({ fallbackPollInterval: Duration.millis(50) })))
  )

  it.live(
    "a killed LISTEN connection falls back to polling, then listens again",
    () =>
      Effect.gen(function* () {
        const wakeUp = yield* WakeUp
        const sql = yield* SqlClient.SqlClient
        const t = yield* PgTables
        const signals = yield* counting(wakeUp.signals)
        yield* Effect.sleep("300 millis")
        assert.strictEqual(yield* Ref.get(signals), 1, "connected, and no polling while listening")
        const killed = yield* sql<{ pid: number }>`SELECT pg_terminate_backend(pid) AS ok, pid FROM pg_stat_activity
        WHERE query = ${`LISTEN "${t.channel}"`} AND pid <> pg_backend_pid()`
        assert.strictEqual(killed.length, 1)
        // reconnect waits 1.5 s: meanwhile the fallback signals every 100 ms
        yield* Effect.sleep("1 second")
        const whileDown = (yield* Ref.get(signals)) - 1
        assert.isAtLeast(whileDown, 5)
        yield* Effect.sleep("1500 millis")
        const back = yield* Ref.get(signals)
        yield* Effect.sleep("500 millis")
        assert.strictEqual(yield* Ref.get(signals), back, "polling stopped once LISTEN is back")
        yield* wakeUp.notify
        yield* Effect.sleep("300 millis")
        assert.strictEqual(yield* Ref.get(signals), back + 1, "notifications arrive again")
      }).pipe(
        Effect.scoped,
        Effect.provide(
          Live({ fallbackPollInterval: Duration.millis(100), reconnect: Schedule.spaced(Duration.millis(1500)) })
        )
      ),
    30_000
  )

  it.live("in-transaction mode: an insert with notify on queues the NOTIFY in its statement and reports it", () =>
    Effect.gen(function* () {
      const wakeUp = yield* WakeUp
      const tx = yield* Transactor
      const store = yield* PgOutboxStore.make({ notify: true })
      const delivered = yield* rawCount
      const message = (status: "PENDING" | "PREQUEUED") => ({
        id: randomUUID() as EventId,
        topic: "t",
        key: null,
        partition: null,
        headers: {},
        payload: new Uint8Array(1),
        status,
        availableAt: 0,
        createdAt: 0
      })
      // only held-back rows: the insert queues nothing, the wake-up does
      const held = yield* tx.withTransaction(Effect.tap(store.insert([message("PREQUEUED")]), () => wakeUp.notify))
      assert.isFalse(held.wakeUpQueued)
      yield* Effect.sleep("300 millis")
      assert.strictEqual(yield* Ref.get(delivered), 1)
      // a PENDING row: the insert alone notifies, on commit
      const queued = yield* tx.withTransaction(store.insert([message("PENDING"), message("PREQUEUED")]))
      assert.isTrue(queued.wakeUpQueued)
      yield* Effect.sleep("300 millis")
      assert.strictEqual(yield* Ref.get(delivered), 2)
      // a rolled-back insert notifies nobody
      yield* Effect.flip(tx.withTransaction(store.insert([message("PENDING")]).pipe(Effect.andThen(Effect.fail("no")))))
      yield* Effect.sleep("300 millis")
      assert.strictEqual(yield* Ref.get(delivered), 2)
      // without notify the same insert queues nothing
      const plain = yield* PgOutboxStore.make()
      assert.isFalse((yield* tx.withTransaction(plain.insert([message("PENDING")]))).wakeUpQueued)
      yield* Effect.sleep("300 millis")
      assert.strictEqual(yield* Ref.get(delivered), 2)
    }).pipe(Effect.scoped, Effect.provide(Layer.provideMerge(PgTransactor.layer, Live({ notifyInTransaction: true }))))
  )

  it.live("switched off: notify is free and sends nothing, signals stay silent", () =>
    Effect.gen(function* () {
      const wakeUp = yield* WakeUp
      const delivered = yield* rawCount
      const signals = yield* counting(wakeUp.signals)
      yield* wakeUp.notify
      yield* Effect.sleep("300 millis")
      assert.strictEqual(yield* Ref.get(delivered), 0)
      assert.strictEqual(yield* Ref.get(signals), 0)
    }).pipe(Effect.scoped, Effect.provide(Live({ notify: false, listen: false })))
  )
  it.live("many subscribers (the relays of one process) share ONE LISTEN connection; each gets every signal (M6)", () =>
    Effect.gen(function* () {
      const wakeUp = yield* WakeUp
      const sql = yield* SqlClient.SqlClient
      const t = yield* PgTables
      const listeners = sql<{ n: number }>`SELECT count(*)::int AS n FROM pg_stat_activity
        WHERE query = ${`LISTEN "${t.channel}"`} AND pid <> pg_backend_pid()`
      assert.strictEqual((yield* listeners)[0]!.n, 0, "nothing listens before a subscriber")
      const counts = yield* Effect.forEach(Array.from({ length: 6 }), () => counting(wakeUp.signals))
      yield* Effect.sleep("400 millis")
      assert.strictEqual((yield* listeners)[0]!.n, 1, "one LISTEN connection for six subscribers")
      assert.deepStrictEqual(yield* Effect.forEach(counts, Ref.get), [1, 1, 1, 1, 1, 1], "each saw the connect")
      yield* wakeUp.notify
      yield* Effect.sleep("300 millis")
      assert.deepStrictEqual(yield* Effect.forEach(counts, Ref.get), [2, 2, 2, 2, 2, 2], "each saw the wake-up")
      // A late subscriber joins the same connection.
      const late = yield* counting(wakeUp.signals)
      // the signal is now published in process at once: let the forked subscriber subscribe first
      yield* Effect.sleep("100 millis")
      yield* wakeUp.notify
      yield* Effect.sleep("300 millis")
      assert.strictEqual(yield* Ref.get(late), 1)
      assert.strictEqual((yield* listeners)[0]!.n, 1)
    }).pipe(Effect.scoped, Effect.provide(Live()))
  )
})
