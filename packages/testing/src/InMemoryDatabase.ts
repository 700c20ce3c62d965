/**
 * One in-memory "database" behind the storage ports: `Transactor`, `OutboxStore`, `InboxStore`
 * and `PartitionAssignmentStore`. Deterministic (no wall clock: callers pass `now`), with real
 * transaction semantics and fault injection, and an inspection handle for tests and simulations.
 *
 * - `withTransaction` stages writes in a transaction carried by the fiber's context; success
 *   applies them atomically, failure / defect / interruption discards them. Nested calls join.
 * - READ COMMITTED isolation: a transaction sees committed rows and its own writes. Rows it wrote
 *   stay locked until it ends; other writers wait, `claim` and `purge` skip them.
 * - Calls outside a transaction apply at once.
 *
 * @since 0.1.0
 */
import { InboxStore } from "@effect-outbox/core/InboxStore"
import { OutboxStoreError } from "@effect-outbox/core/Errors"
import type { OutboxStatus } from "@effect-outbox/core/Lifecycle"
import type { EventId, OutboxMessage } from "@effect-outbox/core/OutboxMessage"
import { OutboxStore, type OutboxStats, type TransitionOutcome } from "@effect-outbox/core/OutboxStore"
import { PartitionAssignmentStore, type Reservation } from "@effect-outbox/core/PartitionAssignmentStore"
import { Transactor } from "@effect-outbox/core/Transactor"
import * as Context from "effect/Context"
import * as Deferred from "effect/Deferred"
import * as Effect from "effect/Effect"
import * as Exit from "effect/Exit"
import * as Layer from "effect/Layer"
import * as Option from "effect/Option"
import * as Store from "./internal/memoryStore.ts"
import { applyTransition, claimed, selectClaimable } from "./internal/outboxRules.ts"

/**
 * A status change in the inspection log (`from: null` for an insert).
 *
 * @since 0.1.0
 * @category models
 */
export type StatusChange = Store.StatusChange

/**
 * @since 0.1.0
 * @category models
 */
export type InboxRecord = Store.InboxRecord

/**
 * @since 0.1.0
 * @category models
 */
export type Assignment = Store.Assignment

/**
 * Every store call a fault can target. `"commit"` is the commit of an outermost transaction;
 * `"begin"` is its start.
 *
 * @since 0.1.0
 * @category models
 */
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
  | "inbox.purge"
  | "assignment.reserve"
  | "assignment.lookup"
  | "assignment.counts"

/**
 * A fault plan: the next `count` calls to one of `operations` (all operations when absent) fail.
 *
 * - `timing: "before"` (default): the call fails and writes nothing.
 * - `timing: "after"`: the call's writes are applied (or staged, inside a transaction), then
 *   the caller sees the failure, like a lost acknowledgement of a database round trip. For
 *   `"commit"` this means the transaction committed and the caller was told it failed.
 *
 * @since 0.1.0
 * @category models
 */
export interface FaultPlan {
  readonly count: number
  readonly operations?: ReadonlyArray<Operation>
  readonly timing?: "before" | "after"
  readonly retriable?: boolean
  readonly reason?: string
}

/**
 * The control and inspection handle of one in-memory database.
 *
 * @since 0.1.0
 * @category models
 */
export interface Control {
  /** Committed outbox rows, ordered by `seq`. */
  readonly rows: Effect.Effect<ReadonlyArray<OutboxMessage>>
  /** Committed status changes, in commit order. Rolled-back changes never appear. */
  readonly history: Effect.Effect<ReadonlyArray<StatusChange>>
  /** Committed processed-message records. */
  readonly processed: Effect.Effect<ReadonlyArray<InboxRecord>>
  /** Committed processed keys as `consumer \u0000 identity` strings. */
  readonly processedKeys: Effect.Effect<ReadonlySet<string>>
  /** Committed partition assignments. */
  readonly assignments: Effect.Effect<ReadonlyArray<Assignment>>
  /** Count of committed and rolled-back outermost transactions. */
  readonly transactions: Effect.Effect<{ readonly commits: number; readonly rollbacks: number }>
  /** Appends a fault plan; plans are consumed in order. */
  readonly failNext: (plan: FaultPlan) => Effect.Effect<void>
  /**
   * A general hook called on every store call before the queued plans; returning an error fails
   * the call before it writes anything. `undefined` removes it.
   */
  readonly setFaultHook: (
    hook: ((operation: Operation) => OutboxStoreError | undefined) | undefined
  ) => Effect.Effect<void>
  /** Drops every queued fault plan and the hook. */
  readonly clearFaults: Effect.Effect<void>
  /** How many injected faults have fired so far. */
  readonly faultsFired: Effect.Effect<number>
}

