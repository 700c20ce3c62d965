/**
 * `LogSource` cases: one lease at a time, reading ahead of the confirmed position (`readAfter`),
 * and waiting for more (`awaitMore`).
 *
 * @internal
 */
import { assert } from "@effect/vitest"
import { LogSource } from "@effect-outbox/core/LogSource"
import * as Duration from "effect/Duration"
import * as Effect from "effect/Effect"
import * as Fiber from "effect/Fiber"
import * as Option from "effect/Option"
import { acquired, type Case, commit, message, readAtLeast } from "./support.ts"

export const oneLease: Case = {
  name: "one lease: a second acquire gets None while the first is held, Some once it is released",
  run: () =>
    Effect.gen(function* () {
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
}

export const readAfterFollows: Case = {
  name: "readAfter reads the window after an unconfirmed one and confirms nothing; after a re-read it follows the new position",
  run: () =>
    Effect.gen(function* () {
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
}

export const awaitMoreWakes: Case = {
  name: "awaitMore waits out its timeout while nothing commits, returns on the next commit, and at once while a transaction is unconfirmed",
  run: () =>
    Effect.gen(function* () {
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
}
