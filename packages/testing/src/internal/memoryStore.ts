/**
 * The committed state and the transactions of the in-memory database. Everything here is
 * synchronous: JavaScript runs one fiber step at a time, so a synchronous function is an atomic
 * section, and the effectful wrappers in `InMemoryDatabase.ts` only add waiting on row locks.
 *
 * Isolation is READ COMMITTED, like PostgreSQL's default: a transaction sees the committed rows
 * plus its own staged writes; its writes lock what they touch until it ends, and other writers of
 * the same row wait (except `claim` and `purge`, which skip locked rows like `SKIP LOCKED`).
 *
 * @internal
 */

import type { OutboxStatus } from "@effect-outbox/core/Lifecycle"
import type { EventId, OutboxMessage } from "@effect-outbox/core/OutboxMessage"
import * as Deferred from "effect/Deferred"
import * as Effect from "effect/Effect"

/** One status change, as the inspection log records it (`from: null` for an insert). */
export interface StatusChange {
  readonly id: EventId
  readonly from: OutboxStatus | null
  readonly to: OutboxStatus
  readonly at: number
  readonly operation: "insert" | "claim" | "transition"
}

export interface InboxRecord {
  readonly consumer: string
  readonly identity: string
  readonly recordedAt: number
  /** The record's time (`InboxStore.recordTime`): the span it is kept in. */
  readonly eventTime: number
}

export interface Assignment {
  readonly topic: string
  readonly ownerId: string
  readonly partition: number
}

export interface Transaction {
  readonly store: Store
  status: "open" | "committed" | "rolled_back"
  /** Staged outbox rows; `null` marks a staged delete. */
  readonly outbox: Map<EventId, OutboxMessage | null>
  readonly inbox: Map<string, InboxRecord | null>
  readonly assignments: Map<string, Assignment>
  readonly history: Array<StatusChange>
  /** Completed when the transaction ends, so writers waiting on its locks can retry. */
  readonly done: Deferred.Deferred<void>
  /** The transaction whose locks this one waits for, if any (for deadlock detection). */
  waitingFor: Transaction | undefined
}

export interface Store {
  readonly outbox: Map<EventId, OutboxMessage>
  readonly inbox: Map<string, InboxRecord>
  /** The oldest inbox record time still remembered (raised when whole spans are forgotten). */
  inboxHorizon: number
  /** `topic \u0000 ownerId` → assignment. */
  readonly assignments: Map<string, Assignment>
  readonly history: Array<StatusChange>
  /** Resource name → the open transaction holding it. */
  readonly locks: Map<string, Transaction>
  /** The stale-recovery lease (applied at once, outside transactions). */
  recoveryLease: { owner: string; expiresAt: number } | undefined
  nextSeq: number
  commits: number
  rollbacks: number
}

export const makeStore = (): Store => ({
  outbox: new Map(),
  inbox: new Map(),
  inboxHorizon: Number.NEGATIVE_INFINITY,
  assignments: new Map(),
  history: [],
  locks: new Map(),
  recoveryLease: undefined,
  nextSeq: 1,
  commits: 0,
  rollbacks: 0
})

export const begin = (store: Store): Transaction => ({
  store,
  status: "open",
  outbox: new Map(),
  inbox: new Map(),
  assignments: new Map(),
  history: [],
  done: Deferred.makeUnsafe<void>(),
  waitingFor: undefined
})

const release = (tx: Transaction) => {
  for (const [resource, owner] of tx.store.locks) {
    if (owner === tx) tx.store.locks.delete(resource)
  }
  Deferred.doneUnsafe(tx.done, Effect.void)
}

export const commit = (tx: Transaction): void => {
  const store = tx.store
  for (const [id, row] of tx.outbox) {
    if (row === null) store.outbox.delete(id)
    else store.outbox.set(id, row)
  }
  for (const [key, record] of tx.inbox) {
    if (record === null) store.inbox.delete(key)
    else store.inbox.set(key, record)
  }
  for (const [key, assignment] of tx.assignments) store.assignments.set(key, assignment)
  store.history.push(...tx.history)
  tx.status = "committed"
  store.commits++
  release(tx)
}

export const rollback = (tx: Transaction): void => {
  tx.status = "rolled_back"
  tx.store.rollbacks++
  release(tx)
}

/** The open transaction of another writer that holds one of `resources`, if any. */
export const blocker = (
  store: Store,
  tx: Transaction | undefined,
  resources: Iterable<string>
): Transaction | undefined => {
  for (const resource of resources) {
    const owner = store.locks.get(resource)
    if (owner !== undefined && owner !== tx) return owner
  }
  return undefined
}

