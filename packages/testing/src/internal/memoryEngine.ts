/**
 * The machinery every in-memory store call shares: the committed state, the fiber's current
 * transaction, fault injection and lock waiting. The port implementations are thin on top of it.
 *
 * @internal
 */
import { StoreError } from "@effect-outbox/core/Errors"
import * as Context from "effect/Context"
import * as Deferred from "effect/Deferred"
import * as Effect from "effect/Effect"
import * as Outage from "./memoryOutage.ts"
import * as Store from "./memoryStore.ts"

// The fault vocabulary lives here, with the engine that applies it; InMemoryDatabase re-exports
// it (with its documentation) so that no internal module imports the public one.
export type Operation =
  | "begin"
  | "commit"
  | "outbox.insert"
  | "outbox.claim"
  | "outbox.transition"
  | "outbox.findStale"
  | "outbox.get"
  | "outbox.list"
  | "outbox.stats"
  | "outbox.purge"
  | "inbox.record"
  | "inbox.exists"
  | "inbox.horizon"
  | "inbox.purge"
  | "assignment.reserve"
  | "assignment.lookup"
  | "assignment.counts"

export interface FaultPlan {
  readonly count: number
  readonly operations?: ReadonlyArray<Operation>
  readonly timing?: "before" | "after"
  readonly retriable?: boolean
  readonly reason?: string
}

/** The open transaction of the current fiber, if any (of any in-memory database). */
export const CurrentTransaction = Context.Reference<Store.Transaction | undefined>(
  "@effect-outbox/testing/InMemoryDatabase/CurrentTransaction",
  { defaultValue: () => undefined }
)

export type CallResult<A> = { readonly result: A; readonly touched?: Iterable<string> } | { readonly error: StoreError }

export interface FaultState {
  plans: Array<{ remaining: number; plan: FaultPlan }>
  hook: ((operation: Operation) => StoreError | undefined) | undefined
  fired: number
}

export interface Engine {
  readonly store: Store.Store
  readonly faults: FaultState
  /** A server outage in progress (or over), as PostgreSQL reports it. */
  readonly outage: Outage.OutageState
  readonly takeFault: (operation: Operation, timing: "before" | "after") => StoreError | undefined
  /** The current transaction when it belongs to this database. */
  readonly currentTx: Effect.Effect<Store.Transaction | undefined, StoreError>
  /**
   * Runs one store call: fault before, wait for the locks it needs, run `body` atomically, lock
   * what it wrote (inside a transaction), fault after.
   */
  readonly call: <A>(
    operation: Operation,
    resources: (tx: Store.Transaction | undefined) => Iterable<string>,
    body: (tx: Store.Transaction | undefined) => CallResult<A>
  ) => Effect.Effect<A, StoreError>
  /** A call that writes nothing and waits for no lock. */
  readonly read: <A>(
    operation: Operation,
    body: (tx: Store.Transaction | undefined) => A
  ) => Effect.Effect<A, StoreError>
}

export const makeEngine = (): Engine => {
  const store = Store.makeStore()
  const faults: FaultState = { plans: [], hook: undefined, fired: 0 }
  const outage = Outage.makeState()

  const takeFault = (operation: Operation, timing: "before" | "after"): StoreError | undefined => {
    if (timing === "before" && faults.hook !== undefined) {
      const error = faults.hook(operation)
      if (error !== undefined) {
        faults.fired++
        return error
      }
    }
    const index = faults.plans.findIndex(
      ({ plan }) =>
        (plan.timing ?? "before") === timing && (plan.operations === undefined || plan.operations.includes(operation))
    )
    if (index < 0) return undefined
    const entry = faults.plans[index]!
    entry.remaining--
    if (entry.remaining <= 0) faults.plans.splice(index, 1)
    faults.fired++
    return new StoreError({
      operation,
      reason: entry.plan.reason ?? `injected fault (${timing})`,
      kind: (entry.plan.retriable ?? true) ? "unavailable" : "permanent"
    })
  }

  const currentTx = Effect.gen(function* () {
    const tx = yield* CurrentTransaction
    if (tx === undefined || tx.store !== store) return undefined
    if (tx.status !== "open") {
      return yield* new StoreError({
        operation: "transaction",
        reason: "the transaction already ended (a fiber forked inside it outlived it)",
        kind: "permanent"
      })
    }
    return tx
  })

  const call = <A>(
    operation: Operation,
    resources: (tx: Store.Transaction | undefined) => Iterable<string>,
    body: (tx: Store.Transaction | undefined) => CallResult<A>
  ): Effect.Effect<A, StoreError> =>
    Effect.gen(function* () {
      const tx = yield* currentTx
      const down = Outage.errorFor(outage, operation, tx)
      if (down !== undefined) return yield* down
      const before = takeFault(operation, "before")
      if (before !== undefined) return yield* before
      while (true) {
        const holder = Store.blocker(store, tx, resources(tx))
        if (holder === undefined) break
        if (Store.wouldDeadlock(tx, holder)) {
          return yield* new StoreError({
            operation,
            reason: "deadlock detected: two transactions wait for each other's rows; retry the transaction",
            kind: "unavailable"
          })
        }
        if (tx !== undefined) tx.waitingFor = holder
        yield* Effect.ensuring(
          Deferred.await(holder.done),
          Effect.sync(() => {
            if (tx !== undefined) tx.waitingFor = undefined
          })
        )
      }
      const outcome = body(tx)
      if ("error" in outcome) return yield* outcome.error
      const { result, touched } = outcome
      if (touched !== undefined) Store.lock(tx, touched)
      const after = takeFault(operation, "after")
      if (after !== undefined) return yield* after
      return result
    })

  const read = <A>(operation: Operation, body: (tx: Store.Transaction | undefined) => A) =>
    call(
      operation,
      () => [],
      (tx) => ({ result: body(tx) })
    )

  return { store, faults, outage, takeFault, currentTx, call, read }
}
