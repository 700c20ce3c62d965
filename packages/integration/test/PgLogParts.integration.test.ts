// The streaming transport and a transaction larger than its buffer (LOGICAL_DATABASE_URL): the
// transaction is never held whole. Once the buffer is full, reads give its events so far as part
// windows (named by the transaction's commit position), each dropped when released; the commit
// comes in a window of its own with the rest. A new lease told of a released part (what the relay
// does from its saved progress after a restart) never gives those events again.
import { PgClient } from "@effect/sql-pg"
import { assert, describe, it } from "@effect/vitest"
import * as PgLogOutbox from "@effect-outbox/adapter-pg/PgLogOutbox"
import * as PgLogSource from "@effect-outbox/adapter-pg/PgLogSource"
import * as PgTransactor from "@effect-outbox/adapter-pg/PgTransactor"
import type { LogMessage } from "@effect-outbox/core/LogRecord"
import type { LogLease, LogPart, LogWindow } from "@effect-outbox/core/LogSource"
import { acquired, commit, eventId } from "@effect-outbox/testing/LogSourceSuite"
import * as Duration from "effect/Duration"
import * as Effect from "effect/Effect"
import * as Layer from "effect/Layer"
import * as Redacted from "effect/Redacted"
import * as SqlClient from "effect/sql/SqlClient"
import * as Support from "./faults/support.ts"

const EVENTS = 300
const PAD = 2_000
// ~600 KB of events in one transaction against a 64 KB buffer.
const MAX_BUFFERED = 64 * 1024

const message = (n: number): LogMessage => {
  const id = eventId()
  const payload = new Uint8Array(PAD).fill(n % 251)
  return {
    id,
    topic: "orders",
    key: `k${n % 5}`,
    partition: null,
    headers: { "event-id": id },
    payload,
    createdAt: Date.now()
  }
}

const layerFor = (slot: string) => {
  const client = PgClient.layer({ url: Redacted.make(Support.logicalDatabaseUrl), maxConnections: 4 })
  const setup = Layer.effectDiscard(
    Effect.andThen(
      PgLogOutbox.setup({ slot, schema: slot }),
      Effect.addFinalizer(() =>
        Effect.ignore(
          Effect.andThen(
            PgLogSource.dropSlot({ slot }),
            Effect.flatMap(SqlClient.SqlClient, (sql) => sql.unsafe(`DROP SCHEMA IF EXISTS ${slot} CASCADE`))
          )
        )
      )
    )
  )
  return Layer.mergeAll(
    PgLogSource.layer({ slot, schema: slot, maxBufferedBytes: MAX_BUFFERED }),
    PgLogSource.layerWriter({ slot, schema: slot }),
    PgTransactor.layer
  ).pipe(Layer.provideMerge(setup), Layer.provideMerge(client))
}

interface Drained {
  readonly ids: ReadonlyArray<string>
  readonly parts: ReadonlyArray<{ readonly part: LogPart; readonly size: number }>
  readonly last: LogWindow
}

/** Reads, releasing parts and confirming whole windows, until `n` events came (or 20 s passed). */
const drain = (lease: LogLease, n: number, stopAfterParts = Number.POSITIVE_INFINITY) =>
  Effect.gen(function* () {
    const ids: Array<string> = []
    const parts: Array<{ part: LogPart; size: number }> = []
    let last: LogWindow = { entries: [], upTo: null }
    const deadline = Date.now() + 20_000
    while (ids.length < n && parts.length < stopAfterParts && Date.now() < deadline) {
      const window = yield* lease.read(100)
      ids.push(...window.entries.map((m) => m.id))
      if (window.part !== undefined) {
        parts.push({ part: window.part, size: window.entries.length })
        yield* lease.release!(window.part)
      } else if (window.entries.length > 0) {
        last = window
        yield* lease.confirm(window.upTo!)
      } else {
        yield* lease.awaitMore!(Duration.seconds(1))
      }
    }
    return { ids, parts, last } satisfies Drained
  })

describe("PgLogSource streaming transport: a transaction larger than its buffer", () => {
  it.live(
    "comes in part windows of the transaction, each dropped on release, then its commit with the rest: every event once, in order",
    () => {
      const slot = Support.uniqueName("log_parts").toLowerCase()
      return Effect.gen(function* () {
        const lease = yield* acquired
        const events = Array.from({ length: EVENTS }, (_, i) => message(i))
        yield* commit([events])
        const { ids, last, parts } = yield* drain(lease, EVENTS)
        assert.deepStrictEqual(
          ids,
          events.map((e) => e.id)
        )
        assert.isAtLeast(parts.length, 2, "the transaction came in parts")
        // Each part holds what the buffer held, never the transaction: at most ~2 buffers of events.
        for (const { size } of parts) assert.isBelow(size, (2 * MAX_BUFFERED) / PAD + 2)
        // One transaction: every part names the same one, and counts its events in order.
        assert.strictEqual(new Set(parts.map((p) => p.part.transaction)).size, 1)
        let done = 0
        for (const { part, size } of parts) {
          assert.strictEqual(part.done, done + size)
          done = part.done
        }
        // The commit's window: the rest of the events (none when the last part reached the end),
        // positioned at the transaction's end.
        assert.strictEqual(last.entries.length, EVENTS - done)
        for (const m of last.entries) assert.strictEqual(m.position, last.upTo)
      }).pipe(Effect.scoped, Effect.provide(layerFor(slot)))
    },
    60_000
  )

  it.live(
    "a new lease told of a released part never gives its events again: the transaction resumes after them",
    () => {
      const slot = Support.uniqueName("log_parts").toLowerCase()
      return Effect.gen(function* () {
        const events = Array.from({ length: EVENTS }, (_, i) => message(i))
        yield* commit([events])
        // The first holder releases two parts, then its connection ends (nothing confirmed).
        const first = yield* Effect.scoped(Effect.flatMap(acquired, (lease) => drain(lease, EVENTS, 2)))
        const saved = first.parts[first.parts.length - 1]!.part
        assert.strictEqual(saved.done, first.ids.length)
        // The next holder, told what is on the broker, gives the rest only.
        const rest = yield* Effect.scoped(
          Effect.gen(function* () {
            const lease = yield* acquired
            yield* lease.release!(saved)
            return yield* drain(lease, EVENTS - saved.done)
          })
        )
        assert.deepStrictEqual(
          rest.ids,
          events.slice(saved.done).map((e) => e.id)
        )
        for (const { part } of rest.parts) assert.strictEqual(part.transaction, saved.transaction)
      }).pipe(Effect.scoped, Effect.provide(layerFor(slot)))
    },
    60_000
  )
})
