// Retention of the log engine's event table, scaled down: "an hour at 2,000 events/s with
// partitions of 5 minutes" (12 partitions through the hour, each dropped once past retention)
// becomes ~30 s of events with partitions of 2.5 s, retention 4 s, on the private logical
// PostgreSQL (LOGICAL_DATABASE_URL) and the real Kafka, LogRelay.run() with its defaults
// confirming. Must hold: every event published, partitions dropped whole (never a DELETE, no dead
// tuple), the table never more than retention + ahead of partitions.

import { afterAll, assert, describe, it } from "@effect/vitest"
import * as PgLogRetention from "@effect-outbox/adapter-pg/PgLogRetention"
import * as LogRelay from "@effect-outbox/core/LogRelay"
import * as Duration from "effect/Duration"
import * as Effect from "effect/Effect"
import * as Fiber from "effect/Fiber"
import * as Schedule from "effect/Schedule"
import * as Support from "./support.ts"

afterAll(() => {
  console.log(`\nfault tests\n${Support.table()}\n`)
})

const seconds = Number(process.env.FAULTS_LOG_RETENTION_SECONDS ?? 30)
const perSecond = Number(process.env.FAULTS_LOG_RETENTION_RATE ?? 1_000)

interface Stats {
  readonly partitions: number
  readonly rows: number
  readonly deleted: number
  readonly updated: number
  readonly dead: number
}

const stats = (stack: Support.LogStack, slot: string) =>
  stack
    .runPromise(
      Support.logQuery<{ partitions: number; rows: number; deleted: number; updated: number; dead: number }>(
        `SELECT count(*)::int AS partitions, coalesce(sum(s.n_live_tup), 0)::int AS rows,
                coalesce(sum(s.n_tup_del), 0)::int AS deleted, coalesce(sum(s.n_tup_upd), 0)::int AS updated,
                coalesce(sum(s.n_dead_tup), 0)::int AS dead
           FROM pg_inherits i JOIN pg_stat_user_tables s ON s.relid = i.inhrelid
          WHERE i.inhparent = '"${slot}".outbox_log_event'::regclass`
      )
    )
    .then((rows): Stats => rows[0]!)

