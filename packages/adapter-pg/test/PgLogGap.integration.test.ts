// A re-created slot's gap on PostgreSQL: the progress keeps the newest published id (never moved
// back); the setup step's mark opens a gap from that id's time less the margin; the backstop reads
// the gap's events back from the event table in id order, page by page; closing clears only the
// mark it read.
import { randomBytes } from "node:crypto"
import { assert, describe, it } from "@effect/vitest"
import * as LogRecord from "@effect-outbox/core/LogRecord"
import type { EventId } from "@effect-outbox/core/OutboxMessage"
import * as Effect from "effect/Effect"
import * as SqlClient from "effect/sql/SqlClient"
import * as LogGap from "../src/internal/logGap.ts"
import type { Exec } from "../src/internal/logSetup.ts"
import * as PgLogProgress from "../src/PgLogProgress.ts"
import * as PgMigrations from "../src/PgMigrations.ts"
import * as PgTables from "../src/PgTables.ts"
import { freshSchema, pgClient } from "./support.ts"

const dropAfter = (schema: string) =>
  Effect.addFinalizer(() =>
    Effect.flatMap(
      SqlClient.SqlClient,
      (sql) => sql.unsafe(`DROP SCHEMA IF EXISTS "${schema}" CASCADE`).unprepared
    ).pipe(Effect.ignore)
  )

/** A UUIDv7 of epoch millis `ms` (its random part all `fill` when given). */
const idAt = (ms: number, fill?: number): EventId => {
  const b = fill === undefined ? randomBytes(16) : Buffer.alloc(16, fill)
  b.writeUIntBE(ms, 0, 6)
  b[6] = (b[6]! & 0x0f) | 0x70
  b[8] = (b[8]! & 0x3f) | 0x80
  const h = b.toString("hex")
  return `${h.slice(0, 8)}-${h.slice(8, 12)}-${h.slice(12, 16)}-${h.slice(16, 20)}-${h.slice(20)}` as EventId
}

const record = (id: EventId) =>
  LogRecord.encode({
    id,
    topic: "orders",
    key: "k",
    partition: null,
    headers: { "event-id": id },
    payload: new TextEncoder().encode(id),
    createdAt: LogGap.millisOf(id)
  })

describe("PgLogProgress: the gap of a re-created slot", () => {
  it.live("marked by the setup step, read back by time in id order, closed once", () =>
    Effect.gen(function* () {
      const schema = freshSchema()
      yield* dropAfter(schema)
      yield* PgMigrations.run.pipe(Effect.provideService(PgTables.PgTables, yield* PgTables.make({ schema })))
      const sql = yield* SqlClient.SqlClient
      const exec: Exec = (text, params) => sql.unsafe(text, params as Array<unknown>)
      const table = `"${schema}".outbox_log_progress`
      const now = Date.now()
      const newest = idAt(now - 500)
      const progress = yield* PgLogProgress.make({ schema, slot: "a" })
      const backstop = yield* PgLogProgress.backstop({ schema, slot: "a", gapMargin: "1 second" })
      yield* progress.save("0/100", newest)
      yield* progress.save("0/110", idAt(now - 5_000)) // an older id never moves the record back
      yield* progress.save("0/120")
      const [row] = yield* sql.unsafe<{ last_id: string }>(`SELECT last_id::text AS last_id FROM ${table}`)
      assert.strictEqual(row?.last_id, newest)
      assert.isNull(yield* backstop.gap, "no mark, no gap")

      // The setup step marks only a slot this cluster's relay has progress for; no table is no gap.
      yield* LogGap.mark(exec, table, "a", "0/200")
      yield* LogGap.mark(exec, table, "other", "0/200")
      yield* LogGap.mark(exec, `"${schema}".no_such_table`, "a", "0/200")
      const gap = yield* backstop.gap
      assert.isNotNull(gap)
      assert.strictEqual(gap!.start, "0/200")
      assert.strictEqual(gap!.after, newest)
      assert.strictEqual(gap!.from, now - 500 - 1_000)
      // To the slot's creation (the mark's time) plus the margin: later enqueues are the slot's.
      assert.isAtLeast(gap!.to, now + 1_000)
      assert.isAtMost(gap!.to, Date.now() + 1_001)

      // Before the margin: not in the gap. In it: read back a page at a time, in the order written.
      const before = idAt(now - 3_000)
      const late = idAt(now - 1_200) // enqueued before the newest published, committed after it
      // Two transactions in one millisecond: the first's id sorts after the second's.
      const sameMs = [idAt(now + 100, 0xee), idAt(now + 100, 0x11)]
      const last = idAt(now + 200)
      for (const id of [before, late, ...sameMs, last]) {
        yield* sql.unsafe(`INSERT INTO "${schema}".outbox_log_event (id, record) VALUES ($1::uuid, $2::bytea)`, [
          id,
          record(id)
        ])
      }
      const pages: Array<ReadonlyArray<string>> = []
      let cursor: string | undefined
      const read = yield* backstop.open(gap!)
      // Committed after the gap was opened: not in its snapshot (the slot gives it).
      const committedLater = idAt(now + 150)
      yield* sql.unsafe(`INSERT INTO "${schema}".outbox_log_event (id, record) VALUES ($1::uuid, $2::bytea)`, [
        committedLater,
        record(committedLater)
      ])
      for (let more = true; more; ) {
        const page = yield* read(cursor, 2)
        assert.isTrue(page.events.every((m) => m.invalid === undefined))
        pages.push(page.events.map((m) => m.id))
        for (const m of page.events) if (cursor === undefined || m.id > cursor) cursor = m.id
        more = page.more
      }
      // A full page leaves its last millisecond to the next, which reads it whole, in write order.
      assert.deepStrictEqual(pages, [[late], [...sameMs], [last]])

      // A newer mark (the slot created again meanwhile) survives closing the older gap.
      yield* LogGap.mark(exec, table, "a", "0/300")
      yield* backstop.close(gap!)
      assert.strictEqual((yield* backstop.gap)?.start, "0/300")
      yield* backstop.close((yield* backstop.gap)!)
      assert.isNull(yield* backstop.gap)
    }).pipe(Effect.scoped, Effect.provide(pgClient()))
  )
})