/**
 * The control handle as a service, provided by {@link layer}.
 *
 * @since 0.1.0
 * @category services
 */
export class InMemoryDatabase extends Context.Service<InMemoryDatabase, Control>()(
  "@effect-outbox/testing/InMemoryDatabase"
) {}

/**
 * A database built by {@link make}: the four port implementations and the control handle. Build
 * layers from it with {@link layerFrom} to share one database between several programs (e.g. a
 * relay that "crashes" and restarts over the same rows).
 *
 * @since 0.1.0
 * @category models
 */
export interface Database {
  readonly control: Control
  readonly transactor: Transactor["Service"]
  readonly outboxStore: OutboxStore["Service"]
  readonly inboxStore: InboxStore["Service"]
  readonly partitionAssignmentStore: PartitionAssignmentStore["Service"]
}

/** The open transaction of the current fiber, if any (of any in-memory database). */
const CurrentTransaction = Context.Reference<Store.Transaction | undefined>(
  "@effect-outbox/testing/InMemoryDatabase/CurrentTransaction",
  { defaultValue: () => undefined }
)

type CallResult<A> =
  | { readonly result: A; readonly touched?: Iterable<string> }
  | { readonly error: OutboxStoreError }

interface FaultState {
  plans: Array<{ remaining: number; plan: FaultPlan }>
  hook: ((operation: Operation) => OutboxStoreError | undefined) | undefined
  fired: number
}

/**
 * Creates a fresh, empty database.
 *
 * @since 0.1.0
 * @category constructors
 */
export const make: Effect.Effect<Database> = Effect.sync(() => makeUnsafe())

/**
 * @since 0.1.0
 * @category constructors
 */