/**
 * Whether `tx` waiting for `holder` closes a cycle of waiting transactions. PostgreSQL detects
 * the same and fails one of them (SQLSTATE 40P01); so does the in-memory database.
 */
export const wouldDeadlock = (tx: Transaction | undefined, holder: Transaction): boolean => {
  if (tx === undefined) return false
  for (let t: Transaction | undefined = holder; t !== undefined; t = t.waitingFor) {
    if (t === tx) return true
  }
  return false
}

export const lock = (tx: Transaction | undefined, resources: Iterable<string>): void => {
  if (tx === undefined) return
  for (const resource of resources) tx.store.locks.set(resource, tx)
}

export const isLockedByOther = (store: Store, tx: Transaction | undefined, resource: string): boolean => {
  const owner = store.locks.get(resource)
  return owner !== undefined && owner !== tx
}

// ---------------------------------------------------------------------------------------------
// Views: what one writer (a transaction or an auto-committing call) sees.
// ---------------------------------------------------------------------------------------------

export const outboxResource = (id: EventId) => `outbox:${id}`
export const inboxKey = (consumer: string, identity: string) => `${consumer}\u0000${identity}`
/** A record's key: like PostgreSQL's, the consumer, the identity and the record's time. */
export const inboxRecordKey = (consumer: string, identity: string, eventTime: number) =>
  `${inboxKey(consumer, identity)}\u0000${eventTime}`
export const inboxResource = (key: string) => `inbox:${key}`
export const assignmentKey = (topic: string, ownerId: string) => `${topic}\u0000${ownerId}`
export const assignmentResource = (topic: string) => `assignment:${topic}`

export const readRow = (store: Store, tx: Transaction | undefined, id: EventId): OutboxMessage | undefined => {
  if (tx?.outbox.has(id)) return tx.outbox.get(id) ?? undefined
  return store.outbox.get(id)
}

/** Every visible row, ordered by `seq`. */
export const visibleRows = (store: Store, tx: Transaction | undefined): Array<OutboxMessage> => {
  const rows: Array<OutboxMessage> = []
  for (const [id, row] of store.outbox) {
    if (tx?.outbox.has(id)) continue
    rows.push(row)
  }
  if (tx !== undefined) {
    for (const row of tx.outbox.values()) if (row !== null) rows.push(row)
  }
  return rows.sort((a, b) => a.seq - b.seq)
}

export const writeRow = (store: Store, tx: Transaction | undefined, row: OutboxMessage): void => {
  if (tx !== undefined) tx.outbox.set(row.id, row)
  else store.outbox.set(row.id, row)
}

export const deleteRow = (store: Store, tx: Transaction | undefined, id: EventId): void => {
  if (tx !== undefined) tx.outbox.set(id, null)
  else store.outbox.delete(id)
}

export const recordChange = (store: Store, tx: Transaction | undefined, change: StatusChange): void => {
  if (tx !== undefined) tx.history.push(change)
  else store.history.push(change)
}

export const readInbox = (store: Store, tx: Transaction | undefined, key: string): InboxRecord | undefined => {
  if (tx?.inbox.has(key)) return tx.inbox.get(key) ?? undefined
  return store.inbox.get(key)
}

export const visibleInbox = (store: Store, tx: Transaction | undefined): Array<[string, InboxRecord]> => {
  const out: Array<[string, InboxRecord]> = []
  for (const [key, record] of store.inbox) {
    if (tx?.inbox.has(key)) continue
    out.push([key, record])
  }
  if (tx !== undefined) {
    for (const [key, record] of tx.inbox) if (record !== null) out.push([key, record])
  }
  return out
}

export const writeInbox = (store: Store, tx: Transaction | undefined, key: string, record: InboxRecord | null) => {
  if (tx !== undefined) tx.inbox.set(key, record)
  else if (record === null) store.inbox.delete(key)
  else store.inbox.set(key, record)
}

export const visibleAssignments = (store: Store, tx: Transaction | undefined, topic: string): Array<Assignment> => {
  const out: Array<Assignment> = []
  for (const assignment of store.assignments.values()) if (assignment.topic === topic) out.push(assignment)
  if (tx !== undefined) {
    for (const [key, assignment] of tx.assignments) {
      if (assignment.topic === topic && !store.assignments.has(key)) out.push(assignment)
    }
  }
  return out
}

export const writeAssignment = (store: Store, tx: Transaction | undefined, assignment: Assignment) => {
  const key = assignmentKey(assignment.topic, assignment.ownerId)
  if (tx !== undefined) tx.assignments.set(key, assignment)
  else store.assignments.set(key, assignment)
}
