// The log engine on the real services: a PostgreSQL with wal_level = logical (LOGICAL_DATABASE_URL,
// started by scripts/test) and the real Kafka broker. Events are rows of the event table inserted in the
// domain transaction; the log relay streams them from the slot to the broker.
import { afterAll, assert, describe, it } from "@effect/vitest"
import * as LogRelay from "@effect-outbox/core/LogRelay"
import { LogSource } from "@effect-outbox/core/LogSource"
import * as Outbox from "@effect-outbox/core/Outbox"
import { Publisher } from "@effect-outbox/core/Publisher"
import * as Duration from "effect/Duration"
import * as Effect from "effect/Effect"
import * as Fiber from "effect/Fiber"
import * as Option from "effect/Option"
import * as SqlClient from "effect/sql/SqlClient"
import * as Support from "./faults/support.ts"

const brokers = Support.sharedBrokers
const cleanups: Array<() => Promise<void>> = []
afterAll(async () => {
  for (const cleanup of cleanups.reverse()) await cleanup()
})

const setup = async (name: string, kafka: "kafkajs" | "platformatic" = "kafkajs") => {
  const slot = Support.uniqueName(`log_${name}`).toLowerCase()
  const topic = Support.uniqueName(`log-${name}`)
  await Support.createTopics(brokers, [topic], 3)
  const stack = await Support.makeLogStack({ slot, kafka })
  cleanups.push(async () => {
    await Support.dropLogSlot(stack, slot)
    await stack.dispose()
    await Support.deleteTopics(brokers, [topic])
  })
  return { slot, topic, stack }
}

const settings: LogRelay.Settings = { pollInterval: Duration.millis(50), leaseRetryInterval: Duration.millis(200) }

/** Waits until the topic holds at least `n` records, then reads them all. */
const waitForRecords = async (topic: string, n: number, timeoutMs = 60_000) => {
  const admin = Support.kafka(brokers).admin()
  await admin.connect()
  try {
    const deadline = Date.now() + timeoutMs
    for (;;) {
      const offsets = await admin.fetchTopicOffsets(topic)
      const total = offsets.reduce((s, o) => s + Number(o.high) - Number(o.low), 0)
      if (total >= n) break
      if (Date.now() > deadline) throw new Error(`${topic}: ${total}/${n} records after ${timeoutMs} ms`)
      await Support.sleep(200)
    }
  } finally {
    await admin.disconnect()
  }
  return Support.readTopic(brokers, topic)
}

/** The number of sessions holding the slot's lease (its advisory lock). */
const leaseHolders = async (stack: Support.LogStack, slot: string) => {
  const rows = await stack.runPromise(
    Effect.flatMap(Effect.service(SqlClient.SqlClient), (sql) =>
      sql.unsafe<{ n: number }>(
        `SELECT count(*)::int AS n FROM pg_locks WHERE locktype = 'advisory' AND granted AND objsubid = 2
         AND objid::bigint = (hashtext($1)::bigint & 4294967295)`,
        [slot]
      )
    )
  )
  return rows[0]!.n
}