export const makeUnsafe = (): Database => {
  const store = Store.makeStore()
  const faults: FaultState = { plans: [], hook: undefined, fired: 0 }

  const takeFault = (operation: Operation, timing: "before" | "after"): OutboxStoreError | undefined => {
    if (timing === "before" && faults.hook !== undefined) {
      const error = faults.hook(operation)
      if (error !== undefined) {
        faults.fired++
        return error
      }
    }
    const index = faults.plans.findIndex(({ plan }) =>
      (plan.timing ?? "before") === timing && (plan.operations === undefined || plan.operations.includes(operation))
    )
    if (index < 0) return undefined
    const entry = faults.plans[index]!
    entry.remaining--
    if (entry.remaining <= 0) faults.plans.splice(index, 1)
    faults.fired++
    return new OutboxStoreError({
      operation,
      reason: entry.plan.reason ?? `injected fault (${timing})`,
      retriable: entry.plan.retriable ?? true
    })
  }

  /** The current transaction when it belongs to this database. */
  const currentTx = Effect.gen(function*() {
    const tx = yield* CurrentTransaction
    if (tx === undefined || tx.store !== store) return undefined
    if (tx.status !== "open") {
      return yield* new OutboxStoreError({
        operation: "transaction",
        reason: "the transaction already ended (a fiber forked inside it outlived it)",
        retriable: false
      })
    }
    return tx
  })

  /**
   * Runs one store call: fault before, wait for the locks it needs, run `body` atomically, lock
   * what it wrote (inside a transaction), fault after.
   */
  const call = <A>(
    operation: Operation,
    resources: (tx: Store.Transaction | undefined) => Iterable<string>,
    body: (tx: Store.Transaction | undefined) => CallResult<A>
  ): Effect.Effect<A, OutboxStoreError> =>
    Effect.gen(function*() {
      const tx = yield* currentTx
      const before = takeFault(operation, "before")
      if (before !== undefined) return yield* before
      while (true) {
        const holder = Store.blocker(store, tx, resources(tx))
        if (holder === undefined) break
        if (Store.wouldDeadlock(tx, holder)) {
          return yield* new OutboxStoreError({
            operation,
            reason: "deadlock detected: two transactions wait for each other's rows; retry the transaction",
            retriable: true
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
    call(operation, () => [], (tx) => ({ result: body(tx) }))

  // ------------------------------------------------------------------------------------------
  // Transactor
  // ------------------------------------------------------------------------------------------

  const transactor: Transactor["Service"] = {
    withTransaction: <A, E, R>(effect: Effect.Effect<A, E, R>) =>
      Effect.gen(function*() {
        const outer = yield* currentTx
        if (outer !== undefined) return yield* effect
        return yield* Effect.uninterruptibleMask((restore) =>
          Effect.gen(function*() {
            const beginFault = takeFault("begin", "before")
            if (beginFault !== undefined) return yield* beginFault
            const tx = Store.begin(store)
            const exit = yield* Effect.exit(restore(Effect.provideService(effect, CurrentTransaction, tx)))
            if (Exit.isFailure(exit)) {
              Store.rollback(tx)
              return yield* exit
            }
            const before = takeFault("commit", "before")
            if (before !== undefined) {
              Store.rollback(tx)
              return yield* before
            }
            Store.commit(tx)
            const after = takeFault("commit", "after")
            if (after !== undefined) return yield* after
            return exit.value
          })
        )
      })
  }

  // ------------------------------------------------------------------------------------------
  // OutboxStore
  // ------------------------------------------------------------------------------------------

  const outboxStore: OutboxStore["Service"] = {
    insert: (messages) =>
      call<void>(
        "outbox.insert",
        () => messages.map((m) => Store.outboxResource(m.id)),
        (tx) => {
          const seen = new Set<string>()
          for (const m of messages) {
            if (seen.has(m.id) || Store.readRow(store, tx, m.id) !== undefined) {
              return {
                error: new OutboxStoreError({
                  operation: "outbox.insert",
                  reason: `an outbox event with id ${m.id} already exists (ids are unique)`,
                  retriable: false
                })
              }
            }
            seen.add(m.id)
          }
          for (const m of messages) {
            const row: OutboxMessage = {
              id: m.id,
              seq: store.nextSeq++,
              topic: m.topic,
              key: m.key,
              partition: m.partition,
              headers: { ...m.headers },
              payload: m.payload,
              status: m.status,
              attempts: 0,
              availableAt: m.availableAt,
              leaseOwner: null,
              leaseExpiresAt: null,
              receipt: null,
              lastError: null,
              createdAt: m.createdAt,
              updatedAt: m.createdAt,
              publishedAt: null,
              processedAt: null
            }
            Store.writeRow(store, tx, row)
            Store.recordChange(store, tx, {
              id: m.id,
              from: null,
              to: m.status,
              at: m.createdAt,
              operation: "insert"
            })
          }
          return { result: undefined, touched: messages.map((m) => Store.outboxResource(m.id)) }
        }
      ),

    claim: (request) =>
      call("outbox.claim", () => [], (tx) => {
        const rows = Store.visibleRows(store, tx)
        const chosen = selectClaimable(
          rows,
          request,
          (row) => Store.isLockedByOther(store, tx, Store.outboxResource(row.id))
        )
        const result = chosen.map((row) => {
          const next = claimed(row, request)
          Store.writeRow(store, tx, next)
          Store.recordChange(store, tx, {
            id: row.id,
            from: row.status,
            to: next.status,
            at: request.now,
            operation: "claim"
          })
          return next
        })
        return { result, touched: result.map((row) => Store.outboxResource(row.id)) }
      }),

    transition: (requests) =>
      call(
        "outbox.transition",
        () => requests.map((r) => Store.outboxResource(r.id)),
        (tx) => {
          const outcomes: Array<TransitionOutcome> = []
          const touched: Array<string> = []
          for (const request of requests) {
            const row = Store.readRow(store, tx, request.id)
            const { next, outcome } = applyTransition(row, request)
            if (next !== undefined && row !== undefined) {
              Store.writeRow(store, tx, next)
              touched.push(Store.outboxResource(request.id))
              if (outcome.outcome === "applied") {
                Store.recordChange(store, tx, {
                  id: request.id,
                  from: row.status,
                  to: next.status,
                  at: request.now,
                  operation: "transition"
                })
              }
            }
            outcomes.push(outcome)
          }
          return { result: outcomes, touched }
        }
      ),

    findStale: (now, limit) =>
      read("outbox.findStale", (tx) =>
        Store.visibleRows(store, tx)
          .filter((row) => row.status === "DISPATCHING" && row.leaseExpiresAt !== null && row.leaseExpiresAt < now)
          .sort((a, b) => (a.leaseExpiresAt! - b.leaseExpiresAt!) || (a.seq - b.seq))
          .slice(0, Math.max(0, limit))),

    get: (id) => read("outbox.get", (tx) => Option.fromUndefinedOr(Store.readRow(store, tx, id))),

    list: (filter) =>
      read("outbox.list", (tx) =>
        Store.visibleRows(store, tx)
          .filter((row) =>
            (filter.statuses === undefined || filter.statuses.includes(row.status)) &&
            (filter.topic === undefined || row.topic === filter.topic) &&
            (filter.ids === undefined || filter.ids.includes(row.id)) &&
            (filter.createdBefore === undefined || row.createdAt < filter.createdBefore)
          )
          .slice(0, Math.max(0, filter.limit))),

    stats: (now) =>
      read("outbox.stats", (tx): OutboxStats => {
        const byStatus: { [S in OutboxStatus]?: number } = {}
        let oldestPendingCreatedAt: number | null = null
        let staleLeases = 0
        for (const row of Store.visibleRows(store, tx)) {
          byStatus[row.status] = (byStatus[row.status] ?? 0) + 1
          if (row.status === "PENDING") {
            oldestPendingCreatedAt = oldestPendingCreatedAt === null
              ? row.createdAt
              : Math.min(oldestPendingCreatedAt, row.createdAt)
          }
          if (row.status === "DISPATCHING" && row.leaseExpiresAt !== null && row.leaseExpiresAt < now) staleLeases++
        }
        return { byStatus, oldestPendingCreatedAt, staleLeases }
      }),

    purge: (request) =>
      call("outbox.purge", () => [], (tx) => {
        const doomed = Store.visibleRows(store, tx)
          .filter((row) =>
            request.statuses.includes(row.status) &&
            row.updatedAt < request.olderThan &&
            !Store.isLockedByOther(store, tx, Store.outboxResource(row.id))
          )
          .slice(0, Math.max(0, request.limit))
        for (const row of doomed) Store.deleteRow(store, tx, row.id)
        return { result: doomed.length, touched: doomed.map((row) => Store.outboxResource(row.id)) }
      })
  }

  // ------------------------------------------------------------------------------------------
  // InboxStore
  // ------------------------------------------------------------------------------------------

  const inboxStore: InboxStore["Service"] = {
    record: (key, now) => {
      const k = Store.inboxKey(key.consumer, key.identity)
      return call<"recorded" | "duplicate">("inbox.record", () => [Store.inboxResource(k)], (tx) => {
        if (Store.readInbox(store, tx, k) !== undefined) return { result: "duplicate" }
        Store.writeInbox(store, tx, k, { consumer: key.consumer, identity: key.identity, recordedAt: now })
        return { result: "recorded", touched: [Store.inboxResource(k)] }
      })
    },
    exists: (key) =>
      read("inbox.exists", (tx) => Store.readInbox(store, tx, Store.inboxKey(key.consumer, key.identity)) !== undefined),
    purge: (olderThan, limit) =>
      call("inbox.purge", () => [], (tx) => {
        const doomed = Store.visibleInbox(store, tx)
          .filter(([k, record]) =>
            record.recordedAt < olderThan && !Store.isLockedByOther(store, tx, Store.inboxResource(k))
          )
          .sort((a, b) => a[1].recordedAt - b[1].recordedAt)
          .slice(0, Math.max(0, limit))
        for (const [k] of doomed) Store.writeInbox(store, tx, k, null)
        return { result: doomed.length, touched: doomed.map(([k]) => Store.inboxResource(k)) }
      })
  }

  // ------------------------------------------------------------------------------------------
  // PartitionAssignmentStore
  // ------------------------------------------------------------------------------------------

  const partitionAssignmentStore: PartitionAssignmentStore["Service"] = {
    reserve: (request) =>
      call<Reservation>("assignment.reserve", () => [Store.assignmentResource(request.topic)], (tx) => {
        const assignments = Store.visibleAssignments(store, tx, request.topic)
        const existing = assignments.find((a) => a.ownerId === request.ownerId)
        if (existing !== undefined) {
          return { result: { ...existing, created: false } }
        }
        const counts = new Map<number, number>()
        let highest = -1
        for (const a of assignments) {
          counts.set(a.partition, (counts.get(a.partition) ?? 0) + 1)
          highest = Math.max(highest, a.partition)
        }
        let partition = 0
        while (partition <= highest && (counts.get(partition) ?? 0) >= request.maxPerPartition) partition++
        const assignment: Store.Assignment = { topic: request.topic, ownerId: request.ownerId, partition }
        Store.writeAssignment(store, tx, assignment)
        return { result: { ...assignment, created: true }, touched: [Store.assignmentResource(request.topic)] }
      }),
    lookup: (topic, ownerId) =>
      read("assignment.lookup", (tx) =>
        Option.fromUndefinedOr(
          Store.visibleAssignments(store, tx, topic).find((a) => a.ownerId === ownerId)?.partition
        )),
    counts: (topic) =>
      read("assignment.counts", (tx) => {
        const counts = new Map<number, number>()
        for (const a of Store.visibleAssignments(store, tx, topic)) {
          counts.set(a.partition, (counts.get(a.partition) ?? 0) + 1)
        }
        return new Map([...counts].sort((a, b) => a[0] - b[0])) as ReadonlyMap<number, number>
      })
  }

  // ------------------------------------------------------------------------------------------
  // Control
  // ------------------------------------------------------------------------------------------

  const control: Control = {
    rows: Effect.sync(() => [...store.outbox.values()].sort((a, b) => a.seq - b.seq)),
    history: Effect.sync(() => [...store.history]),
    processed: Effect.sync(() => [...store.inbox.values()]),
    processedKeys: Effect.sync(() => new Set(store.inbox.keys())),
    assignments: Effect.sync(() => [...store.assignments.values()]),
    transactions: Effect.sync(() => ({ commits: store.commits, rollbacks: store.rollbacks })),
    failNext: (plan) =>
      Effect.sync(() => {
        if (plan.count > 0) faults.plans.push({ remaining: plan.count, plan })
      }),
    setFaultHook: (hook) =>
      Effect.sync(() => {
        faults.hook = hook
      }),
    clearFaults: Effect.sync(() => {
      faults.plans = []
      faults.hook = undefined
    }),
    faultsFired: Effect.sync(() => faults.fired)
  }

  return { control, transactor, outboxStore, inboxStore, partitionAssignmentStore }
}

/**
 * The services of an existing database, so several programs can share it.
 *
 * @since 0.1.0
 * @category layers
 */
export const layerFrom = (
  database: Database
): Layer.Layer<InMemoryDatabase | Transactor | OutboxStore | InboxStore | PartitionAssignmentStore> =>
  Layer.mergeAll(
    Layer.succeed(InMemoryDatabase)(database.control),
    Layer.succeed(Transactor)(database.transactor),
    Layer.succeed(OutboxStore)(database.outboxStore),
    Layer.succeed(InboxStore)(database.inboxStore),
    Layer.succeed(PartitionAssignmentStore)(database.partitionAssignmentStore)
  )

/**
 * A fresh database each time the layer is built.
 *
 * @since 0.1.0
 * @category layers
 */
export const layer: Layer.Layer<InMemoryDatabase | Transactor | OutboxStore | InboxStore | PartitionAssignmentStore> =
  Layer.unwrap(Effect.map(make, layerFrom))

/**
 * The processed-key string {@link Control.processedKeys} uses.
 *
 * @since 0.1.0
 * @category utils
 */
export const processedKey = (consumer: string, identity: string): string => Store.inboxKey(consumer, identity)

/**
 * Convenience: the status of a committed row.
 *
 * @since 0.1.0
 * @category utils
 */
export const statusOf = (control: Control, id: EventId): Effect.Effect<OutboxStatus | undefined> =>
  Effect.map(control.rows, (rows) => rows.find((row) => row.id === id)?.status)
