/**
 * The conformance suite of the log engine's ports, `LogSource` and `LogWriter`: what
 * `LogRelay` relies on. Each test builds a fresh layer (a fresh log or slot).
 *
 * @since 0.1.0
 */

import { randomBytes } from "node:crypto"
import { assert, describe, it } from "@effect/vitest"
import type { LogMessage } from "@effect-outbox/core/LogRecord"
import { type LogLease, LogSource, type LogWindow } from "@effect-outbox/core/LogSource"
import { LogWriter } from "@effect-outbox/core/LogWriter"
import type { EventId } from "@effect-outbox/core/OutboxMessage"
import { Transactor } from "@effect-outbox/core/Transactor"
import * as Duration from "effect/Duration"
import * as Effect from "effect/Effect"
import * as Fiber from "effect/Fiber"
import type * as Layer from "effect/Layer"
import * as Option from "effect/Option"
import type * as Scope from "effect/Scope"

/**
 * @since 0.1.0
 * @category models
 */
export type Services = LogSource | LogWriter | Transactor

/**
 * Switches for behaviours an adapter may not offer. All default to `true`.
 *
 * @since 0.1.0
 * @category models
 */
export interface Features {
  /** `emit` joins the ambient transaction: a rolled-back transaction leaves no event. */
  readonly transactional?: boolean
}

/**
 * @since 0.1.0
 * @category models
 */
export interface Options {
  readonly layer: () => Layer.Layer<Services, unknown>
  readonly features?: Features
  readonly timeout?: number
}

/** A UUIDv7 of now, as `Outbox.enqueue` makes them (a source may file events by the id's time). */
export const eventId = (): EventId => {
  const b = randomBytes(16)
  b.writeUIntBE(Date.now(), 0, 6)
  b[6] = (b[6]! & 0x0f) | 0x70
  b[8] = (b[8]! & 0x3f) | 0x80
  const h = b.toString("hex")
  return `${h.slice(0, 8)}-${h.slice(8, 12)}-${h.slice(12, 16)}-${h.slice(16, 20)}-${h.slice(20)}` as EventId
}

const message = (key: string, n: number): LogMessage => {
  const id = eventId()
  return {
    id,
    topic: "orders",
    key,
    partition: n % 2 === 0 ? null : 1,
    headers: { "event-id": id, note: `n=${n}` },
    payload: new Uint8Array([n, 0, 255, n]),
    createdAt: 1_700_000_000_000 + n
  }
}

/** An entry as written: without the `position` a source stamps on what it reads. */
export const written = (entry: LogMessage): LogMessage => {
  const { position: _position, ...rest } = entry
  return rest
}

/** Commits each group as one transaction. */
export const commit = (groups: ReadonlyArray<ReadonlyArray<LogMessage>>) =>
  Effect.gen(function* () {
    const writer = yield* LogWriter
    const transactor = yield* Transactor
    for (const group of groups) yield* transactor.withTransaction(writer.emit(group))
  })

/** Reads until the window holds `n` entries (a server may make commits readable a moment later). */
export const readAtLeast = (lease: LogLease, n: number, maxEntries = 1_000) =>
  Effect.gen(function* () {
    const deadline = Date.now() + 10_000
    let window: LogWindow = yield* lease.read(maxEntries)
    while (window.entries.length < n && Date.now() < deadline) {
      yield* Effect.sleep(Duration.millis(50))
      window = yield* lease.read(maxEntries)
    }
    return window
  })

/** The lease, which the case expects to be free. */
export const acquired = Effect.flatMap(Effect.service(LogSource), (source) =>
  Effect.flatMap(source.acquire, (lease) =>
    Option.isSome(lease) ? Effect.succeed(lease.value) : Effect.die(new Error("the lease is held elsewhere"))
  )
)

/** A named case; `requires` names the feature an adapter must have for it to run. */
interface Case {
  readonly name: string
  readonly requires?: "transactional"
  readonly run: Effect.Effect<unknown, unknown, Services | Scope.Scope>
}

