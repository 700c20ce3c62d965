// The write path: an enqueue joining the caller's transaction adds no SAVEPOINT and
// no NOTIFY to it; relays of the same layer are woken in process right after COMMIT, relays of
// another layer (another process) by a coalesced NOTIFY sent after it; a rollback wakes nobody.
// Everything is judged at the database or through a real relay whose poll interval is an hour.

import { PgClient } from "@effect/sql-pg/PgClient"
import { assert, describe, it } from "@effect/vitest"
import * as Outbox from "@effect-outbox/core/Outbox"
import { jsonPayload } from "@effect-outbox/core/OutboxMessage"
import * as Relay from "@effect-outbox/core/Relay"
import { WakeUp } from "@effect-outbox/core/WakeUp"
import * as InMemoryBroker from "@effect-outbox/testing/InMemoryBroker"
import * as Duration from "effect/Duration"
import * as Effect from "effect/Effect"
import * as Layer from "effect/Layer"
import * as Queue from "effect/Queue"
import * as Ref from "effect/Ref"
import * as Stream from "effect/Stream"
import * as SqlClient from "effect/sql/SqlClient"
import * as PgOutbox from "../src/PgOutbox.ts"
import * as PgTables from "../src/PgTables.ts"
import { freshSchema, pgClient, recordingTracer } from "./support.ts"

const DropSchema = (schema: string) =>
  Layer.effectDiscard(
    Effect.addFinalizer(() =>
      Effect.flatMap(
        SqlClient.SqlClient,
        (sql) => sql.unsafe(`DROP SCHEMA IF EXISTS "${schema}" CASCADE`).unprepared
      ).pipe(Effect.ignore)
    )
  )

/** One "process": its own pool, the all-in-one layer, Outbox and an in-memory broker. */
const Process = (schema: string, wakeUp: PgOutbox.Options["wakeUp"] = {}) =>
  Layer.mergeAll(
    Outbox.layerWith({ maxPayloadBytes: 1_000_000 }).pipe(Layer.provideMerge(PgOutbox.layer({ schema, wakeUp }))),
    InMemoryBroker.layer({ topics: { orders: 1 } }),
    DropSchema(schema)
  ).pipe(Layer.provideMerge(pgClient(4)))

/** Payloads of every notification on the outbox channel, from a raw LISTEN. */
const rawPayloads = Effect.gen(function* () {
  const pg = yield* PgClient
  const t = yield* PgTables.PgTables
  const queue = yield* pg.listen(t.channel)
  const payloads = yield* Ref.make<ReadonlyArray<string>>([])
  yield* Effect.forkScoped(
    Effect.forever(Effect.flatMap(Queue.take(queue), (n) => Ref.update(payloads, (p) => [...p, n.payload])))
  )
  yield* Effect.sleep("200 millis") // LISTEN confirmed before anything is sent
  return payloads
})

const counting = (signals: Stream.Stream<void>) =>
  Effect.gen(function* () {
    const count = yield* Ref.make(0)
    yield* Effect.forkScoped(Stream.runForEach(signals, () => Ref.update(count, (n) => n + 1)))
    return count
  })

const waitFor = <A, E, R>(probe: Effect.Effect<A, E, R>, done: (a: A) => boolean, millis: number) =>
  Effect.gen(function* () {
    const deadline = Date.now() + millis
    for (;;) {
      const value = yield* probe
      if (done(value) || Date.now() > deadline) return value
      yield* Effect.sleep("20 millis")
    }
  })

const order = (n: number) => ({ topic: "orders", key: "user-1", payload: jsonPayload({ n }) })

