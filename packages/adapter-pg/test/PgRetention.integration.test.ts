// Retention on the real PostgreSQL (M1): the recorded transition history goes with the rows it
// describes, and the purge rate, logged for docs/performance.md (a measurement, not a timed
// assertion: the machine is shared).

import { randomUUID } from "node:crypto"
import { assert, describe, it } from "@effect/vitest"
import * as Inbox from "@effect-outbox/core/Inbox"
import type { EventId } from "@effect-outbox/core/OutboxMessage"
import { OutboxStore } from "@effect-outbox/core/OutboxStore"
import * as Retention from "@effect-outbox/core/Retention"
import * as Transition from "@effect-outbox/core/Transition"
import * as Duration from "effect/Duration"
import * as Effect from "effect/Effect"
import * as Layer from "effect/Layer"
import * as SqlClient from "effect/sql/SqlClient"
import * as PgInboxStore from "../src/PgInboxStore.ts"
import * as PgOutboxStore from "../src/PgOutboxStore.ts"
import { PgTables } from "../src/PgTables.ts"
import { freshTables, pgClient } from "./support.ts"

const Live = Layer.merge(PgOutboxStore.layer({ recordTransitions: true }), PgInboxStore.layer).pipe(
  Layer.provideMerge(freshTables()),
  Layer.provideMerge(pgClient())
)

const count = (table: string, where = "TRUE") =>
  Effect.flatMap(SqlClient.SqlClient, (sql) =>
    Effect.map(
      sql.unsafe<{ n: number }>(`SELECT count(*)::int AS n FROM ${table} WHERE ${where}`),
      (rows) => rows[0]!.n
    )
  )

describe("retention on PostgreSQL (M1)", () => {
  it.live("purging rows removes their recorded transitions, and only theirs", () =>
    Effect.gen(function* () {
      const store = yield* OutboxStore
      const t = yield* PgTables
      const now = Date.now()
      const ids = Array.from({ length: 5 }, () => randomUUID() as EventId)
      yield* store.insert(
        ids.map((id, i) => ({
          id,
          topic: "orders",
          key: `k${i}`,
          partition: null,
          headers: {},
          payload: new Uint8Array([i]),
          status: "PENDING" as const,
          availableAt: now,
          createdAt: now
        }))
      )
      yield* Transition.claim({ owner: "relay", limit: 10, maxPerKey: 10, leaseMillis: 60_000 })
      yield* Transition.markPublished(
        ids.map((id, i) => ({ id, receipt: { topic: "orders", partition: 0, offset: `${i}` } }))
      )
      // Two finish; three stay PUBLISHED (kept by the status set below).
      for (const id of ids.slice(0, 2)) {
        yield* Transition.startProcessing(id)
        yield* Transition.finishProcessing(id, "SUCCESS")
      }
      const history = (id: string) => count(t.transition, `event_id = '${id}'`)
      assert.strictEqual(yield* history(ids[0]!), 3, "publish, start, finish recorded")
      assert.strictEqual(yield* history(ids[4]!), 1)
      yield* Effect.sleep("5 millis")
      const purged = yield* Retention.runOnce({ statuses: ["SUCCESS"], olderThan: Duration.zero })
      assert.strictEqual(purged, 2)
      assert.strictEqual(yield* history(ids[0]!), 0)
      assert.strictEqual(yield* history(ids[1]!), 0)
      assert.strictEqual(yield* history(ids[4]!), 1, "a kept row keeps its history")
      assert.strictEqual(yield* count(t.transition), 3)
    }).pipe(Effect.provide(Live))
  )

  it.live(
    "purge rate: a backlog of finished rows (with their history) and inbox records, one round each",
    () =>
      Effect.gen(function* () {
        const sql = yield* SqlClient.SqlClient
        const t = yield* PgTables
        const rows = Number(process.env.RETENTION_ROWS ?? 50_000)
        // Seeded in SQL: finished rows as the pipeline leaves them, three recorded transitions each.
        yield* sql.unsafe(`INSERT INTO ${t.message} (id, topic, key, headers, payload, status, available_at,
            created_at, updated_at, published_partition, published_offset, published_at, processed_at)
          SELECT gen_random_uuid(), 'orders', 'k' || (i % 200), '{"event-id":"x"}'::jsonb, '\\x00'::bytea, 'SUCCESS',
                 now() - interval '8 days', now() - interval '8 days', now() - interval '8 days', 0, i,
                 now() - interval '8 days', now() - interval '8 days'
            FROM generate_series(1, ${rows}) AS i`)
        yield* sql.unsafe(`INSERT INTO ${t.transition} (event_id, from_status, to_status, at)
          SELECT m.id, s.f, s.t, now() FROM ${t.message} m,
            (VALUES ('PENDING','DISPATCHING'), ('DISPATCHING','PUBLISHED'), ('PUBLISHED','SUCCESS')) AS s(f, t)`)
        // Records of a month ago: in the partition of everything before the first day.
        yield* sql.unsafe(`INSERT INTO ${t.processed} (consumer, identity, event_ms, processed_at)
          SELECT 'billing', 'event:' || gen_random_uuid(),
                 floor(extract(epoch FROM now() - interval '31 days') * 1000)::bigint, now() - interval '31 days'
            FROM generate_series(1, ${rows})`)
        for (const table of [t.message, t.transition, t.processed]) yield* sql.unsafe(`ANALYZE ${table}`)

        const outboxStart = performance.now()
        const purged = yield* Retention.runOnce({ maxBatchesPerRound: 1_000 })
        const outboxSeconds = (performance.now() - outboxStart) / 1000
        assert.strictEqual(purged, rows, "the whole backlog in one round")
        assert.strictEqual(yield* count(t.message), 0)
        assert.strictEqual(yield* count(t.transition), 0, "their history went with them")

        const inboxStart = performance.now()
        // Whole partitions go: that one once the cut-off passes its end (the start of yesterday).
        const inbox = yield* Retention.runInboxOnce(Duration.zero, { maxBatchesPerRound: 1_000 })
        const inboxSeconds = (performance.now() - inboxStart) / 1000
        assert.deepStrictEqual(inbox, { deleted: rows, behind: false })
        assert.isFalse(
          yield* Effect.flatMap(PgInboxStore.make, (s) =>
            s.exists({ consumer: "billing", identity: Inbox.eventIdentity("x") })
          )
        )
        const line =
          `retention purge rate (batch ${Retention.defaults.batchSize}): outbox ${rows} rows + ${3 * rows} transitions ` +
          `in ${outboxSeconds.toFixed(1)} s = ${Math.round(rows / outboxSeconds)} rows/s; ` +
          `inbox ${rows} records in ${inboxSeconds.toFixed(1)} s = ${Math.round(rows / inboxSeconds)} records/s`
        yield* Effect.sync(() => console.log(line))
      }).pipe(Effect.provide(Live)),
    300_000
  )
})