// The relay's behaviours on each Kafka adapter: kafkajs (the default) and @platformatic/kafka.
for (const kafka of ["kafkajs", "platformatic"] as const)
  describe(`log relay on a wal_level=logical PostgreSQL and the real Kafka (${kafka})`, () => {
    it("committed events reach the topic once, in commit order per key; a rolled-back enqueue never does; the slot confirms past them", async () => {
      const { slot, stack, topic } = await setup("order", kafka)
      const committed = await Support.enqueueLog(stack, topic, 300, { keys: 7, chunk: 25 })
      const rolledBack = await stack.runPromise(
        Effect.gen(function* () {
          const ids: Array<string> = []
          yield* Outbox.withTransaction(
            Effect.gen(function* () {
              ids.push(yield* Outbox.enqueue({ topic, key: "k1", payload: Support.payloadOf({ index: -1 }) }))
              return yield* Effect.fail("rollback")
            })
          ).pipe(Effect.ignore)
          return ids
        })
      )
      assert.strictEqual(rolledBack.length, 1)
      const lagBefore = await stack.runPromise(
        Effect.scoped(
          Effect.gen(function* () {
            const lease = Option.getOrThrow(yield* (yield* LogSource).acquire)
            return (yield* lease.gauges).lagBytes
          })
        )
      )
      // ~500 bytes of WAL per event (the record, its metadata and headers)
      assert.isAbove(lagBefore, 300 * 200, "the 300 events are in the unconfirmed WAL")
      const [written] = await stack.runPromise(
        Effect.flatMap(Effect.service(SqlClient.SqlClient), (sql) =>
          sql.unsafe<{ lsn: string }>(`SELECT pg_current_wal_insert_lsn()::text AS lsn`)
        )
      )

      const relay = stack.runFork(LogRelay.run(settings))
      const records = await waitForRecords(topic, 300)
      await Support.sleep(1_000) // a late duplicate or the rolled-back event would show up here
      const all = await Support.readTopic(brokers, topic)
      await stack.runPromise(Fiber.interrupt(relay))

      const verdict = Support.verdict(committed, all)
      assert.deepStrictEqual(
        { lost: verdict.lost, duplicates: verdict.duplicatesDelivered, order: verdict.orderViolations },
        { lost: 0, duplicates: 0, order: 0 }
      )
      assert.strictEqual(records.length, 300)
      assert.isFalse(all.some((r) => r.eventId === rolledBack[0]))
      // Commit order across keys too: one partition's records come in enqueue order.
      const byIndex = new Map(committed.map((c, i) => [c.id, i]))
      for (const partition of [0, 1, 2]) {
        const indexes = all.filter((r) => r.partition === partition).map((r) => byIndex.get(r.eventId!)!)
        assert.deepStrictEqual(
          indexes,
          [...indexes].sort((a, b) => a - b)
        )
      }
      // The slot confirmed past every event (the lag itself also counts WAL other sessions of the
      // shared cluster wrote since, which a parallel test run makes arbitrary).
      const [passed] = await stack.runPromise(
        Effect.flatMap(Effect.service(SqlClient.SqlClient), (sql) =>
          sql.unsafe<{ ok: boolean; confirmed: string }>(
            `SELECT confirmed_flush_lsn >= $2::pg_lsn AS ok, confirmed_flush_lsn::text AS confirmed
               FROM pg_replication_slots WHERE slot_name = $1`,
            [slot, written!.lsn]
          )
        )
      )
      assert.isTrue(passed?.ok, `the slot confirmed ${passed?.confirmed}, the events were written by ${written!.lsn}`)
    })

    it("one relay holds the slot's lease; a standby takes over when it stops, losing and repeating nothing", async () => {
      const { slot, stack, topic } = await setup("lease", kafka)
      const first = await Support.enqueueLog(stack, topic, 150, { keys: 5 })
      const a = stack.runFork(LogRelay.run(settings))
      await waitForRecords(topic, 150)
      const b = stack.runFork(LogRelay.run(settings))
      const second = await Support.enqueueLog(stack, topic, 150, { keys: 5, from: 150 })
      await waitForRecords(topic, 300)
      await Support.sleep(1_000) // the standby has tried the lease several times by now
      assert.strictEqual(await leaseHolders(stack, slot), 1)

      await stack.runPromise(Fiber.interrupt(a))
      const third = await Support.enqueueLog(stack, topic, 150, { keys: 5, from: 300 })
      await waitForRecords(topic, 450)
      assert.strictEqual(await leaseHolders(stack, slot), 1, "the standby took the lease")
      await Support.sleep(1_000)
      const all = await Support.readTopic(brokers, topic)
      await stack.runPromise(Fiber.interrupt(b))
      const verdict = Support.verdict([...first, ...second, ...third], all)
      assert.deepStrictEqual(
        { lost: verdict.lost, duplicates: verdict.duplicatesDelivered, order: verdict.orderViolations },
        { lost: 0, duplicates: 0, order: 0 }
      )
    })

    it("a window published but not confirmed before a crash is probed on takeover and not sent again", async () => {
      const { stack, topic } = await setup("probe", kafka)
      const committed = await Support.enqueueLog(stack, topic, 120, { keys: 4, chunk: 40 })
      // A relay that published its window and died before confirming it.
      const published = await stack.runPromise(
        Effect.scoped(
          Effect.gen(function* () {
            const lease = Option.getOrThrow(yield* (yield* LogSource).acquire)
            const publisher = yield* Publisher
            let window = yield* lease.read(1_000)
            // With synchronous_commit = off the last commits may not be flushed (readable) yet.
            while (window.entries.length < 120) {
              yield* Effect.sleep(Duration.millis(100))
              window = yield* lease.read(1_000)
            }
            const outcomes = yield* publisher.publish(
              window.entries.map((m) => ({
                id: m.id,
                topic: m.topic,
                key: m.key,
                partition: m.partition,
                headers: m.headers,
                payload: m.payload
              }))
            )
            return outcomes.length
          })
        )
      )
      assert.strictEqual(published, 120)
      const later = await Support.enqueueLog(stack, topic, 30, { keys: 4, from: 120 })
      const relay = stack.runFork(LogRelay.run(settings))
      await waitForRecords(topic, 150)
      await Support.sleep(1_500)
      const all = await Support.readTopic(brokers, topic)
      await stack.runPromise(Fiber.interrupt(relay))
      const verdict = Support.verdict([...committed, ...later], all)
      assert.deepStrictEqual(
        {
          lost: verdict.lost,
          duplicates: verdict.duplicatesDelivered,
          order: verdict.orderViolations,
          records: all.length
        },
        { lost: 0, duplicates: 0, order: 0, records: 150 }
      )
    })
  })

