/**
 * The conformance suite of the `Transactor` port, seen through the stores that join its
 * transactions: commit, rollback on failure / defect / interruption, nesting, isolation. Each test
 * builds a fresh layer.
 *
 * @since 0.1.0
 */
import { assert, describe, it } from "@effect/vitest"
import type { OutboxStoreError } from "@effect-outbox/core/Errors"
import { InboxStore } from "@effect-outbox/core/InboxStore"
import { OutboxStore } from "@effect-outbox/core/OutboxStore"
import { Transactor } from "@effect-outbox/core/Transactor"
import * as Deferred from "effect/Deferred"
import * as Effect from "effect/Effect"
import * as Exit from "effect/Exit"
import * as Fiber from "effect/Fiber"
import type * as Layer from "effect/Layer"
import * as Option from "effect/Option"
import { newMessage, newMessages, T0 } from "./internal/conformance.ts"

/**
 * @since 0.1.0
 * @category models
 */
export type Services = Transactor | OutboxStore | InboxStore

/**
 * Switches for behaviours an adapter may not offer. All default to `true`.
 *
 * @since 0.1.0
 * @category models
 */
export interface Features {
  /** Uncommitted writes are invisible to other callers. */
  readonly isolation?: boolean
}

/**
 * @since 0.1.0
 * @category models
 */
export interface Options<R = never> {
  readonly layer: () => Layer.Layer<Services | R, unknown>
  readonly features?: Features
  readonly timeout?: number
  /**
   * Run inside a transaction: makes the server end that transaction's connection (PostgreSQL:
   * `pg_terminate_backend(pg_backend_pid())`, as a shutdown or failover does; in memory: an
   * outage). Its own failure is ignored. Without it the outage case does not run.
   */
  readonly terminateConnection?: Effect.Effect<unknown, unknown, Services | R>
}

/**
 * Registers the suite under `describe(name)`.
 *
 * @since 0.1.0
 * @category suites
 */