describe("log engine retention", () => {
  it("partitions are dropped whole once past retention and confirmed: no DELETE, no dead tuple, nothing lost", async () => {
    const slot = Support.uniqueName("faults_retention").toLowerCase()
    const topic = Support.uniqueName("faults-retention")
    await Support.createTopics(Support.sharedBrokers, [topic], 3)
    const stack = await Support.makeLogStack({ slot })
    const options: PgLogRetention.Options = {
      slot,
      schema: slot,
      partitionSpan: "2500 millis",
      ahead: "7500 millis",
      sealAfter: "1 second",
      retention: "4 seconds"
    }
    try {
      // The migration made its partitions with the default span (1 hour); this run starts
      // with none, so the short span applies from the first event.
      const made = await stack.runPromise(
        Support.logQuery<{ name: string }>(
          `SELECT c.relname AS name FROM pg_inherits i JOIN pg_class c ON c.oid = i.inhrelid
            WHERE i.inhparent = '"${slot}".outbox_log_event'::regclass`
        )
      )
      for (const { name } of made) await stack.runPromise(Support.logQuery(`DROP TABLE "${slot}"."${name}"`))
      await stack.runPromise(PgLogRetention.maintain(options))

      const dropped: Array<string> = []
      let sealed = 0
      // The most partitions attached, and the most deleted / updated / dead tuples, over every sample.
      let peak: Stats = { partitions: 0, rows: 0, deleted: 0, updated: 0, dead: 0 }
      const maintenance = stack.runFork(
        Effect.repeat(
          PgLogRetention.maintain(options).pipe(
            Effect.tap((report) =>
              Effect.sync(() => {
                dropped.push(...report.dropped)
                sealed += report.sealed.length
              })
            ),
            Effect.andThen(Effect.promise(() => stats(stack, slot))),
            Effect.tap((s) =>
              Effect.sync(() => {
                peak = {
                  partitions: Math.max(peak.partitions, s.partitions),
                  rows: Math.max(peak.rows, s.rows),
                  deleted: Math.max(peak.deleted, s.deleted),
                  updated: Math.max(peak.updated, s.updated),
                  dead: Math.max(peak.dead, s.dead)
                }
              })
            )
          ),
          Schedule.spaced(Duration.millis(500))
        )
      )
      const relay = stack.runFork(LogRelay.run())

      const committed: Array<{ id: string; key: string }> = []
      const started = Date.now()
      const batch = perSecond / 10
      while (Date.now() - started < seconds * 1_000) {
        const tick = Date.now()
        committed.push(
          ...(await Support.enqueueLog(stack, topic, batch, { keys: 50, chunk: 50, from: committed.length }))
        )
        await Support.sleep(Math.max(0, 100 - (Date.now() - tick)))
      }
      const rate = Math.round(committed.length / ((Date.now() - started) / 1_000))
      const deadline = Date.now() + 120_000
      const records = async () => {
        const admin = Support.kafka(Support.sharedBrokers).admin()
        await admin.connect()
        try {
          const offsets = await admin.fetchTopicOffsets(topic)
          return offsets.reduce((s, o) => s + Number(o.high) - Number(o.low), 0)
        } finally {
          await admin.disconnect()
        }
      }
      while ((await records()) < committed.length) {
        if (Date.now() > deadline) throw new Error("not all events published")
        await Support.sleep(500)
      }
      // Past retention for all but the newest partitions, and a few rounds to drop them.
      await Support.sleep(8_000)
      await Effect.runPromise(Fiber.interrupt(maintenance))
      await Effect.runPromise(Fiber.interrupt(relay))
      await Support.sleep(1_500) // statistics reach pg_stat_user_tables within a second
      const end = await stats(stack, slot)
      const [kept] = await stack.runPromise(
        Support.logQuery<{ n: number }>(`SELECT count(*)::int AS n FROM "${slot}".outbox_log_event`)
      )
      const v = Support.verdict(committed, await Support.readTopic(Support.sharedBrokers, topic))
      // retention 4 s + seal 1 s + a span being written + ahead 7.5 s, in spans of 2.5 s, and a round's slack.
      const bound = Math.ceil((4_000 + 1_000 + 2_500 + 7_500) / 2_500) + 2
      Support.record({
        scenario: "S4 retention: partitions dropped, never DELETE",
        ...v,
        note: `${seconds} s at ${rate}/s, partitions of 2.5 s, retention 4 s: ${dropped.length} dropped whole (${sealed} sealed), at most ${peak.partitions} attached (bound ${bound}), ${kept?.n} rows left; n_tup_del ${end.deleted}, n_tup_upd ${end.updated}, n_dead_tup ${end.dead}`
      })
      assert.strictEqual(v.lost, 0)
      assert.strictEqual(v.duplicatesDelivered, 0)
      assert.strictEqual(v.orderViolations, 0)
      assert.isAtLeast(dropped.length, Math.floor(seconds / 2.5) - 2, "the partitions of the run were dropped")
      assert.isAtMost(peak.partitions, bound)
      assert.isAtMost(end.partitions, bound)
      assert.isBelow(kept?.n ?? 0, committed.length / 2, "the table holds only the last partitions' events")
      assert.deepStrictEqual(
        { deleted: end.deleted, updated: end.updated, dead: end.dead },
        { deleted: 0, updated: 0, dead: 0 }
      )
      assert.deepStrictEqual(
        { deleted: peak.deleted, updated: peak.updated, dead: peak.dead },
        { deleted: 0, updated: 0, dead: 0 }
      )
    } finally {
      await Support.dropLogSlot(stack, slot)
      await stack.dispose()
      await Support.deleteTopics(Support.sharedBrokers, [topic])
    }
  })
})
