/**
 * `LogSource` / `LogWriter` cases: what a window holds — events whole and in commit order, whole
 * transactions, positions — and that reading does not consume while confirming does; a rolled-back
 * emit is never read.
 *
 * @internal
 */
import { assert } from "@effect/vitest"
import { LogWriter } from "@effect-outbox/core/LogWriter"
import { Transactor } from "@effect-outbox/core/Transactor"
import * as Effect from "effect/Effect"
import { acquired, type Case, commit, message, readAtLeast, written } from "./support.ts"

export const readsInCommitOrder: Case = {
  name: "events come back whole and in commit order; reading does not consume; confirm does",
  run: () =>
    Effect.gen(function* () {
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
}

export const windowEndsOnTransaction: Case = {
  name: "a window ends on a transaction boundary: a transaction is never split",
  run: () =>
    Effect.gen(function* () {
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
}

export const positionIsUpTo: Case = {
  name: "an entry's position, when the source gives one, is the upTo of the window its transaction ends",
  run: () =>
    Effect.gen(function* () {
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
}

export const emptyWindow: Case = {
  name: "a window with nothing committed since the confirmed position has no entries",
  run: () =>
    Effect.gen(function* () {
      const lease = yield* acquired
      yield* commit([[message("a", 1)]])
      const window = yield* readAtLeast(lease, 1)
      yield* lease.confirm(window.upTo!)
      assert.deepStrictEqual((yield* lease.read(100)).entries, [])
    })
}

export const rollbackNeverRead: Case = {
  name: "an emit in a rolled-back transaction is never read",
  requires: "transactional",
  run: () =>
    Effect.gen(function* () {
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
