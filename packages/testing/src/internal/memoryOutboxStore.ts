/**
 * `OutboxStore` over the in-memory engine.
 *
 * @internal
 */

import { claimed, selectClaimable } from "@effect-outbox/core/ClaimRule"
import * as CompareAndSet from "@effect-outbox/core/CompareAndSet"
import { StoreError } from "@effect-outbox/core/Errors"
import type { OutboxStatus } from "@effect-outbox/core/Lifecycle"
import { BEHIND_ITS_HEAD, type NewOutboxMessage, type OutboxMessage } from "@effect-outbox/core/OutboxMessage"
import type {
  InsertResult,
  ListFilter,
  OutboxStats,
  OutboxStore,
  StalePage,
  StaleRequest,
  TransitionOutcome,
  TransitionRequest
} from "@effect-outbox/core/OutboxStore"
import * as Clock from "effect/Clock"
import * as Effect from "effect/Effect"
import * as Option from "effect/Option"
import type { Engine } from "./memoryEngine.ts"
import * as Store from "./memoryStore.ts"

const byLease = (a: OutboxMessage, b: OutboxMessage) => a.leaseExpiresAt! - b.leaseExpiresAt! || a.seq - b.seq

/** The page of `OutboxStore.findStale`: see `StaleRequest`. */
const stalePage = (rows: ReadonlyArray<OutboxMessage>, request: StaleRequest, now: number): StalePage => {
  const expired = rows
    .filter((row) => row.status === "DISPATCHING" && row.leaseExpiresAt !== null && row.leaseExpiresAt < now)
    .sort(byLease)
  const after = request.after
  const limit = Math.max(0, request.limit)
  const page = expired
    .filter(
      (row) =>
        after === undefined ||
        row.leaseExpiresAt! > after.leaseExpiresAt ||
        (row.leaseExpiresAt === after.leaseExpiresAt && row.seq > after.seq)
    )
    .slice(0, limit)
  const inPage = new Set(page.map((row) => row.id))
  const keys = new Set(page.flatMap((row) => (row.key === null ? [] : [row.key])))
  const sameKeys = expired.filter((row) => row.key !== null && keys.has(row.key) && !inPage.has(row.id))
  const last = page[page.length - 1]
  return {
    rows: [...page, ...sameKeys].sort(byLease),
    now,
    next:
      last !== undefined && page.length >= limit ? { leaseExpiresAt: last.leaseExpiresAt!, seq: last.seq } : undefined
  }
}

/** A new row as `insert` stores it: never attempted, no lease, updated when created. */
const newRow = (m: NewOutboxMessage, seq: number): OutboxMessage => ({
  id: m.id,
  seq,
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
})

const insert =
  ({ call, store }: Engine): OutboxStore["Service"]["insert"] =>
  (messages) =>
    call<InsertResult>(
      "outbox.insert",
      () => messages.map((m) => Store.outboxResource(m.id)),
      (tx) => {
        const seen = new Set<string>()
        for (const m of messages) {
          if (seen.has(m.id) || Store.readRow(store, tx, m.id) !== undefined) {
            return {
              error: new StoreError({
                operation: "outbox.insert",
                reason: `an outbox event with id ${m.id} already exists (ids are unique)`,
                kind: "permanent"
              })
            }
          }
          seen.add(m.id)
        }
        for (const m of messages) {
          Store.writeRow(store, tx, newRow(m, store.nextSeq++))
          Store.recordChange(store, tx, {
            id: m.id,
            from: null,
            to: m.status,
            at: m.createdAt,
            operation: "insert"
          })
        }
        // the in-memory wake-up is the WakeUp service's: nothing is queued here
        return { result: { wakeUpQueued: false }, touched: messages.map((m) => Store.outboxResource(m.id)) }
      }
    )

