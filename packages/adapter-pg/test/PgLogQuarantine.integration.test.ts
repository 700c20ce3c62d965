// The log relay's quarantine on PostgreSQL: the relay's store (put, blocked keys, released groups,
// settle) and the operator's verbs (retry, skip, dry runs), all through the one transition function.
import { randomUUID } from "node:crypto"
import { assert, describe, it } from "@effect/vitest"
import type { QuarantineEntry } from "@effect-outbox/core/LogQuarantine"
import type { LogMessage } from "@effect-outbox/core/LogRecord"
import type { EventId } from "@effect-outbox/core/OutboxMessage"
import * as Effect from "effect/Effect"
import * as SqlClient from "effect/sql/SqlClient"
import { quarantineTable, transition } from "../src/internal/logQuarantine.ts"
import * as PgLogQuarantine from "../src/PgLogQuarantine.ts"
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

const message = (topic: string, key: string | null, invalid?: string): LogMessage => ({
  id: randomUUID() as EventId,
  topic,
  key,
  partition: null,
  headers: { a: "b" },
  payload: new Uint8Array([1, 2, 3]),
  createdAt: Date.now(),
  ...(invalid === undefined ? {} : { invalid })
})

const entry = (m: LogMessage, status: "QUARANTINED" | "HELD", reason = "topic does not exist"): QuarantineEntry => ({
  message: m,
  position: "0/10",
  status,
  reason
})

describe("PgLogQuarantine", () => {
  it.effect("holds a key behind its refused event; retry releases the key's events in log order", () =>
    Effect.gen(function* () {
      const schema = freshSchema()
      yield* dropAfter(schema)
      // The tables come with the outbox migrations (PgLogOutbox.setup runs them in a service).
      yield* PgMigrations.run.pipe(Effect.provideService(PgTables.PgTables, yield* PgTables.make({ schema })))
      const slot = "s1"
      const { store } = yield* PgLogQuarantine.make({ schema, slot })
      const [a, b, c, lone] = [message("t", "k"), message("t", "k"), message("t", "k"), message("t", null)]
      yield* store.put([entry(a!, "QUARANTINED"), entry(b!, "HELD"), entry(lone!, "QUARANTINED")])
      yield* store.put([entry(a!, "QUARANTINED"), entry(c!, "HELD")]) // a again: left as it is
      assert.deepStrictEqual(yield* store.blocked, [{ topic: "t", key: "k" }])
      assert.deepStrictEqual(yield* store.released, [])

      const dry = yield* PgLogQuarantine.retry({ schema, slot, eventId: a!.id, by: "ops", execute: false })
      assert.deepStrictEqual(
        dry.events.map((e) => e.eventId),
        [a!.id, b!.id, c!.id]
      )
      assert.deepStrictEqual(yield* store.released, [])
      yield* PgLogQuarantine.retry({ schema, slot, eventId: a!.id, by: "ops", execute: true })
      const released = yield* store.released
      assert.deepStrictEqual(
        released.map((g) => g.map((m) => m.id)),
        [[a!.id, b!.id, c!.id]]
      )
      assert.deepStrictEqual([...released[0]![0]!.payload], [1, 2, 3])
      assert.deepStrictEqual(released[0]![0]!.headers, { a: "b" })

      // Refused again at b: a published, b back to QUARANTINED, c held behind it.
      yield* store.settle({ published: [a!.id], refused: { id: b!.id, reason: "still missing" }, behind: [c!.id] })
      const after = yield* PgLogQuarantine.list({ schema, slot })
      assert.deepStrictEqual(
        after.map((e) => [e.eventId, e.status, e.resolvedBy]),
        [
          [a!.id, "RETRIED", "ops"],
          [b!.id, "QUARANTINED", "ops"],
          [lone!.id, "QUARANTINED", null],
          [c!.id, "HELD", "ops"]
        ]
      )
      assert.strictEqual(after[1]!.reason, "still missing")
      assert.deepStrictEqual(yield* store.blocked, [{ topic: "t", key: "k" }])

      // Skip b: c is released (published by the relay next), nothing else moves.
      yield* PgLogQuarantine.skip({ schema, slot, eventId: b!.id, by: "ops", execute: true })
      assert.deepStrictEqual(
        (yield* store.released).map((g) => g.map((m) => m.id)),
        [[c!.id]]
      )
      yield* store.settle({ published: [c!.id], behind: [] })
      assert.deepStrictEqual(yield* store.blocked, [])
    }).pipe(Effect.scoped, Effect.provide(pgClient()))
  )

  it.effect("an invalid event is never retried, only skipped; a move the statuses do not allow is refused", () =>
    Effect.gen(function* () {
      const schema = freshSchema()
      yield* dropAfter(schema)
      // The tables come with the outbox migrations (PgLogOutbox.setup runs them in a service).
      yield* PgMigrations.run.pipe(Effect.provideService(PgTables.PgTables, yield* PgTables.make({ schema })))
      const slot = "s2"
      const { store } = yield* PgLogQuarantine.make({ schema, slot })
      const bad = message("t", "k", "headers must be strings")
      yield* store.put([entry(bad, "QUARANTINED", "invalid: headers must be strings")])
      const error = yield* Effect.flip(
        PgLogQuarantine.retry({ schema, slot, eventId: bad.id, by: "ops", execute: true })
      )
      assert.match(error.message, /invalid .* never published: skip it/)
      const missing = yield* Effect.flip(
        PgLogQuarantine.skip({ schema, slot, eventId: "nope", by: "ops", execute: true })
      )
      assert.match(missing.message, /no event nope in the quarantine of slot s2/)
      yield* PgLogQuarantine.skip({ schema, slot, eventId: bad.id, by: "ops", execute: true })
      const again = yield* Effect.flip(
        PgLogQuarantine.skip({ schema, slot, eventId: bad.id, by: "ops", execute: true })
      )
      assert.match(again.message, /is SKIPPED; only a QUARANTINED event is skipped/)
      const sql = yield* SqlClient.SqlClient
      const table = quarantineTable(yield* PgTables.make({ schema }))
      const illegal = yield* Effect.flip(
        transition(sql, table, { slot, target: { _tag: "ids", ids: [bad.id] }, from: ["SKIPPED"], to: "RETRYING" })
      )
      assert.match(illegal.message, /cannot move from SKIPPED to RETRYING/)
      const [row] = yield* PgLogQuarantine.list({ schema, slot })
      assert.deepStrictEqual([row!.status, row!.invalid, row!.resolvedBy], ["SKIPPED", true, "ops"])
    }).pipe(Effect.scoped, Effect.provide(pgClient()))
  )
})