export const suite = <R = never>(name: string, options: Options<R>): void => {
  const features = { isolation: true, ...options.features }
  const timeout = options.timeout ?? 60_000
  const test = <A, E>(title: string, body: Effect.Effect<A, E, Services | R>) =>
    it.live(title, () => Effect.provide(body, options.layer()), timeout)

  describe(`${name} (Transactor conformance)`, () => {
    test(
      "a successful transaction commits the outbox row and the inbox record together and returns its value",
      Effect.gen(function* () {
        const transactor = yield* Transactor
        const store = yield* OutboxStore
        const inbox = yield* InboxStore
        const message = yield* newMessage()
        const value = yield* transactor.withTransaction(
          Effect.gen(function* () {
            yield* store.insert([message])
            yield* inbox.record({ consumer: "c", identity: "event:commit" }, T0)
            return 42
          })
        )
        assert.strictEqual(value, 42)
        assert.isTrue(Option.isSome(yield* store.get(message.id)))
        assert.isTrue(yield* inbox.exists({ consumer: "c", identity: "event:commit" }))
      })
    )

    test(
      "a failure rolls back every store's writes and propagates the error unchanged",
      Effect.gen(function* () {
        const transactor = yield* Transactor
        const store = yield* OutboxStore
        const inbox = yield* InboxStore
        const message = yield* newMessage()
        const error = yield* Effect.flip(
          transactor.withTransaction(
            Effect.gen(function* () {
              yield* store.insert([message])
              yield* inbox.record({ consumer: "c", identity: "event:fail" }, T0)
              return yield* Effect.fail({ _tag: "DomainError", detail: "insufficient funds" } as const)
            })
          )
        )
        assert.deepStrictEqual(error, { _tag: "DomainError", detail: "insufficient funds" })
        assert.isTrue(Option.isNone(yield* store.get(message.id)))
        assert.isFalse(yield* inbox.exists({ consumer: "c", identity: "event:fail" }))
      })
    )

    test(
      "a defect rolls back and surfaces as the same defect",
      Effect.gen(function* () {
        const transactor = yield* Transactor
        const store = yield* OutboxStore
        const message = yield* newMessage()
        const exit = yield* Effect.exit(
          transactor.withTransaction(Effect.andThen(store.insert([message]), Effect.die("a bug")))
        )
        assert.isTrue(Exit.isFailure(exit) && Exit.hasDies(exit))
        assert.isTrue(Option.isNone(yield* store.get(message.id)))
      })
    )

    test(
      "an interrupted transaction rolls back",
      Effect.gen(function* () {
        const transactor = yield* Transactor
        const store = yield* OutboxStore
        const message = yield* newMessage()
        const inserted = yield* Deferred.make<void>()
        const fiber = yield* Effect.forkChild(
          transactor.withTransaction(
            Effect.gen(function* () {
              yield* store.insert([message])
              yield* Deferred.succeed(inserted, undefined)
              return yield* Effect.never
            })
          )
        )
        yield* Deferred.await(inserted)
        yield* Fiber.interrupt(fiber)
        assert.isTrue(Option.isNone(yield* store.get(message.id)))
        // The store is usable afterwards: the interrupted transaction released what it held.
        yield* store.insert([message])
        assert.isTrue(Option.isSome(yield* store.get(message.id)))
      })
    )

    test(
      "a nested transaction joins the outer one: its writes commit or roll back with the outer",
      Effect.gen(function* () {
        const transactor = yield* Transactor
        const store = yield* OutboxStore
        const kept = yield* newMessage()
        const dropped = yield* newMessage()
        yield* transactor.withTransaction(
          transactor.withTransaction(store.insert([kept])).pipe(
            Effect.andThen(
              Effect.gen(function* () {
                // The outer transaction reads the inner one's write.
                assert.isTrue(Option.isSome(yield* store.get(kept.id)))
              })
            )
          )
        )
        assert.isTrue(Option.isSome(yield* store.get(kept.id)))
        yield* Effect.flip(
          transactor.withTransaction(
            Effect.andThen(transactor.withTransaction(store.insert([dropped])), Effect.fail("outer fails"))
          )
        )
        assert.isTrue(Option.isNone(yield* store.get(dropped.id)))
      })
    )

    test(
      "a transaction reads its own writes",
      Effect.gen(function* () {
        const transactor = yield* Transactor
        const store = yield* OutboxStore
        const inbox = yield* InboxStore
        const message = yield* newMessage()
        yield* transactor.withTransaction(
          Effect.gen(function* () {
            yield* store.insert([message])
            yield* inbox.record({ consumer: "c", identity: "event:own" }, T0)
            assert.strictEqual(Option.getOrThrow(yield* store.get(message.id)).status, "PENDING")
            assert.isTrue(yield* inbox.exists({ consumer: "c", identity: "event:own" }))
            const claimed = yield* store.claim({ owner: "r", limit: 10, maxPerKey: 10, leaseMillis: 1_000, now: T0 })
            assert.deepStrictEqual(
              claimed.map((row) => row.id),
              [message.id]
            )
          })
        )
        assert.strictEqual(Option.getOrThrow(yield* store.get(message.id)).status, "DISPATCHING")
      })
    )

    const terminate = options.terminateConnection
    if (terminate !== undefined) {
      test(
        "a transaction whose connection the server ends fails with a retriable OutboxStoreError and commits nothing",
        Effect.gen(function* () {
          const transactor = yield* Transactor
          const store = yield* OutboxStore
          const [first, second] = yield* newMessages([{}, {}])
          const error = yield* Effect.flip(
            transactor.withTransaction(
              Effect.gen(function* () {
                yield* store.insert([first!])
                yield* Effect.ignore(terminate)
                yield* store.insert([second!])
              })
            )
          )
          assert.strictEqual((error as { readonly _tag?: unknown })._tag, "OutboxStoreError", String(error))
          // The database's trouble, not the request's: the consumer waits and retries, never
          // dead-letters on it (H2).
          assert.isTrue((error as OutboxStoreError).retriable, (error as OutboxStoreError).message)
          assert.isTrue(Option.isNone(yield* store.get(first!.id)))
          assert.isTrue(Option.isNone(yield* store.get(second!.id)))
          // A new transaction gets a new connection.
          yield* transactor.withTransaction(store.insert([first!]))
          assert.isTrue(Option.isSome(yield* store.get(first!.id)))
        })
      )
    }

    if (features.isolation) {
      test(
        "uncommitted writes are invisible outside the transaction until it commits",
        Effect.gen(function* () {
          const transactor = yield* Transactor
          const store = yield* OutboxStore
          const inbox = yield* InboxStore
          const message = yield* newMessage()
          const written = yield* Deferred.make<void>()
          const commit = yield* Deferred.make<void>()
          const fiber = yield* Effect.forkChild(
            transactor.withTransaction(
              Effect.gen(function* () {
                yield* store.insert([message])
                yield* inbox.record({ consumer: "c", identity: "event:isolated" }, T0)
                yield* Deferred.succeed(written, undefined)
                yield* Deferred.await(commit)
              })
            )
          )
          yield* Deferred.await(written)
          assert.isTrue(Option.isNone(yield* store.get(message.id)))
          assert.isFalse(yield* inbox.exists({ consumer: "c", identity: "event:isolated" }))
          yield* Deferred.succeed(commit, undefined)
          yield* Fiber.join(fiber)
          assert.isTrue(Option.isSome(yield* store.get(message.id)))
          assert.isTrue(yield* inbox.exists({ consumer: "c", identity: "event:isolated" }))
        })
      )
    }

    test(
      "writes outside a transaction apply at once",
      Effect.gen(function* () {
        const store = yield* OutboxStore
        const message = yield* newMessage()
        yield* store.insert([message])
        const seen = yield* Effect.forkChild(store.get(message.id))
        assert.isTrue(Option.isSome(yield* Fiber.join(seen)))
      })
    )
  })
}