describe("PgWakeUp after commit (the write path)", () => {
  it.live(
    "an enqueue in the caller's transaction opens no SAVEPOINT and queues no NOTIFY in it; one NOTIFY follows the commit",
    () => {
      const schema = freshSchema()
      return Effect.gen(function* () {
        const sql = yield* SqlClient.SqlClient
        const payloads = yield* rawPayloads
        const recorded = recordingTracer()
        yield* Outbox.withTransaction(
          Effect.gen(function* () {
            yield* sql`SELECT txid_current()` // the caller's own write would go here
            yield* Outbox.enqueue(order(1))
            yield* Outbox.enqueue([order(2), order(3)])
          })
        ).pipe(Effect.withTracer(recorded.tracer))
        assert.strictEqual(recorded.transactions(), 1, "one transaction, no nested one (a nested one is a SAVEPOINT)")
        assert.strictEqual(recorded.statements.length, 3, recorded.statements.join(" | "))
        assert.isFalse(
          recorded.statements.some((q) => /pg_notify|SAVEPOINT/i.test(q)),
          recorded.statements.join(" | ")
        )
        const seen = yield* waitFor(Ref.get(payloads), (p) => p.length > 0, 3_000)
        yield* Effect.sleep("300 millis")
        const all = yield* Ref.get(payloads)
        assert.isAbove(seen.length, 0, "a NOTIFY after commit")
        // PostgreSQL delivers an in-transaction NOTIFY at commit too; its payload is '' (the old
        // mode), the after-commit one carries the sending layer's id.
        assert.deepStrictEqual(
          all.filter((p) => !p.startsWith("wake-")),
          [],
          "no NOTIFY queued inside the transaction"
        )
        assert.strictEqual(all.length, 1, "two enqueues, one commit: one NOTIFY")
      }).pipe(Effect.scoped, Effect.provide(Process(schema)))
    },
    30_000
  )

  it.live(
    "the old mode stays an option: notifyInTransaction queues the NOTIFY inside the transaction, in the insert",
    () => {
      const schema = freshSchema()
      return Effect.gen(function* () {
        const payloads = yield* rawPayloads
        const recorded = recordingTracer()
        yield* Outbox.withTransaction(Effect.andThen(Outbox.enqueue(order(1)), Outbox.enqueue(order(2)))).pipe(
          Effect.withTracer(recorded.tracer)
        )
        // each insert carries the pg_notify and says so: no wake-up statement of its own
        assert.strictEqual(recorded.statements.length, 2, recorded.statements.join(" | "))
        for (const q of recorded.statements) assert.match(q, /INSERT INTO[\s\S]*pg_notify/)
        yield* Effect.sleep("400 millis")
        assert.deepStrictEqual(yield* Ref.get(payloads), [""])
      }).pipe(Effect.scoped, Effect.provide(Process(schema, { notifyInTransaction: true })))
    },
    30_000
  )

  it.live(
    "a relay of the same layer is woken right after commit, with no NOTIFY at all and an hour's poll interval",
    () => {
      const schema = freshSchema()
      return Effect.gen(function* () {
        const broker = yield* InMemoryBroker.InMemoryBroker
        const payloads = yield* rawPayloads
        yield* Relay.start({ owner: "relay-1", pollInterval: Duration.hours(1) })
        yield* Effect.sleep("500 millis") // the first look finds nothing, then it waits
        // rolled back: nobody is woken, nothing published
        yield* Effect.flip(Outbox.withTransaction(Outbox.enqueue(order(0)).pipe(Effect.andThen(Effect.fail("no")))))
        const started = Date.now()
        yield* Outbox.withTransaction(Outbox.enqueue(order(1)))
        const records = yield* waitFor(broker.records("orders"), (r) => r.length > 0, 5_000)
        const latency = Date.now() - started
        assert.strictEqual(records.length, 1, "the committed event only")
        assert.isBelow(latency, 3_000, `published after ${latency} ms`)
        assert.deepStrictEqual(yield* Ref.get(payloads), [], "notify: false sends no NOTIFY")
      }).pipe(Effect.scoped, Effect.provide(Process(schema, { notify: false })))
    },
    30_000
  )

  it.live(
    "another process is woken by the coalesced NOTIFY after commit; a rollback wakes nobody",
    () => {
      const schema = freshSchema()
      // The second "process": its own pool and layers on the same tables, migrations already run.
      const Other = Layer.mergeAll(
        PgOutbox.layer({ schema, migrate: false }),
        InMemoryBroker.layer({ topics: { orders: 1 } })
      ).pipe(Layer.provideMerge(pgClient(3)))
      return Effect.gen(function* () {
        const here = yield* WakeUp
        const payloads = yield* rawPayloads
        const localSignals = yield* counting(here.signals)
        const otherProcess = yield* Layer.build(Other) // lives as long as this test's scope
        const { broker, remoteSignals } = yield* Effect.gen(function* () {
          const other = yield* WakeUp
          const broker = yield* InMemoryBroker.InMemoryBroker
          const remoteSignals = yield* counting(other.signals)
          yield* Relay.start({ owner: "relay-elsewhere", pollInterval: Duration.hours(1) })
          return { broker, remoteSignals }
        }).pipe(Effect.provideContext(otherProcess))
        yield* Effect.sleep("600 millis") // both LISTEN connections up, the relay's first look done
        const baseLocal = yield* Ref.get(localSignals)
        const baseRemote = yield* Ref.get(remoteSignals)

        yield* Effect.flip(Outbox.withTransaction(Outbox.enqueue(order(0)).pipe(Effect.andThen(Effect.fail("no")))))
        yield* Effect.sleep("400 millis")
        assert.strictEqual(yield* Ref.get(localSignals), baseLocal, "rollback: no signal here")
        assert.strictEqual(yield* Ref.get(remoteSignals), baseRemote, "rollback: no signal elsewhere")
        assert.deepStrictEqual(yield* Ref.get(payloads), [], "rollback: no NOTIFY")

        yield* Outbox.withTransaction(Outbox.enqueue(order(1)))
        const records = yield* waitFor(broker.records("orders"), (r) => r.length > 0, 5_000)
        assert.strictEqual(records.length, 1, "the relay elsewhere published it without polling")

        // A burst of 30 commits in about no time: the NOTIFYs are coalesced (at most one per 50 ms
        // plus the trailing one), every commit still signals this layer's own subscribers.
        const burstStart = Date.now()
        yield* Effect.forEach(
          Array.from({ length: 30 }, (_, i) => i),
          (i) => Outbox.withTransaction(Outbox.enqueue(order(i + 2))),
          {
            concurrency: 4,
            discard: true
          }
        )
        const burstMillis = Date.now() - burstStart
        yield* Effect.sleep("400 millis")
        const notifications = (yield* Ref.get(payloads)).length - 1
        assert.isAtMost(
          notifications,
          Math.ceil(burstMillis / 50) + 2,
          `${notifications} NOTIFYs for 30 commits in ${burstMillis} ms`
        )
        assert.isBelow(notifications, 30)
        const all = yield* waitFor(broker.records("orders"), (r) => r.length >= 31, 5_000)
        assert.strictEqual(all.length, 31)
      }).pipe(Effect.scoped, Effect.provide(Process(schema)))
    },
    30_000
  )

  it.live(
    "five enqueues in one transaction signal this layer's subscribers once, after the commit",
    () => {
      const schema = freshSchema()
      return Effect.gen(function* () {
        const here = yield* WakeUp
        const signals = yield* counting(here.signals)
        yield* Effect.sleep("400 millis") // the LISTEN connection's own signal is in
        const base = yield* Ref.get(signals)
        yield* Outbox.withTransaction(
          Effect.gen(function* () {
            for (let i = 0; i < 5; i++) yield* Outbox.enqueue(order(i))
            yield* Effect.sleep("100 millis")
            assert.strictEqual(yield* Ref.get(signals), base, "nothing before the commit")
          })
        )
        yield* Effect.sleep("300 millis")
        assert.strictEqual((yield* Ref.get(signals)) - base, 1, "one wake-up per commit, not one per enqueue")
      }).pipe(Effect.scoped, Effect.provide(Process(schema, { notify: false })))
    },
    30_000
  )

  it.live(
    "a wake-up in a savepoint follows it: rolled back, nobody is woken; committed, woken after the outer commit; " +
      "in a transaction the caller opened with sql.withTransaction, after its commit",
    () => {
      const schema = freshSchema()
      return Effect.gen(function* () {
        const sql = yield* SqlClient.SqlClient
        const here = yield* WakeUp
        const signals = yield* counting(here.signals)
        yield* Effect.sleep("400 millis")
        const woken = (since: number) =>
          Effect.andThen(
            Effect.sleep("300 millis"),
            Effect.map(Ref.get(signals), (n) => n - since)
          )

        let base = yield* Ref.get(signals)
        yield* Outbox.withTransaction(
          Effect.gen(function* () {
            yield* Effect.flip(sql.withTransaction(Effect.andThen(Outbox.enqueue(order(0)), Effect.fail("undo"))))
            yield* sql`SELECT 1`
          })
        )
        assert.strictEqual(yield* woken(base), 0, "the savepoint rolled back: no wake-up")

        base = yield* Ref.get(signals)
        yield* Outbox.withTransaction(
          Effect.gen(function* () {
            yield* sql.withTransaction(Outbox.enqueue(order(1)))
            yield* Effect.sleep("100 millis")
            assert.strictEqual(yield* Ref.get(signals), base, "not at the savepoint's release")
          })
        )
        assert.strictEqual(yield* woken(base), 1, "the savepoint committed with the transaction")

        base = yield* Ref.get(signals)
        yield* Effect.flip(
          sql.withTransaction(Outbox.withTransaction(Effect.andThen(Outbox.enqueue(order(2)), Effect.fail("undo"))))
        )
        assert.strictEqual(yield* woken(base), 0, "the caller's own transaction rolled back")
        yield* sql.withTransaction(Outbox.withTransaction(Outbox.enqueue(order(3))))
        assert.strictEqual(yield* woken(base), 1, "the caller's own transaction committed")

        const rows = yield* sql<{ n: number }>`SELECT count(*)::int AS n FROM ${sql.literal(
          (yield* PgTables.PgTables).message
        )}`
        assert.strictEqual(rows[0]!.n, 2, "the committed enqueues only")
      }).pipe(Effect.scoped, Effect.provide(Process(schema, { notify: false })))
    },
    30_000
  )
})