describe("log engine on a wal_level=logical PostgreSQL", () => {
  it("the log engine refuses what it cannot do (prequeued, a future availableAt) with a typed error, writing nothing", async () => {
    const { stack, topic } = await setup("refuse")
    const errors = await stack.runPromise(
      Effect.gen(function* () {
        const prequeued = yield* Effect.flip(
          Outbox.enqueueAutocommit({ topic, payload: Support.payloadOf(1), prequeued: true })
        )
        const later = yield* Effect.flip(
          Outbox.enqueueAutocommit({ topic, payload: Support.payloadOf(2), availableAt: Date.now() + 60_000 })
        )
        return [prequeued, later]
      })
    )
    assert.deepStrictEqual(
      errors.map((e) => [e._tag, (e as { field?: string }).field]),
      [
        ["OutboxValidationError", "drafts[0].prequeued"],
        ["OutboxValidationError", "drafts[0].availableAt"]
      ]
    )
    const entries = await stack.runPromise(
      Effect.scoped(
        Effect.gen(function* () {
          const lease = Option.getOrThrow(yield* (yield* LogSource).acquire)
          yield* Effect.sleep(Duration.millis(500))
          return (yield* lease.read(100)).entries.length
        })
      )
    )
    assert.strictEqual(entries, 0)
  })
})

describe("log engine on a server without wal_level=logical", () => {
  it("building the layer fails with a LogSourceError that names wal_level, and leaves no slot or publication", async () => {
    const databaseUrl = process.env.DATABASE_URL ?? "postgres://postgres@127.0.0.1:5432/postgres"
    const { PgClient } = await import("@effect/sql-pg")
    const { PgLogOutbox } = await import("@effect-outbox/adapter-pg")
    const Layer = await import("effect/Layer")
    const Redacted = await import("effect/Redacted")
    const client = PgClient.layer({ url: Redacted.make(databaseUrl), maxConnections: 1 })
    const walLevel = await Effect.runPromise(
      Effect.flatMap(Effect.service(SqlClient.SqlClient), (sql) =>
        sql.unsafe<{ wal_level: string }>("SHOW wal_level")
      ).pipe(Effect.provide(client))
    )
    // This case is about a replica-level server; DATABASE_URL is the machine's (scripts/services).
    assert.strictEqual(walLevel[0]!.wal_level, "replica", "DATABASE_URL should be a wal_level=replica server")
    const slot = Support.uniqueName("log_replica").toLowerCase()
    const error = await Effect.runPromise(
      Effect.flip(Layer.build(PgLogOutbox.layer({ slot })).pipe(Effect.scoped, Effect.provide(client)))
    )
    assert.strictEqual(error._tag, "LogSourceError")
    assert.match(error.message, /wal_level/)
    const left = await Effect.runPromise(
      Effect.flatMap(Effect.service(SqlClient.SqlClient), (sql) =>
        sql.unsafe<{ n: number }>(
          `SELECT ((SELECT count(*) FROM pg_replication_slots WHERE slot_name = $1)
                 + (SELECT count(*) FROM pg_publication WHERE pubname = $1))::int AS n`,
          [slot]
        )
      ).pipe(Effect.provide(client))
    )
    assert.strictEqual(left[0]!.n, 0)
  })
})

describe("log engine options", () => {
  it("a slot name PostgreSQL would not accept fails the layer with a LogSourceError naming the rule", async () => {
    const { PgClient } = await import("@effect/sql-pg")
    const { PgLogOutbox } = await import("@effect-outbox/adapter-pg")
    const Layer = await import("effect/Layer")
    const Redacted = await import("effect/Redacted")
    const client = PgClient.layer({ url: Redacted.make(Support.logicalDatabaseUrl), maxConnections: 1 })
    const error = await Effect.runPromise(
      Effect.flip(Layer.build(PgLogOutbox.layer({ slot: "Orders-Outbox" })).pipe(Effect.scoped, Effect.provide(client)))
    )
    assert.strictEqual(error._tag, "LogSourceError")
    assert.include(error.message, "must be 1-63 of a-z 0-9 _")
  })
})