/**
 * The suite's cases, a table of named case functions (Watermill's shape).
 *
 * @since 0.1.0
 * @category suites
 */
export const cases: ReadonlyArray<Case> = [
  {
    name: "events come back whole and in commit order; reading does not consume; confirm does",
    run: Effect.gen(function* () {
      const lease = yield* acquired
      const first = [message("a", 1), message("b", 2)]
      const second = [message("a", 3)]
      yield* commit([first, second])
      const window = yield* readAtLeast(lease, 3)
      assert.deepStrictEqual(window.entries.map(written), [...first, ...second])
      for (const entry of window.entries) assert.notProperty(entry, "invalid")
      assert.isNotNull(window.upTo)
      const again = yield* lease.read(1_000)
      assert.deepStrictEqual(
        again.entries.map((m) => m.id),
        window.entries.map((m) => m.id)
      )
      yield* lease.confirm(window.upTo!)
      const third = [message("c", 4)]
      yield* commit([third])
      const after = yield* readAtLeast(lease, 1)
      assert.deepStrictEqual(after.entries.map(written), third)
    })
  },
  {
    name: "a window ends on a transaction boundary: a transaction is never split",
    run: Effect.gen(function* () {
      const lease = yield* acquired
      const big = Array.from({ length: 6 }, (_, i) => message("k", i))
      const next = [message("k", 10)]
      yield* commit([big, next])
      yield* readAtLeast(lease, 7)
      const window = yield* lease.read(2)
      assert.deepStrictEqual(
        window.entries.map((m) => m.id),
        big.map((m) => m.id)
      )
      yield* lease.confirm(window.upTo!)
      const rest = yield* readAtLeast(lease, 1)
      assert.deepStrictEqual(
        rest.entries.map((m) => m.id),
        next.map((m) => m.id)
      )
    })
  },
  {
    name: "one lease: a second acquire gets None while the first is held, Some once it is released",
    run: Effect.gen(function* () {
      const source = yield* LogSource
      const second = yield* Effect.scoped(
        Effect.gen(function* () {
          yield* acquired
          return yield* Effect.scoped(source.acquire)
        })
      )
      assert.isTrue(Option.isNone(second))
      const third = yield* Effect.scoped(source.acquire)
      assert.isTrue(Option.isSome(third))
    })
  },
  {
    name: "readAfter reads the window after an unconfirmed one and confirms nothing; after a re-read it follows the new position",
    run: Effect.gen(function* () {
      const lease = yield* acquired
      const readAfter = lease.readAfter
      if (readAfter === undefined) return
      const [a, b, c] = [[message("k", 1)], [message("k", 2)], [message("k", 3)]]
      yield* commit([a, b, c])
      yield* readAtLeast(lease, 3)
      const first = yield* lease.read(1)
      assert.deepStrictEqual(
        first.entries.map((m) => m.id),
        a.map((m) => m.id)
      )
      const second = yield* readAfter(first.upTo!, 1)
      assert.deepStrictEqual(
        second?.entries.map((m) => m.id),
        b.map((m) => m.id)
      )
      // Nothing confirmed: the slot still starts at the first transaction.
      assert.deepStrictEqual(
        (yield* lease.read(1)).entries.map((m) => m.id),
        a.map((m) => m.id)
      )
      const third = yield* readAfter(second!.upTo!, 1)
      assert.deepStrictEqual(
        third?.entries.map((m) => m.id),
        c.map((m) => m.id)
      )
      // Back to an earlier position (a relay re-reading after a failed publish).
      const again = yield* readAfter(first.upTo!, 10)
      assert.deepStrictEqual(
        again?.entries.map((m) => m.id),
        [...b, ...c].map((m) => m.id)
      )
      yield* lease.confirm(third!.upTo!)
      assert.deepStrictEqual((yield* lease.read(100)).entries, [])
    })
  },
  {
    name: "awaitMore waits out its timeout while nothing commits, returns on the next commit, and at once while a transaction is unconfirmed",
    run: Effect.gen(function* () {
      const lease = yield* acquired
      const awaitMore = lease.awaitMore
      if (awaitMore === undefined) return
      const idle = Date.now()
      yield* awaitMore(Duration.millis(300))
      assert.isAtLeast(Date.now() - idle, 250, "nothing committed: the timeout passed")
      const waiting = yield* Effect.forkChild(awaitMore(Duration.seconds(20)))
      yield* Effect.sleep(Duration.millis(200))
      const committedAt = Date.now()
      const event = [message("w", 1)]
      yield* commit([event])
      yield* Fiber.join(waiting)
      assert.isBelow(Date.now() - committedAt, 5_000, "woken by the commit, not the 20 s timeout")
      const window = yield* lease.read(100)
      assert.deepStrictEqual(
        window.entries.map((m) => m.id),
        event.map((m) => m.id)
      )
      // Read but not confirmed: there is something to read, no wait.
      const unconfirmed = Date.now()
      yield* awaitMore(Duration.seconds(20))
      assert.isBelow(Date.now() - unconfirmed, 1_000)
      yield* lease.confirm(window.upTo!)
      const after = Date.now()
      yield* awaitMore(Duration.millis(300))
      assert.isAtLeast(Date.now() - after, 250, "confirmed: nothing left, the timeout passed")
    })
  },
  {
    name: "an entry's position, when the source gives one, is the upTo of the window its transaction ends",
    run: Effect.gen(function* () {
      const lease = yield* acquired
      const [a, b] = [[message("p", 1), message("p", 2)], [message("p", 3)]]
      yield* commit([a, b])
      yield* readAtLeast(lease, 3)
      const first = yield* lease.read(1)
      assert.deepStrictEqual(
        first.entries.map((m) => m.id),
        a.map((m) => m.id)
      )
      for (const entry of first.entries)
        if (entry.position !== undefined) assert.strictEqual(entry.position, first.upTo)
      yield* lease.confirm(first.upTo!)
      const second = yield* lease.read(1)
      for (const entry of second.entries)
        if (entry.position !== undefined) assert.strictEqual(entry.position, second.upTo)
    })
  },
  {
    name: "a window with nothing committed since the confirmed position has no entries",
    run: Effect.gen(function* () {
      const lease = yield* acquired
      yield* commit([[message("a", 1)]])
      const window = yield* readAtLeast(lease, 1)
      yield* lease.confirm(window.upTo!)
      assert.deepStrictEqual((yield* lease.read(100)).entries, [])
    })
  },
  {
    name: "an emit in a rolled-back transaction is never read",
    requires: "transactional",
    run: Effect.gen(function* () {
      const lease = yield* acquired
      const writer = yield* LogWriter
      const transactor = yield* Transactor
      yield* transactor
        .withTransaction(Effect.andThen(writer.emit([message("x", 1)]), Effect.fail("rollback")))
        .pipe(Effect.ignore)
      const kept = [message("y", 2)]
      yield* commit([kept])
      const window = yield* readAtLeast(lease, 1)
      assert.deepStrictEqual(
        window.entries.map((m) => m.id),
        kept.map((m) => m.id)
      )
    })
  }
]

/**
 * Registers the suite under `describe(name)`.
 *
 * @since 0.1.0
 * @category suites
 */
export const suite = (name: string, options: Options): void => {
  const features = { transactional: true, ...options.features }
  const timeout = options.timeout ?? 60_000
  const test = <A, E>(title: string, body: Effect.Effect<A, E, Services | Scope.Scope>) =>
    it.live(title, () => Effect.provide(Effect.scoped(body), options.layer()), timeout)

  describe(`${name} (LogSource / LogWriter conformance)`, () => {
    for (const c of cases) {
      if (c.requires === undefined || features[c.requires]) test(c.name, c.run)
    }
  })
}
