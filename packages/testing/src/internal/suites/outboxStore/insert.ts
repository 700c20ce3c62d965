/**
 * `OutboxStore` cases: inserts, their transactions and their isolation.
 *
 * @internal
 */
import { assert } from "@effect/vitest"
import { OutboxStore } from "@effect-outbox/core/OutboxStore"
import { Transactor } from "@effect-outbox/core/Transactor"
import * as Deferred from "effect/Deferred"
import * as Effect from "effect/Effect"
import * as Fiber from "effect/Fiber"
import * as Option from "effect/Option"
import { newMessage, newMessages, T0 } from "../../conformance.ts"
import { type Case, claimRequest, ids } from "./support.ts"

export const insertStoresEveryField: Case = {
  name: "insert stores every field; rows read back in insertion (seq) order",
  run: () =>
    Effect.gen(function* () {
      const store = yield* OutboxStore
      const payload = new Uint8Array([0, 1, 2, 127, 128, 254, 255])
      const first = yield* newMessage({
        topic: "orders",
        key: "user-1",
        partition: 3,
        headers: { traceparent: "00-abc-def-01" },
        payload,
        availableAt: T0 + 5,
        createdAt: T0 - 10
      })
      const rest = yield* newMessages([{ key: null }, { status: "PREQUEUED" }])
      yield* store.insert([first])
      yield* store.insert(rest)
      const row = Option.getOrThrow(yield* store.get(first.id))
      assert.strictEqual(row.topic, "orders")
      assert.strictEqual(row.key, "user-1")
      assert.strictEqual(row.partition, 3)
      assert.deepStrictEqual(row.headers, first.headers)
      assert.deepStrictEqual([...row.payload], [...payload])
      assert.strictEqual(row.status, "PENDING")
      assert.strictEqual(row.attempts, 0)
      assert.strictEqual(row.availableAt, T0 + 5)
      assert.strictEqual(row.createdAt, T0 - 10)
      assert.strictEqual(row.leaseOwner, null)
      assert.strictEqual(row.leaseExpiresAt, null)
      assert.strictEqual(row.receipt, null)
      assert.strictEqual(row.lastError, null)
      assert.strictEqual(row.publishedAt, null)
      assert.strictEqual(row.processedAt, null)
      const listed = yield* store.list({ limit: 10 })
      assert.deepStrictEqual(ids(listed), [first.id, rest[0]!.id, rest[1]!.id])
      assert.isTrue(listed[0]!.seq < listed[1]!.seq && listed[1]!.seq < listed[2]!.seq)
      assert.strictEqual(listed[1]!.key, null)
      assert.strictEqual(listed[2]!.status, "PREQUEUED")
      assert.isTrue(Option.isNone(yield* store.get((yield* newMessage()).id)))
    })
}

export const rolledBackInsert: Case = {
  name: "an insert inside a rolled-back transaction leaves nothing behind",
  run: () =>
    Effect.gen(function* () {
      const store = yield* OutboxStore
      const transactor = yield* Transactor
      const messages = yield* newMessages([{ key: "a" }, { key: "b" }])
      const error = yield* Effect.flip(
        transactor.withTransaction(Effect.andThen(store.insert(messages), Effect.fail("rolled back" as const)))
      )
      assert.strictEqual(error, "rolled back")
      assert.deepStrictEqual(yield* store.list({ limit: 10 }), [])
      assert.deepStrictEqual(yield* store.claim(claimRequest()), [])
      assert.isTrue(Option.isNone(yield* store.get(messages[0]!.id)))
    })
}

export const uncommittedInsertInvisible: Case = {
  name: "an uncommitted insert is invisible to a claim until its transaction commits",
  requires: "isolation",
  run: () =>
    Effect.gen(function* () {
      const store = yield* OutboxStore
      const transactor = yield* Transactor
      const message = yield* newMessage()
      const inserted = yield* Deferred.make<void>()
      const commit = yield* Deferred.make<void>()
      const writer = yield* Effect.forkChild(
        transactor.withTransaction(
          Effect.gen(function* () {
            yield* store.insert([message])
            yield* Deferred.succeed(inserted, undefined)
            yield* Deferred.await(commit)
          })
        )
      )
      yield* Deferred.await(inserted)
      assert.deepStrictEqual(yield* store.claim(claimRequest()), [])
      yield* Deferred.succeed(commit, undefined)
      yield* Fiber.join(writer)
      assert.deepStrictEqual(ids(yield* store.claim(claimRequest())), [message.id])
    })
}