const claim =
  ({ call, store }: Engine): OutboxStore["Service"]["claim"] =>
  (request) =>
    call(
      "outbox.claim",
      () => [],
      (tx) => {
        const before = Store.visibleRows(store, tx)
        const returned = bringBack(store, tx, before, request.now)
        const rows = returned.length === 0 ? before : Store.visibleRows(store, tx)
        const chosen = selectClaimable(rows, request, (row) =>
          Store.isLockedByOther(store, tx, Store.outboxResource(row.id))
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
        // The rows of waiting keys are not among those just claimed: `rows` still holds them.
        const setAside = setAsideYounger(store, tx, rows, waitingHeads(rows, request.now), new Set())
        return { result, touched: [...returned, ...result.map((row) => Store.outboxResource(row.id)), ...setAside] }
      }
    )

const transition =
  ({ call, store }: Engine): OutboxStore["Service"]["transition"] =>
  (requests) =>
    call(
      "outbox.transition",
      () => requests.map((r) => Store.outboxResource(r.id)),
      (tx) => {
        const outcomes: Array<TransitionOutcome> = []
        const touched: Array<string> = []
        const waiting: Waiting = new Map()
        for (const request of requests) {
          const row = Store.readRow(store, tx, request.id)
          const { next, outcome } = CompareAndSet.decide(row, request)
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
          if (outcome.outcome === "applied" && row !== undefined && next !== undefined)
            noteWaiting(waiting, row, next, request)
        }
        if (waiting.size > 0) {
          const rows = Store.visibleRows(store, tx)
          touched.push(...setAsideYounger(store, tx, rows, waiting, new Set(requests.map((r) => r.id))))
        }
        return { result: outcomes, touched }
      }
    )

/** A key whose head waits: its younger rows from `seq` on that are due at `now` are set aside. */
type Waiting = Map<string, { seq: number; now: number }>

const noteWaiting = (waiting: Waiting, row: OutboxMessage, next: OutboxMessage, request: TransitionRequest) => {
  const until = request.patch.availableAt
  if (row.status !== "DISPATCHING" || next.status !== "PENDING" || next.key === null) return
  if (until === undefined || until <= request.now) return
  const known = waiting.get(next.key)
  waiting.set(next.key, {
    seq: Math.min(known?.seq ?? next.seq, next.seq),
    now: Math.max(known?.now ?? request.now, request.now)
  })
}

/** Per key, from rows in `seq` order: its first `PENDING` row, and whether a row of it is in flight. */
const keyHeads = (rows: ReadonlyArray<OutboxMessage>) => {
  const heads = new Map<string, { head: OutboxMessage | undefined; inFlight: boolean }>()
  for (const row of rows) {
    if (row.key === null) continue
    const state = heads.get(row.key) ?? { head: undefined, inFlight: false }
    if (row.status === "DISPATCHING") state.inFlight = true
    else if (row.status === "PENDING" && state.head === undefined) state.head = row
    heads.set(row.key, state)
  }
  return heads
}

/**
 * The keys whose head (first `PENDING` row) is not yet available and of which nothing is
 * `DISPATCHING`: a claim sets aside their younger due rows, as the PostgreSQL store's claim does
 * for the waiting keys its scan meets.
 */
const waitingHeads = (rows: ReadonlyArray<OutboxMessage>, now: number): Waiting => {
  const waiting: Waiting = new Map()
  for (const [key, { head, inFlight }] of keyHeads(rows)) {
    if (!inFlight && head !== undefined && head.availableAt > now) waiting.set(key, { seq: head.seq, now })
  }
  return waiting
}

/**
 * As the PostgreSQL store does: the younger due `PENDING` rows of a waiting key are set aside
 * (`availableAt` = `BEHIND_ITS_HEAD`) once, and stay so through the head's later rounds.
 */
const setAsideYounger = (
  store: Store.Store,
  tx: Store.Transaction | undefined,
  rows: ReadonlyArray<OutboxMessage>,
  waiting: Waiting,
  requested: ReadonlySet<string>
) => {
  if (waiting.size === 0) return []
  const touched: Array<string> = []
  for (const row of rows) {
    const w = row.key === null ? undefined : waiting.get(row.key)
    if (w === undefined || row.status !== "PENDING" || row.seq <= w.seq || row.availableAt > w.now) continue
    if (requested.has(row.id) || Store.isLockedByOther(store, tx, Store.outboxResource(row.id))) continue
    Store.writeRow(store, tx, { ...row, availableAt: BEHIND_ITS_HEAD })
    touched.push(Store.outboxResource(row.id))
  }
  return touched
}

/**
 * The set-aside rows of every key whose head has gone (its first `PENDING` row is one set aside
 * and nothing of it is `DISPATCHING`) come back, at their `createdAt`. The PostgreSQL store also
 * waits for the head's due time before it looks (its table of waiting keys); here the rule is
 * checked on every claim, so a row may come back earlier, never before its head has gone.
 */
const bringBack = (
  store: Store.Store,
  tx: Store.Transaction | undefined,
  rows: ReadonlyArray<OutboxMessage>,
  now: number
) => {
  const headGone = new Set<string>()
  for (const [key, { head, inFlight }] of keyHeads(rows)) {
    if (!inFlight && head?.availableAt === BEHIND_ITS_HEAD) headGone.add(key)
  }
  const touched: Array<string> = []
  if (headGone.size === 0) return touched
  for (const row of rows) {
    if (row.key === null || !headGone.has(row.key) || row.status !== "PENDING" || row.availableAt !== BEHIND_ITS_HEAD)
      continue
    if (Store.isLockedByOther(store, tx, Store.outboxResource(row.id))) continue
    Store.writeRow(store, tx, { ...row, availableAt: Math.min(row.createdAt, now) })
    touched.push(Store.outboxResource(row.id))
  }
  return touched
}

const acquireRecoveryLease =
  ({ store }: Engine): OutboxStore["Service"]["acquireRecoveryLease"] =>
  ({ owner, ttlMillis }) =>
    Effect.map(Clock.currentTimeMillis, (now) => {
      const held = store.recoveryLease
      if (held !== undefined && held.owner !== owner && held.expiresAt > now) {
        return { acquired: false, owner: held.owner, expiresAt: held.expiresAt }
      }
      store.recoveryLease = { owner, expiresAt: now + ttlMillis }
      return { acquired: true, owner, expiresAt: now + ttlMillis }
    })

/** The rows `list` returns: see `ListFilter`. */
const listed = (rows: ReadonlyArray<OutboxMessage>, filter: ListFilter): ReadonlyArray<OutboxMessage> =>
  rows
    .filter(
      (row) =>
        (filter.statuses === undefined || filter.statuses.includes(row.status)) &&
        (filter.topic === undefined || row.topic === filter.topic) &&
        (filter.ids === undefined || filter.ids.includes(row.id)) &&
        (filter.createdBefore === undefined || row.createdAt < filter.createdBefore) &&
        (filter.updatedBefore === undefined || row.updatedAt < filter.updatedBefore) &&
        (filter.afterSeq === undefined || row.seq > filter.afterSeq)
    )
    .slice(0, Math.max(0, filter.limit))

/** What `stats` reports over the visible rows at `now`. */
const statsOf = (rows: ReadonlyArray<OutboxMessage>, now: number): OutboxStats => {
  const byStatus: { [S in OutboxStatus]?: number } = {}
  let oldestPendingCreatedAt: number | null = null
  let staleLeases = 0
  const failedKeys = new Set<string>()
  for (const row of rows) {
    if (row.status === "FAILURE" && row.key !== null) failedKeys.add(row.key)
    byStatus[row.status] = (byStatus[row.status] ?? 0) + 1
    if (row.status === "PENDING") {
      oldestPendingCreatedAt =
        oldestPendingCreatedAt === null ? row.createdAt : Math.min(oldestPendingCreatedAt, row.createdAt)
    }
    if (row.status === "DISPATCHING" && row.leaseExpiresAt !== null && row.leaseExpiresAt < now) staleLeases++
  }
  return { byStatus, oldestPendingCreatedAt, staleLeases, blockedKeys: failedKeys.size }
}

const purge =
  ({ call, store }: Engine): OutboxStore["Service"]["purge"] =>
  (request) =>
    call(
      "outbox.purge",
      () => [],
      (tx) => {
        const doomed = Store.visibleRows(store, tx)
          .filter(
            (row) =>
              request.statuses.includes(row.status) &&
              row.updatedAt < request.olderThan &&
              !Store.isLockedByOther(store, tx, Store.outboxResource(row.id))
          )
          .slice(0, Math.max(0, request.limit))
        for (const row of doomed) Store.deleteRow(store, tx, row.id)
        return { result: doomed.length, touched: doomed.map((row) => Store.outboxResource(row.id)) }
      }
    )

export const make = (engine: Engine): OutboxStore["Service"] => {
  const { read, store } = engine
  return {
    insert: insert(engine),
    claim: claim(engine),
    transition: transition(engine),
    // The memory store's clock is the Effect `Clock` (the `TestClock` in tests).
    findStale: (request) =>
      Effect.flatMap(request.now === undefined ? Clock.currentTimeMillis : Effect.succeed(request.now), (now) =>
        read("outbox.findStale", (tx) => stalePage(Store.visibleRows(store, tx), request, now))
      ),
    acquireRecoveryLease: acquireRecoveryLease(engine),
    releaseRecoveryLease: (owner) =>
      Effect.sync(() => {
        if (store.recoveryLease?.owner === owner) store.recoveryLease = undefined
      }),
    get: (id) => read("outbox.get", (tx) => Option.fromUndefinedOr(Store.readRow(store, tx, id))),
    list: (filter) => read("outbox.list", (tx) => listed(Store.visibleRows(store, tx), filter)),
    stats: (now) => read("outbox.stats", (tx) => statsOf(Store.visibleRows(store, tx), now)),
    purge: purge(engine)
  }
}
