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
import type { StoreError } from "@effect-outbox/core/Errors"
import { InboxStore } from "@effect-outbox/core/InboxStore"
import type { OutboxStatus } from "@effect-outbox/core/Lifecycle"
import type { EventId, OutboxMessage } from "@effect-outbox/core/OutboxMessage"
import { OutboxStore } from "@effect-outbox/core/OutboxStore"
import { PartitionAssignmentStore } from "@effect-outbox/core/PartitionAssignmentStore"
import { Transactor } from "@effect-outbox/core/Transactor"
import * as Context from "effect/Context"
import * as Effect from "effect/Effect"
import * as Layer from "effect/Layer"
import * as Engine from "./internal/memoryEngine.ts"
import * as MemoryInboxStore from "./internal/memoryInboxStore.ts"
import * as Outage from "./internal/memoryOutage.ts"
import * as MemoryOutboxStore from "./internal/memoryOutboxStore.ts"
import * as MemoryPartitionAssignmentStore from "./internal/memoryPartitionAssignmentStore.ts"
import * as Store from "./internal/memoryStore.ts"
import * as MemoryTransactor from "./internal/memoryTransactor.ts"

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
export type Operation = Engine.Operation

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
export type FaultPlan = Engine.FaultPlan

/**
 * The phases of a PostgreSQL outage, each with the errors the server gives in it:
 *
 * - `"shutdown"`: `pg_ctl stop -m fast` in progress: new connections fail with SQLSTATE `57P03`
 *   ("the database system is shutting down"), open transactions are terminated with `57P01`.
 * - `"down"`: the server is stopped: connections are refused (`ECONNREFUSED`); open
 *   transactions see `08006` (connection lost).
 * - `"startup"`: starting or recovering: new connections fail with `57P03` ("the database
 *   system is starting up").
 * - `"crash"`: killed, or the network dropped: like `"down"`, without a shutdown phase first.
 *
 * @since 0.1.0
 * @category models
 */
export type OutageMode = Outage.OutageMode

/**
 * Maps a driver error to the port's error, per operation (adapter-pg's `fromSqlError` shape).
 *
 * @since 0.1.0
 * @category models
 */
export type SqlErrorMapping = Outage.SqlErrorMapping

/**
 * The default mapping: the classification adapter-pg's `PgErrors.fromSqlError` applies (same
 * reason text, same kind), kept here so the fakes need no adapter. A test of a
 * wrong classification builds its own from this one.
 *
 * @since 0.1.0
 * @category models
 */
export const defaultSqlErrorMapping: SqlErrorMapping = Outage.defaultMapping

/**
 * The former name of {@link defaultSqlErrorMapping}.
 *
 * @since 0.1.0
 * @category models
 * @deprecated Use `defaultSqlErrorMapping`.
 */
export const adapterSqlErrorMapping: SqlErrorMapping = defaultSqlErrorMapping

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
  readonly setFaultHook: (hook: ((operation: Operation) => StoreError | undefined) | undefined) => Effect.Effect<void>
  /**
   * Takes the server out of service, or moves an outage to its next phase (see
   * {@link OutageMode}). Every call fails with the error PostgreSQL and `@effect/sql-pg` give in
   * that phase, mapped to an `StoreError` by adapter-pg's classification (or the one set
   * with {@link setSqlErrorMapping}), exactly as the real adapter reports it. Transactions open
   * when an outage begins lost their connection: their next statement or COMMIT fails (`57P01`
   * in a shutdown, `08006` otherwise), even once the server is back. `lostCommitAcks`: that many
   * COMMITs of such transactions are written, and their caller still gets `08006`.
   */
  readonly outage: (outage: { readonly mode: OutageMode; readonly lostCommitAcks?: number }) => Effect.Effect<void>
  /** The server serves again. */
  readonly recover: Effect.Effect<void>
  /**
   * How outage errors (`SqlError`s as the driver builds them) become `StoreError`s. Default:
   * adapter-pg's own mapping. Set a different one to test the consequences of a wrong
   * classification; `undefined` restores the default.
   */
  readonly setSqlErrorMapping: (mapping: SqlErrorMapping | undefined) => Effect.Effect<void>
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
  const engine = Engine.makeEngine()
  const { faults, outage, store } = engine
  const control: Control = {
    rows: Effect.sync(() => [...store.outbox.values()].sort((a, b) => a.seq - b.seq)),
    history: Effect.sync(() => [...store.history]),
    processed: Effect.sync(() => [...store.inbox.values()]),
    processedKeys: Effect.sync(
      () => new Set([...store.inbox.values()].map((record) => Store.inboxKey(record.consumer, record.identity)))
    ),
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
    outage: ({ lostCommitAcks, mode }) =>
      Effect.sync(() => {
        Outage.enter(outage, mode, lostCommitAcks ?? 0)
      }),
    recover: Effect.sync(() => {
      outage.current = undefined
      outage.lostCommitAcks = 0
    }),
    setSqlErrorMapping: (mapping) =>
      Effect.sync(() => {
        outage.mapping = mapping ?? Outage.defaultMapping
      }),
    clearFaults: Effect.sync(() => {
      faults.plans = []
      faults.hook = undefined
    }),
    faultsFired: Effect.sync(() => faults.fired)
  }

  return {
    control,
    transactor: MemoryTransactor.make(engine),
    outboxStore: MemoryOutboxStore.make(engine),
    inboxStore: MemoryInboxStore.make(engine),
    partitionAssignmentStore: MemoryPartitionAssignmentStore.make(engine)
  }
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
